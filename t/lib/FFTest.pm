package FFTest;

# Helpers shared by FastFile's tests.
#
#   use lib 't/lib';
#   use FFTest qw(tempdir slurp spew temps_in have_strace strace_call);
#
# strace_call runs a snippet of perl in a child perl (with this build's blib)
# and traces it with strace. The child is started first and strace attaches to
# it (-p), so the child's pid - and with it the temp name "<file>.tmp.<pid>" -
# is known before strace starts. That lets a fault be injected with a path
# filter (-P <temp>): only syscalls that name the temp file, by path or by an
# fd open on it, are traced and tampered with, so nothing perl does on its own
# is ever hit, whatever `when=` says. The child's real $$ is used, untouched.
#
# The snippet runs between two marker syscalls, chdir() to paths that do not
# exist (perl never chdirs on its own); the records between them are returned.
# Before the first marker the child spins on a third marker until the parent
# has seen it in strace's log: from then on every syscall is traced.

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use POSIX ();
use Errno ();

our @EXPORT_OK = qw(tempdir slurp spew temps_in have_strace strace_call blib_inc which
                    warnings_of errno_text);

# Absolute paths of this build, taken when the test starts (from the dist root).
my $ROOT = POSIX::getcwd();
my @BLIB = map { "$ROOT/blib/$_" } qw(lib arch);

sub blib_inc { return map { "-I$_" } @BLIB }

sub tempdir { return File::Temp::tempdir('fftest-XXXXXX', TMPDIR => 1, CLEANUP => 1) }

# The file's bytes; undef when it does not exist.
sub slurp {
    my ($path) = @_;
    open(my $fh, '<:raw', $path) or return $!{ENOENT} ? undef : die "slurp '$path': $!\n";
    local $/;
    my $data = <$fh>;
    close $fh;
    return defined $data ? $data : '';
}

# Write $data to $path the plain way, then chmod it when $mode is given.
sub spew {
    my ($path, $data, $mode) = @_;
    open my $fh, '>:raw', $path or die "spew '$path': $!\n";
    print {$fh} $data or die "spew '$path': $!\n";
    close $fh or die "spew '$path': $!\n";
    chmod $mode, $path or die "chmod '$path': $!\n" if defined $mode;
    return 1;
}

# Names (not paths) of leftover temp files in $dir, sorted.
sub temps_in {
    my ($dir) = @_;
    opendir my $dh, $dir or die "opendir '$dir': $!\n";
    my @t = sort grep { /\.tmp\./ } readdir $dh;
    closedir $dh;
    return @t;
}

# Runs $code and returns the warnings it gave (and its die, if any, as second).
sub warnings_of (&) {
    my ($code) = @_;
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    $code->();
    return @w;
}

# The text perl gives for an errno value ("$!"), in the current locale.
sub errno_text {
    my ($errno) = @_;
    local $! = $errno;
    return "$!";
}

# The path of $prog in PATH, or nothing.
sub which {
    my ($prog) = @_;
    for my $d (split /:/, (defined $ENV{PATH} ? $ENV{PATH} : '')) {
        return "$d/$prog" if length $d && -x "$d/$prog" && !-d _;
    }
    return;
}

my $HAVE_STRACE;

# '' when strace can trace a child here, else the reason why not.
sub have_strace {
    return $HAVE_STRACE if defined $HAVE_STRACE;
    return $HAVE_STRACE = 'strace not found in PATH' unless which('strace');
    return $HAVE_STRACE = "blib not built (no $BLIB[1])" unless -d $BLIB[1];
    my $r = eval { strace_call('1', timeout => 10) };
    if (!$r) {
        (my $e = $@ || 'unknown failure') =~ s/\s+\z//;
        return $HAVE_STRACE = "strace unusable: $e";
    }
    if (!$r->{traced}) {
        (my $e = $r->{strace_err}) =~ s/\s+/ /g;
        return $HAVE_STRACE = "strace cannot attach (ptrace not permitted?): $e";
    }
    return $HAVE_STRACE = '';
}

my $SEQ = 0;

