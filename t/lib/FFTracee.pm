package FFTracee;

# Compiles a snippet. First in the file: no lexical of this file is in
# scope, as in a perl of its own.
sub compile { return eval $_[0] }

# The long-lived perl in which FFTest::strace_call runs snippets with
# attach => 1 (see there). A child perl costs ~30 ms of CPU to start and
# load FastFile, more under strace -f; this one starts once, then for each
# snippet it is sent:
#
#  - compiles it in a package of its own (FastFile :all, $T $D $O, the
#    setup), with the snippet's @ARGV, %ENV and locale, the default signal
#    handlers, warnings collected;
#  - starts strace -p on itself (its child: it is small, so the fork is
#    cheap) and repeats chdir to the ready marker until strace answers it
#    (-e inject=chdir:retval=0:when=1): tracing and the injection counts
#    (when=) start there, as at a child perl's exec;
#  - forges $$ if asked, runs the snippet between the begin and end
#    markers, prints the result line, sends strace SIGTERM (it detaches)
#    and waits for it: only then, untraced, it answers and reads the next.
#
# fd 0: the requests (length in 12 digits, a Data::Dumper hash); fd 3: the
# replies, one line per request: "done <strace's status>", or "noattach
# <status>" when strace could not attach (yama, a container).

use strict;
use warnings;

use IO::Handle ();
use POSIX ();
use FastFile ();
use FastFile::Writer ();

our @SPEC;    # the case being compiled: its $T, $D, $O

sub serve {
    open my $reply, '>&=', 3 or die "fd 3: $!\n";
    $reply->autoflush(1);
    _allow_child_tracer();
    my ($real_pid, %env) = ($$, %ENV);
    my $n = 0;
    # sysread: a readline would name STDIN in the snippets' die messages
    while (1) {
        my ($len, $text);
        _read(12, $len) && _read($len, $text) or last;
        my $req = eval $text or last;
        print {$reply} session($req, \$n, $real_pid, \%env), "\n";
    }
    POSIX::_exit(0);
}

# $n bytes from fd 0 into $_[1]; false at the end.
sub _read {
    my ($n) = @_;
    $_[1] = '';
    while (length $_[1] < $n) {
        my $got = sysread STDIN, $_[1], $n - length $_[1], length $_[1];
        return 0 unless $got;
    }
    return 1;
}

# One strace -p for the request's cases; the reply line. Before strace
# attaches: each case compiled, its output files opened (the worker opens
# nothing while traced: an injection without -P would hit it). Each case
# but the last runs in a child of its own, which strace -f follows: each
# process has its own injection counts (when=), so each case is counted
# from its start, as alone; the last runs in the worker, whose counts start
# at the ready marker (nothing it does meanwhile is a syscall a test
# injects: fork, wait4, dup2, rt_sigaction).
sub session {
    my ($req, $n, $real_pid, $env) = @_;
    my @cases = @{ $req->{cases} };
    for my $c (@cases) {
        $$n++;
        open $c->{stdout}, '>', "$c->{ctl}/stdout" or die "$c->{ctl}/stdout: $!\n";
        open $c->{stderr}, '>', "$c->{ctl}/stderr" or die "$c->{ctl}/stderr: $!\n";
        $c->{warnings} = [];
        default_signals();
        local $SIG{__WARN__} = sub { push @{ $c->{warnings} }, $_[0] };
        local @FFTracee::SPEC = @{$c}{qw(target data opts)};
        # setup runs here, at compile time: with the case's @ARGV and %ENV, as
        # in a perl started for it
        local @ARGV = @{ $c->{args} || [] };
        local %ENV = (%$env, %{ $c->{env} || {} });
        $c->{snippet} = compile(join "\n",
            "package FFTracee::Case$$n; use strict; use warnings; no warnings 'void';",
            'use FastFile qw(:all); use FastFile::Writer;',
            'our ($T, $D, $O) = @FFTracee::SPEC;',
            (defined $c->{setup} ? "$c->{setup};" : ''),
            "sub {\n#line 1 traced\n$c->{code}\n}");
        $c->{error} = $@;
        # the handlers its setup installed, for its run
        $c->{signals} = { map { $_ => $SIG{$_} } grep { defined $SIG{$_} && $SIG{$_} ne 'DEFAULT' } keys %SIG };
    }
    my $spid = fork // die "fork: $!\n";
    if (!$spid) {
        POSIX::close(3);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', "$cases[0]{ctl}/strace.err";
        delete $ENV{LD_PRELOAD};    # a sanitizer runtime is the perl's, not strace's
        exec { $req->{strace}[0] } @{ $req->{strace} }, '-p', $real_pid or POSIX::_exit(127);
    }
    my $give_up = time + 30;
    until (chdir $req->{ready}) {
        if (waitpid($spid, POSIX::WNOHANG()) == $spid || time > $give_up) {
            my $status = $?;
            kill 'KILL', $spid;
            waitpid $spid, 0;
            return "noattach $status";
        }
        select undef, undef, undef, 0.001;
    }
    my @pids;
    for my $c (@cases) {
        prepare($c, $env);
        if ($c == $cases[-1]) {    # the last in the worker itself: a fork less
            run($c);
            push @pids, $real_pid;
        } else {
            my $pid = fork // die "fork: $!\n";
            if (!$pid) {
                chdir $c->{markers}[0];    # its first chdir: strace answers it
                run($c);
                POSIX::_exit(0);
            }
            waitpid $pid, 0;
            push @pids, $pid;
        }
        $$ = $real_pid;
        alarm 0;
    }
    kill 'TERM', $spid;
    waitpid $spid, 0;
    return "done $? @pids";
}

