package Fault;

# Helpers for FastFile's reliability tests (t/80-faults.t, t/82-signals.t,
# t/85-concurrency.t, t/90-fuzz.t, t/95-security.t, xt/).
#
#   use lib 't/lib';
#   use Fault qw(strace_why run_traced temps_in slurp spew);
#
# run_traced runs a snippet of perl in a child perl under strace, with faults
# injected (strace -e inject=...) and strace limited to the paths under test
# (-P), so nothing perl does at startup is touched. The child forges $$ to
# $Fault::PID, which makes the temp name "<target>.tmp.$Fault::PID" known
# before the child starts (perlvar: $$ may be assigned "for testing purposes").
# Only the injected syscalls stop the child (--seccomp-bpf), unless a signal
# is injected too (strace 6.1 does not deliver signal= under seccomp-bpf).
# Note: strace 6.1's -P matches only the first path of rename(2).

use strict;
use warnings;

use Exporter 'import';
use Data::Dumper ();
use FFTest qw(slurp spew which);   # slurp, spew re-exported
use File::Spec ();
use POSIX ();

our @EXPORT_OK = qw(strace_why run_traced run_traced_many ncpu temps_in slurp spew errstr inc_args
                    ref_bytes child_perl_code);

our $PID = 4242;    # the $$ traced children pretend to have

my $STRACE_WHY;

# '' when strace can trace a child perl and inject faults, else why not.
sub strace_why {
    return $STRACE_WHY if defined $STRACE_WHY;
    my $strace = which('strace');
    return $STRACE_WHY = 'strace not installed' unless $strace;
    my $ver = `strace -V 2>/dev/null` // '';
    my ($maj, $min) = $ver =~ /version (\d+)\.(\d+)/;
    return $STRACE_WHY = 'cannot run strace -V' unless defined $maj;
    return $STRACE_WHY = "strace $maj.$min is too old (5.3+ for -e inject, when=, --seccomp-bpf)"
        if $maj < 5 || ($maj == 5 && $min < 3);
    # ptrace may be forbidden (containers, yama); injection must really work
    my $rc = _system_quiet($strace, '-qq', '-o', '/dev/null',
        '-e', 'inject=getppid:retval=4242', $^X, '-e', 'exit(getppid() == 4242 ? 0 : 3)');
    return $STRACE_WHY = "strace cannot trace or inject here (exit status $rc)" if $rc;
    return $STRACE_WHY = '';
}

sub _system_quiet {
    my @cmd = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    waitpid $pid, 0;
    return $? >> 8 || $? & 127;
}

# -I options that let a child perl find the FastFile this test loaded
# (blib, under `prove -b` or `make test`), as absolute paths.
# Only the directories perl does not search anyway: every extra one costs
# a stat per module loaded, and traced children start often.
my %DEFAULT_INC;
sub inc_args {
    unless (%DEFAULT_INC) {
        my $pid = open(my $ph, '-|') // die "fork: $!";
        if (!$pid) {
            delete @ENV{qw(PERL5LIB PERLLIB PERL5OPT)};
            exec $^X, '-e', 'print "$_\n" for @INC' or POSIX::_exit(127);
        }
        chomp(my @def = <$ph>);
        close $ph;
        %DEFAULT_INC = map { $_ => 1 } @def, '';
    }
    my @inc = grep { !ref && -d && !$DEFAULT_INC{$_} } @INC;
    return map { '-I' . File::Spec->rel2abs($_) } @inc;
}

# The text "$!" has for errno number n (the tests run with LC_ALL=C).
BEGIN { *errstr = \&FFTest::errno_text }

# Names in dir that look like FastFile temp files ("<name>.tmp.<pid>[.<hex>]").
sub temps_in {
    my ($dir) = @_;
    opendir my $dh, $dir or return;
    return sort grep { /\.tmp\.\d+(?:\.[0-9a-f]+)?\z/ } readdir $dh;
}

# The bytes the reference file_set_contents writes for $data: print to an
# in-memory handle (wide characters as their UTF-8 bytes) without force_utf8,
# Encode's lax "utf8" with it.
sub ref_bytes {
    my ($data, $force_utf8) = @_;
    $data = '' unless defined $data;
    if ($force_utf8) {
        require Encode;
        return Encode::encode('utf8', "$data");
    }
    my $out = '';
    open my $fh, '>', \$out or die "in-memory handle: $!";
    { no warnings 'utf8'; print {$fh} $data; }
    close $fh;
    return $out;
}

# The program a traced child runs. $spec (in $ARGV[0], a Data::Dumper text)
# has: code (perl run in a string eval, with FastFile's functions imported
# and $T, $D, $O set from target, data, opts), pid (forged $$). It prints one
# line "RESULT <ok> <errno> <ret> <err> <warnings...>", each field hex (ret:
# "-" for undef), to stay cheap: no module beyond FastFile is loaded.
sub child_perl_code {
    return <<'CHILD';
use strict; use warnings;
my $spec = eval $ARGV[0]; die "bad spec: $@" if $@;
my @warnings;
$SIG{__WARN__} = sub { push @warnings, $_[0] };
require FastFile; FastFile->import(':all');
our ($T, $D, $O) = @{$spec}{qw(target data opts)};
$$ = $spec->{pid} if $spec->{pid};
my @r = eval "#line 1 traced\n" . $spec->{code};
my $errno = $! + 0;
my $err = $@;
my $ok = $err eq '' ? 1 : 0;
my $h = sub { defined $_[0] ? 'x' . unpack('H*', $_[0]) : '-' };
print join(' ', 'RESULT', $ok, $errno, $h->($r[0]), $h->($err), map { $h->($_) } @warnings), "\n";
CHILD
}