# strace_call($perl_code, %opts) runs $perl_code (a string) in a child perl
# with FastFile loaded, between the markers, under strace. Options:
#   setup   => perl code run before the first marker (build big data there)
#   args    => [...]   @ARGV of the child
#   file    => $target the file the snippet writes; %TMP% below is
#                      "$target.tmp.<child pid>", %FILE% $target, %PID% the
#                      child's pid
#   paths   => [...]   trace only syscalls on these paths (-P), markers added
#   trace   => 'set'   -e trace=set (chdir is added for the markers)
#   inject  => [...]   each -e inject=...
#   ulimit_f => N      run the child under `ulimit -f N` (512-byte blocks)
#   env     => {...}   extra environment for the child
#   timeout => seconds (default 30)
# Returns a hash: calls => [records between the markers], traced (markers
# seen), ok (the snippet did not die), err ($@), errno ($! right after the
# snippet, numeric), stdout, stderr (of the child), status ($? of the child),
# pid, tmp, log (the whole strace log), strace_err.
# A record: {name, args, ret, errno, injected, line}; a signal delivered to
# the child is {name => 'signal', sig => 'SIGALRM', line}.
sub strace_call {
    my ($code, %o) = @_;
    my $timeout = $o{timeout} || 30;
    my $ctl = tempdir();
    my $go = "$ctl/go";
    my $n = ++$SEQ;
    my ($m_sync, $m_begin, $m_end) = map { "/nonexistent-fftest-$_-$$-$n" } qw(sync begin end);

    my $wrapper = join "\n",
        'use strict; no warnings "void";',
        'my $__go = shift @ARGV;',
        (defined $o{setup} ? $o{setup} : ''),
        "until (-e \$__go) { chdir '$m_sync'; select undef, undef, undef, 0.002 }",
        "chdir '$m_begin';",
        "my \$__ok = eval {\n$code\n;1 };",
        'my $__errno = $! + 0; my $__err = $@;',
        "chdir '$m_end';",
        '$| = 1;',
        'print "\nFFTEST-RESULT ", join(" ", $__ok ? 1 : 0, $__errno, unpack("H*", $__err)), "\n";',
        '';

    my @perl = ($^X, @BLIB ? blib_inc() : (), '-MFastFile', '-e', $wrapper, $go,
                @{ $o{args} || [] });
    my @cmd = defined $o{ulimit_f}
        ? ('/bin/sh', '-c', "ulimit -f $o{ulimit_f} && exec \"\$@\"", 'sh', @perl)
        : @perl;

    my $pid = fork;
    die "fork: $!\n" unless defined $pid;
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$ctl/stdout";
        open STDERR, '>', "$ctl/stderr";
        $ENV{$_} = $o{env}{$_} for keys %{ $o{env} || {} };
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        POSIX::_exit(127);
    }

    my $tmp = defined $o{file} ? "$o{file}.tmp.$pid" : undef;
    my $subst = sub {
        my ($s) = @_;
        $s =~ s/%PID%/$pid/g;
        $s =~ s/%TMP%/$tmp/g if defined $tmp;
        $s =~ s/%FILE%/$o{file}/g if defined $o{file};
        return $s;
    };
    my @st = ('strace', '-f', '-qq', '-o', "$ctl/log");
    if (defined $o{trace}) {
        push @st, '-e', 'trace=' . $subst->($o{trace}) . ',chdir';
    }
    push @st, '-e', 'inject=' . $subst->($_) for @{ $o{inject} || [] };
    if ($o{paths} && @{ $o{paths} }) {
        push @st, map { ('-P', $_) } (map { $subst->($_) } @{ $o{paths} }), $m_sync, $m_begin, $m_end;
    }
    push @st, '-p', $pid;

    my $spid = fork;
    die "fork: $!\n" unless defined $spid;
    if (!$spid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', "$ctl/strace.err";
        { no warnings 'exec'; exec { $st[0] } @st; }
        POSIX::_exit(127);
    }

    # wait until strace shows the sync marker (or gives up)
    my $deadline = time + $timeout;
    my ($synced, $strace_gone) = (0, 0);
    while (time <= $deadline) {
        if (open my $lh, '<', "$ctl/log") {
            local $/;
            my $l = <$lh>;
            if (defined $l && index($l, $m_sync) >= 0) { $synced = 1; last }
        }
        if (waitpid($spid, POSIX::WNOHANG()) == $spid) { $strace_gone = 1; last }
        select undef, undef, undef, 0.002;
    }
    spew($go, '');    # let the child go (also when strace failed: it finishes untraced)

    my $status = _wait_for($pid, $deadline + 5);
    if (!$strace_gone) {
        my $st = _wait_for($spid, time + 10);
        if (!defined $st) { kill 'KILL', $spid; waitpid $spid, 0 }
    }
    if (!defined $status) {
        kill 'KILL', $pid;
        waitpid $pid, 0;
        die "traced child did not finish in ${timeout}s\n";
    }

    my %r = (pid => $pid, tmp => $tmp, status => $status, synced => $synced, calls => [],
             log => (-e "$ctl/log" ? slurp("$ctl/log") : ''),
             strace_err => (-e "$ctl/strace.err" ? slurp("$ctl/strace.err") : ''),
             stdout => slurp("$ctl/stdout"), stderr => slurp("$ctl/stderr"));
    if ($r{stdout} =~ s/\n?FFTEST-RESULT (\d) (\d+) ([0-9a-f]*)\n\z//) {
        @r{qw(ok errno err)} = ($1, $2, pack('H*', $3));
    }
    my $in = 0;
    for my $line (split /\n/, $r{log}) {
        if (index($line, $m_begin) >= 0) { $in = 1; $r{traced} = 1; next }
        if (index($line, $m_end) >= 0) { $in = 0; next }
        next unless $in;
        my $rec = _parse_line($line);
        push @{ $r{calls} }, $rec if $rec;
    }
    return \%r;
}

sub _wait_for {
    my ($pid, $deadline) = @_;
    while (time <= $deadline) {
        my $w = waitpid $pid, POSIX::WNOHANG();
        return $? if $w == $pid;
        return undef if $w < 0;
        select undef, undef, undef, 0.005;
    }
    return undef;
}

sub _parse_line {
    my ($line) = @_;
    $line =~ s/^\d+\s+//;    # pid prefix of -f
    return { name => 'signal', sig => $1, line => $line } if $line =~ /^--- (SIG\w+)/;
    return undef if $line =~ /^\+\+\+ /;
    return { name => $1, line => $line, partial => 1 } if $line =~ /^(\w+)\(.*<unfinished \.\.\.>$/;
    if (my ($name, $args, $ret, $errno, $rest)
            = $line =~ /^(\w+)\((.*)\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?)(?:\s+(E[A-Z0-9]+)\s+\([^)]*\))?(.*)$/) {
        return { name => $name, args => $args, ret => $ret, errno => $errno,
                 injected => ($rest =~ /INJECTED/ ? 1 : 0), line => $line };
    }
    return { name => '?', line => $line };
}

1;
