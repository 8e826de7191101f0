use strict;
use warnings;

# Makefile.PL's decisions, run in a copy of the distribution: "OS
# unsupported" (status 0, no Makefile: CPAN testers report NA) on a system
# without POSIX file semantics ($^O set before Makefile.PL runs) or whose
# compiler lacks a call the core needs (a fake CC); FF_PORTABLE=1 defines
# FF_PORTABLE; another CC links with itself and leaves out perl's flags it
# rejects.

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew);
use Config;
use File::Copy ();
use File::Path ();

plan skip_all => 'no Makefile.PL here (run from the distribution root)' unless -f 'Makefile.PL' && -f 'MANIFEST';
plan skip_all => 'needs a gcc-compatible compiler (gccversion)' unless $Config{gccversion};

my $dir = tempdir();
my $perl = $^X;
my @inc = map { "-I$_" } grep { !ref } @INC;    # the same modules (MakeMaker) as this perl

# the distribution's files, as a CPAN tester unpacks them
for my $file (map { /^(\S+)/ ? $1 : () } split /\n/, slurp('MANIFEST')) {
    (my $sub = "$dir/$file") =~ s{/[^/]+\z}{};
    File::Path::make_path($sub);
    File::Copy::copy($file, "$dir/$file") or die "copy $file: $!";
}

# Makefile.PL run as perl would on $os: output (both streams) and status
sub configure {
    my ($os, @args) = @_;
    unlink "$dir/Makefile";
    my $pid = open my $out, '-|';
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>&', \*STDOUT or die;
        chdir $dir or die "$dir: $!";
        exec $perl, @inc, '-e', '$^O = shift; @ARGV = @ARGV; do "./Makefile.PL"; die $@ if $@; exit 0',
            $os, @args;
        die "exec: $!";
    }
    my $text = join '', <$out>;
    close $out;
    return ($text, $?);
}

sub makefile_var {
    my ($name) = @_;
    my ($v) = map { /^\Q$name\E = (.*)$/ ? $1 : () } split /\n/, slurp("$dir/Makefile") // '';
    return $v;
}

for my $os (qw(MSWin32 cygwin os2)) {
    my ($out, $status) = configure($os);
    like($out, qr/^OS unsupported: FastFile cannot replace files atomically and durably on \Q$os\E: \S/m,
         "$os: OS unsupported, naming what is missing");
    is($status, 0, "$os: status 0 (NA, not FAIL)");
    ok(!-e "$dir/Makefile", "$os: no Makefile written");
}

# a compiler whose libc has no renameat: the probe says so
my $fake = "$dir/cc-without-renameat";
spew($fake, <<"SH");
#!/bin/sh
for a; do
    case \$a in *.c) if grep -q renameat "\$a"; then echo "\$a: error: 'renameat' undeclared" >&2; exit 1; fi ;; esac
done
exec $Config{cc} "\$@"
SH
chmod 0755, $fake or die "chmod $fake: $!";
my ($out, $status) = configure('freebsd', "CC=$fake");
like($out, qr/^OS unsupported: FastFile cannot replace files atomically and durably on freebsd: renameat$/m,
     'a libc without renameat: OS unsupported, names renameat');
is($status, 0, 'without renameat: status 0');
ok(!-e "$dir/Makefile", 'without renameat: no Makefile written');

# the supported builds
($out, $status) = configure('linux');
is($status, 0, 'linux: configures');
unlike($out, qr/unsupported/, 'linux: supported');
unlike(makefile_var('DEFINE') // '', qr/FF_PORTABLE/, 'linux: the Linux build');

($out, $status) = configure('linux', 'FF_PORTABLE=1');
is($status, 0, 'FF_PORTABLE=1: configures');
like($out, qr/the portable build/, 'FF_PORTABLE=1: says so');
like(makefile_var('DEFINE') // '', qr/(?:^| )-DFF_PORTABLE(?: |$)/, 'FF_PORTABLE=1: -DFF_PORTABLE');
unlike($out, qr/not a known MakeMaker parameter/, 'FF_PORTABLE is not passed on to MakeMaker');

($out, $status) = configure('freebsd');
is($status, 0, 'freebsd with a POSIX.1-2008 compiler: configures');
like(makefile_var('DEFINE') // '', qr/-DFF_PORTABLE/, 'off Linux: always the portable build');

# another compiler: linked with it, perl's flags it rejects left out
my $picky = "$dir/cc-without-fwrapv";
spew($picky, <<"SH");
#!/bin/sh
for a; do
    if [ "\$a" = -fwrapv ]; then echo "error: unknown argument: '-fwrapv'" >&2; exit 1; fi
done
exec $Config{cc} "\$@"
SH
chmod 0755, $picky or die "chmod $picky: $!";
($out, $status) = configure('linux', "CC=$picky");
is($status, 0, 'another CC: configures');
is(makefile_var('CC'), $picky, 'another CC: compiles with it');
is(makefile_var('LD'), $Config{ld} eq $Config{cc} ? $picky : $Config{ld},
   'another CC: links with it (perl links with its compiler)');
SKIP: {
    skip "perl's ccflags have no -fwrapv", 2 unless " $Config{ccflags} " =~ / -fwrapv /;
    like($out, qr/\Q$picky\E rejects perl's compiler flag -fwrapv: left out/, 'a rejected flag: said');
    unlike(makefile_var('CCFLAGS'), qr/-fwrapv/, 'a rejected flag: left out of CCFLAGS');
}

done_testing;