# run_traced(code => '...', target => ..., data => ..., opts => {...},
#            paths => [...], inject => ['write:error=ENOSPC:when=1', ...],
#            strace => [extra strace args], env => {...}, log => $file)
# Returns the child's result hash plus log (strace's output), injected
# (number of "(INJECTED)" lines) and status ($? of strace).
sub run_traced {
    my (%a) = @_;
    my $spec = {
        code   => $a{code},
        target => $a{target},
        data   => $a{data},
        opts   => $a{opts},
        pid    => exists $a{pid} ? $a{pid} : $PID,
    };
    my $log = $a{log} or die "run_traced: log file needed";
    my $dump = do {
        local $Data::Dumper::Useqq = 1; local $Data::Dumper::Terse = 1;
        local $Data::Dumper::Indent = 0; local $Data::Dumper::Sortkeys = 1;
        Data::Dumper::Dumper($spec);
    };
    # only the syscalls injected into stop the child (seccomp-bpf): the many
    # syscalls of perl's startup then cost nothing
    my %sc = map { /^([a-z0-9_]+)/ ? ($1 => 1) : () } @{ $a{inject} || [] }, @{ $a{trace} || [] };
    my @cmd = ('strace', '-f', '-qq', '-o', $log, '-e', 'signal=none');
    # (strace 6.1 does not deliver an injected signal= under --seccomp-bpf)
    my $signals = grep { /:signal=/ } @{ $a{inject} || [] };
    push @cmd, '-e', 'trace=' . join(',', sort keys %sc) if %sc;
    push @cmd, '--seccomp-bpf' if %sc && !$signals;
    push @cmd, map { ('-P', $_) } @{ $a{paths} || [] };
    push @cmd, map { ('-e', "inject=$_") } @{ $a{inject} || [] };
    push @cmd, @{ $a{strace} || [] };
    # a preloaded sanitizer runtime belongs to the perl under test, not to strace
    my %env = (LC_ALL => 'C', %{ $a{env} || {} });
    my $preload = $ENV{LD_PRELOAD};
    push @cmd, '-E', "LD_PRELOAD=$preload" if defined $preload && length $preload;
    push @cmd, '--', $^X, inc_args(), '-e', child_perl_code(), $dump;

    my $out = '';
    my $pid = open(my $ph, '-|') // die "fork: $!";
    if (!$pid) {
        delete $ENV{LD_PRELOAD};
        @ENV{ keys %env } = values %env;
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    { local $/; $out = <$ph> // ''; }
    close $ph;
    my $status = $?;
    my $res;
    if ($out =~ /^RESULT (.*)$/m) {
        my $uh = sub { $_[0] eq '-' ? undef : pack('H*', substr($_[0], 1)) };
        my ($ok, $errno, $ret, $err, @w) = split / /, $1;
        $res = { ok => $ok, errno => $errno, ret => $uh->($ret), err => $uh->($err),
                 warnings => [ map { $uh->($_) } @w ] };
    } else {
        $res = { ok => 0, err => "no result from child: $out", errno => -1, warnings => [] };
    }
    $res->{output} = $out;
    $res->{status} = $status;
    $res->{log} = slurp($log) // '';
    $res->{injected} = () = $res->{log} =~ /\(INJECTED\)/g;
    return $res;
}

sub ncpu {
    open my $fh, '<', '/proc/cpuinfo' or return 1;
    my $n = grep { /^processor\s*:/ } <$fh>;
    return $n || 1;
}

# run_traced for each hash in @$specs, up to $o{jobs} at a time (strace
# costs mostly context switches, so this scales with the CPUs). Results come
# back in order. Nothing else may be a child of the caller meanwhile.
sub run_traced_many {
    my ($specs, %o) = @_;
    my $jobs = $o{jobs} || 2 * ncpu();
    my $dir = $o{dir} or die 'run_traced_many: dir needed';
    inc_args();    # computed once, here, not in every worker
    my (%running, @res);
    my $next = 0;
    while ($next < @$specs || %running) {
        while ($next < @$specs && keys %running < $jobs) {
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                my $r = eval { run_traced(%{ $specs->[$next] }) }
                     || { ok => 0, err => "run_traced died: $@", errno => -1, warnings => [] };
                local $Data::Dumper::Useqq = 1; local $Data::Dumper::Terse = 1;
                local $Data::Dumper::Indent = 0;
                if (open my $fh, '>', "$dir/result.$next") {
                    print {$fh} Data::Dumper::Dumper($r);
                    close $fh;
                }
                POSIX::_exit(0);
            }
            $running{$pid} = $next++;
        }
        my $pid = waitpid(-1, 0);
        last if $pid < 0;
        delete $running{$pid};
    }
    for my $i (0 .. $#$specs) {
        my $text = slurp("$dir/result.$i");
        my $r = defined $text ? eval $text : undef;
        $res[$i] = ref $r eq 'HASH' ? $r
                 : { ok => 0, err => 'worker gave no result', errno => -1, warnings => [],
                     log => '', injected => 0 };
        unlink "$dir/result.$i";
    }
    return \@res;
}

1;