# The process as a perl started for case $c: its output files, %ENV and
# locale, @ARGV, the signal handlers its setup installed.
sub prepare {
    my ($c, $env) = @_;
    POSIX::dup2(fileno $c->{stdout}, 1);
    POSIX::dup2(fileno $c->{stderr}, 2);
    %ENV = (%$env, %{ $c->{env} });
    POSIX::setlocale(POSIX::LC_ALL(), '');
    default_signals();
    $SIG{$_} = $c->{signals}{$_} for keys %{ $c->{signals} };
    @ARGV = @{ $c->{args} };
}

# Perl's handlers as at the start (those ignored stay ignored, as across exec).
sub default_signals {
    $SIG{$_} = 'DEFAULT' for grep { defined $SIG{$_} && $SIG{$_} !~ /\A(?:IGNORE|DEFAULT)\z/ } keys %SIG;
}

# Case $c between its markers, then its result line.
sub run {
    my ($c) = @_;
    my (undef, $m_begin, $m_end) = @{ $c->{markers} };
    if (!$c->{snippet}) {
        print STDERR $c->{error};
        STDERR->flush;
        return;
    }
    my @warnings = @{ $c->{warnings} };
    local $SIG{__WARN__} = sub { push @warnings, $_[0] };
    $$ = $c->{pid} if $c->{pid};
    chdir $m_begin;
    my @r = do { local ($\, $,, $_); local $/ = "\n"; eval { $c->{snippet}->() } };
    my ($errno, $err) = ($! + 0, $@);
    chdir $m_end;
    result($err, $errno, \@r, \@warnings);
}

# The result line on stdout, as strace_call's child perl prints it.
sub result {
    my ($err, $errno, $ret, $warnings) = @_;
    local ($\, $,);
    my $h = sub { defined $_[0] ? 'x' . unpack('H*', $_[0]) : '-' };
    print STDOUT "\nFFTEST-RESULT ", join(' ', $$, $err eq '' ? 1 : 0, $errno, $h->($ret->[0]), $h->($err),
                                          map { $h->($_) } @$warnings), "\n";
    STDOUT->flush;
}

# Under yama's ptrace_scope 1 only an ancestor may attach: let any process
# of ours (the strace child) do it. Without syscall.ph strace fails to
# attach and strace_call falls back to a child perl.
sub _allow_child_tracer {
    open my $fh, '<', '/proc/sys/kernel/yama/ptrace_scope' or return;
    my $scope = <$fh>;
    return unless $scope && $scope == 1;
    my $prctl = eval { require 'syscall.ph'; &SYS_prctl } or return;
    syscall($prctl, 0x59616d61, -1);    # PR_SET_PTRACER, PR_SET_PTRACER_ANY
}

1;
