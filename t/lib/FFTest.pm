package FFTest;

# The test-support layer of FastFile's tests: one of each helper.
#
#   use lib 't/lib';
#   use FFTest qw(tempdir slurp spew temps_in errno_text strace_why strace_call);
#
# Loaded into a test script (package main), it makes every warning the test
# does not catch itself a failure; warnings_of { ... } catches the ones a test
# expects, no_warnings($what) asserts that none came since the last check.
#
# strace_call runs a snippet of perl in a child perl under strace (fault
# injection with -e inject=..., strace limited to paths with -P), or with
# attach => 1 in a long-lived perl strace -p attaches to (t/lib/FFTracee.pm). The snippet
# runs between two marker syscalls (chdir to paths that do not exist, which
# perl never makes on its own), and the records between them are returned.
# Where a fault must hit the temp file, the child forges $$ (perlvar: it may
# be assigned "for testing purposes"), e.g. to $PID, so the temp name
# "<target>.tmp.$PID" is known before it starts.

use strict;
use warnings;

use Data::Dumper ();
use Errno ();
use Exporter ();
use File::Find ();
use File::Path ();
use File::Spec ();
use File::Temp ();
use List::Util ();
use POSIX ();

our @ISA = ('Exporter');
our @EXPORT_OK = qw(tempdir slurp spew temps_in state_of check_error which errno_text inc_args
                    run_perl in_child exit_child warnings_of no_warnings strace_why strace_call strace_calls calls_named io_calls ncpu
                    respell syscall_set
                    full_testing c_compilers core_cflags each_source_compiles front_end run_cmd tempfile_kind
                    xattr_nr acl_of);

our $PID = 4242;    # the $$ traced children pretend to have

# True when the long loops (every crash point, every fuzz seed, every fault
# variant) are to run in full, as CPAN's convention asks (RELEASE_TESTING or
# AUTHOR_TESTING); otherwise a test runs a fixed, representative sample.
sub full_testing { return !!($ENV{RELEASE_TESTING} || $ENV{AUTHOR_TESTING}) }

# ------------------------------------------------------------ warnings

my ($UNEXPECTED, $CHECKED) = (0, 0);

# use FFTest ':strace_tests', NAMES...: a test file that is all strace (t/28,
# t/86) gets the C locale (so that $! reads as the texts it compares; set at
# its `use`, before the code under test loads) and skips whole, saying why,
# where strace cannot trace or inject.
sub import {
    my ($class, @names) = @_;
    $SIG{__WARN__} = \&_unexpected_warning if caller eq 'main';
    if (grep { $_ eq ':strace_tests' } @names) {
        @names = grep { $_ ne ':strace_tests' } @names;
        $ENV{LC_ALL} = 'C';
        delete $ENV{LANGUAGE};
        POSIX::setlocale(POSIX::LC_ALL(), 'C');
        my $why = strace_why();
        Test::More::plan(skip_all => $why) if $why;
    }
    $class->export_to_level(1, $class, @names);
}

sub _unexpected_warning {
    $UNEXPECTED++;
    Test::More::fail("unexpected warning: $_[0]");
}

# Passes when no unexpected warning came since the last no_warnings.
sub no_warnings {
    my ($what) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $n = $UNEXPECTED - $CHECKED;
    $CHECKED = $UNEXPECTED;
    return Test::More::is($n, 0, "$what: no warning");
}

# Runs $code and returns the warnings it gave.
sub warnings_of (&) {
    my ($code) = @_;
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    $code->();
    return @w;
}

# ------------------------------------------------------------ files

# A directory that goes away when the process that made it ends: at exit,
# or in a forked child at exit_child (POSIX::_exit skips File::Temp's END).
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

# FastFile's leftover temp files ("<name>.tmp.<pid>[.<hex>]") in the
# directories and below, sorted, as paths relative to the directory given.
# A name that is not a directory dies: the check would see nothing.
sub temps_in {
    my @dirs = @_;
    @dirs or die "temps_in: no directory given\n";
    my @t;
    for my $dir (@dirs) {
        -d $dir or die "temps_in: '$dir' is not a directory\n";
        File::Find::find({ no_chdir => 1, wanted => sub {
            push @t, File::Spec->abs2rel($File::Find::name, $dir)
                if /\.tmp\.\d+(?:\.[0-9a-f]+)?\z/;
        } }, $dir);
    }
    return sort @t;
}

# The setxattr or getxattr syscall's number ($which 'set' or 'get'), for
# POSIX ACLs as raw xattrs (no setfacl needed), or undef on an unknown
# architecture without syscall.ph.
my %XATTR_NR = (x86_64 => [188, 191], aarch64 => [5, 8]);   # setxattr, getxattr
sub xattr_nr {
    my ($which) = @_;
    my $nr = eval { require 'syscall.ph'; $which eq 'set' ? &SYS_setxattr : &SYS_getxattr };
    return $nr if defined $nr;
    require Config;
    my ($arch) = grep { $Config::Config{archname} =~ /^\Q$_\E/ } keys %XATTR_NR;
    return $arch ? $XATTR_NR{$arch}[ $which eq 'set' ? 0 : 1 ] : undef;
}

# $path's POSIX access ACL, the raw xattr, or undef.
sub acl_of {
    my ($path) = @_;
    my $buf = "\0" x 1024;
    my $n = syscall(xattr_nr('get'), $path, my $name = 'system.posix_acl_access', $buf, length $buf);
    return $n < 0 ? undef : substr($buf, 0, $n);
}

# What is at $path, to compare before and after: missing, a directory and
# its entries, or a file's inode and bytes.
sub state_of {
    my ($path) = @_;
    return 'missing' unless -e $path || -l $path;
    if (-d $path) {
        opendir(my $dh, $path) or die "opendir '$path': $!\n";
        return 'dir:' . join(',', sort grep { !/^\.\.?\z/ } readdir $dh);
    }
    my @st = lstat $path;
    return "file:$st[1]:" . slurp($path);
}

# check_error($label, sub { ... }, text => $text or qr//, errno => N,
#             watch => [paths], dir => $dir): the code croaks with that text
# and $!, every watched path is as it was, no temp file is left in $dir.
sub check_error {
    my ($label, $code, %e) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @watch = @{ $e{watch} || [] };
    my %before = map { $_ => state_of($_) } @watch;
    my @temps_before = temps_in($e{dir});
    my $ok = eval { $code->(); 1 };
    my ($err, $errno) = ($@, $! + 0);
    Test::More::ok(!$ok, "$label: croaks");
    (my $shown = $err) =~ s/\0/\\0/g;
    if (ref $e{text}) { Test::More::like($err, $e{text}, "$label: message") or Test::More::diag("got: $shown") }
    else              { Test::More::is($err, $e{text}, "$label: message") or Test::More::diag("got: $shown") }
    Test::More::is($errno, $e{errno}, "$label: \$! is " . errno_text($e{errno})) if defined $e{errno};
    for my $w (@watch) {
        (my $shown_path = $w) =~ s/([^\x20-\x7e])/sprintf '\\x{%x}', ord $1/ge;
        Test::More::is(state_of($w), $before{$w}, "$label: $shown_path unchanged");
    }
    Test::More::is_deeply([ temps_in($e{dir}) ], \@temps_before, "$label: no temp left");
}

# ------------------------------------------------------------ processes

# The end of a forked child: removes the temp dirs this process made
# (File::Temp removes only its own process's, the parent's stay), then
# POSIX::_exit, which runs no END block or destructor of the parent's.
sub exit_child {
    my ($status) = @_;
    end_tracees();
    File::Temp::cleanup();
    POSIX::_exit($status);
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

# The C compilers the perl-free core is built with (t/01, t/02): perl's own
# (gcc-compatible), clang and musl-gcc. A list of [name, command, why not]:
# the command is undef, and "why not" says why, when it is not here.
sub c_compilers {
    require Config;
    my $cc = $Config::Config{cc};
    return (
        [ "perl's cc ($cc)", $Config::Config{gccversion} ? $cc : undef,
          'not gcc-compatible (no gccversion in Config)' ],
        map({ [ $_->[0], (which($_->[0]) ? $_->[0] : undef), "$_->[0] is not installed (apt-get install $_->[1])" ] }
            [ clang => 'clang' ], [ 'musl-gcc' => 'musl-tools' ]),
    );
}

# The warnings the perl-free core is compiled with in t/01 and t/02: every
# diagnostic shown, the ones ISO C makes fatal fatal, and no _GNU_SOURCE but
# what a file defines itself (perl's ccflags define it on threaded perls).
sub core_cflags {
    return qw(-Werror=implicit-function-declaration -Werror=implicit-int
              -Werror=int-conversion -Wall -Wextra -U_GNU_SOURCE);
}

# each_source_compiles($label, $mode, [$status, $output], \@cmd, @sources):
# two tests per source, "compiles" and "no diagnostics", from one compiler
# run over all of them (status and output given). That run is clean only if
# each file is; when it is not, each file is checked again on its own
# (@cmd $source) for its own result.
sub each_source_compiles {
    my ($label, $mode, $all, $cmd, @sources) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $clean = !$all->[0] && $all->[1] eq '';
    for my $src (@sources) {
        my ($status, $out) = $clean ? @$all : run_cmd(@$cmd, $src);
        Test::More::is($status, 0, "$label: $src compiles: $mode") or Test::More::diag($out);
        Test::More::is($out, '', "$label: $src: no diagnostics: $mode");
    }
}

# front_end(@cmd, $src): the command a clang driver runs for @cmd on the one
# file $src, its front end (clang -cc1), less the file and its -o; nothing
# where the driver shows no single such command (gcc's cc1 takes one file),
# or says anything besides. Given several files, the driver starts its front
# end, a large binary (a fifth of a second), once for each; the front end
# takes them all in one process, each its own translation unit, each
# object (without -o) beside its source: t/01 and t/02 run it so.
sub front_end {
    my (@cmd) = @_;
    my $src = pop @cmd;
    my ($status, $plan) = run_cmd(@cmd, '-###', $src);
    my @lines = split /\n/, $plan;
    my @front = grep { /^\s*"[^"]*" "-cc1" / } @lines;
    return if $status || @front != 1 || grep { /\b(?:warning|error):/i } @lines;
    my @args = map { s/\\(.)/$1/gsr } $front[0] =~ /"((?:[^"\\]|\\.)*)"/g;
    return unless @args && $args[-1] eq $src;
    pop @args;
    my ($o) = grep { $args[$_] eq '-o' } 0 .. $#args;
    splice @args, $o, 2 if defined $o;
    return @args;
}

# run_cmd(@cmd): runs the command (no shell), stdin from /dev/null; returns
# its exit status ($?) and what it printed (stdout and stderr together).
sub run_cmd {
    my (@cmd) = @_;
    my $pid = open(my $ph, '-|') // die "fork: $!\n";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    return ($?, $out);
}

# -I options that let a child perl find the FastFile this test loaded (blib
# under `prove -b` and `make test`, the system's copy otherwise) and t/lib, as
# absolute paths. Only directories perl does not search anyway: each one
# costs a stat per module loaded, and traced children start often.
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

# run_perl($code, args => [...], switches => ['-T'], ulimit_f => N, ulimit_n => N, env => {...})
# runs $code in a child perl (inc_args), stdin from /dev/null; returns its
# exit status ($?) and what it printed (stdout and stderr together).
# ulimit_f runs it under `ulimit -f N` (blocks of 512 or 1024 bytes),
# ulimit_n under `ulimit -n N` (open files).
# strace => [...] runs it under `strace -f -qq` with these arguments (the
# output, -o, goes to /dev/null unless they name a log), for a test that
# wants a whole perl traced, its output and status, not strace_call's
# records of one snippet.
sub run_perl {
    my ($code, %o) = @_;
    my @cmd = _ulimited(\%o, $^X, @{ $o{switches} || [] }, inc_args(), '-e', $code, @{ $o{args} || [] });
    if (my $strace = $o{strace}) {
        my @log = (grep { $_ eq '-o' } @$strace) ? () : ('-o', '/dev/null');
        unshift @cmd, 'strace', '-f', '-qq', @log, @$strace, '--';
    }
    my $pid = open(my $ph, '-|') // die "fork: $!\n";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDERR, '>&', \*STDOUT;
        @ENV{ keys %{ $o{env} || {} } } = values %{ $o{env} || {} };
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    return ($?, $out);
}

# The command @cmd run under the ulimit_f and ulimit_n of %$o, if any.
sub _ulimited {
    my ($o, @cmd) = @_;
    my @limits = map { defined $o->{"ulimit_$_"} ? "ulimit -$_ $o->{\"ulimit_$_\"} && " : '' } qw(f n);
    return @cmd unless join '', @limits;
    return ('/bin/sh', '-c', join('', @limits) . 'exec "$@"', 'sh', @cmd);
}

# in_child($code, $uid, $gid) runs $code in a forked child, as $uid/$gid
# (all groups dropped) when given; returns "ok <what it returned>" or
# "died <why>" (also when it could not become $uid).
sub in_child {
    my ($code, $uid, $gid) = @_;
    pipe my $r, my $w or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my $out = eval {
            if (defined $uid) {
                $) = "$gid $gid";    # drops root's supplementary groups too
                POSIX::setgid($gid) or die "setgid: $!\n";
                POSIX::setuid($uid) or die "setuid: $!\n";
                die "still privileged\n" if $< != $uid || $> != $uid || $( != $gid;
            }
            $code->();
        };
        print {$w} defined $out ? "ok $out" : "died $@";
        close $w;
        exit_child(0);
    }
    close $w;
    my $out = do { local $/; <$r> } // '';
    waitpid $pid, 0;
    return $out;
}

sub ncpu {
    open my $fh, '<', '/proc/cpuinfo' or return 1;
    my $n = grep { /^processor\s*:/ } <$fh>;
    return $n || 1;
}

# ------------------------------------------------------------ syscall spellings

# One operation, several syscalls: each C library, and each version of one,
# picks its own for the same call (issue 39: fstat(fd) is
# newfstatat(fd, "", AT_EMPTY_PATH) in glibc 2.36, Debian 12, and fstat in
# glibc 2.41, Debian 13; musl opens with open, glibc with openat). The tests
# see every traced call in one spelling, glibc 2.41's on x86_64 (respell), and
# inject faults into every spelling of the operation they name (syscall_set).
# The next C library's choice is one line in each table.

# An operation by its one spelling => every syscall that makes it. strace
# injects by syscall, counting when= per syscall: a fault for fstat also hits
# the first newfstatat of a path (-P limits which paths count).
my %SPELLINGS = (
    fstat      => [qw(fstat fstat64 newfstatat fstatat64 statx)],    # of an fd
    # of a path; not statx: the batch calls it itself (its look), tests name it so
    newfstatat => [qw(newfstatat fstatat64 stat stat64 lstat lstat64)],
    openat     => [qw(openat open)],
    rename     => [qw(rename renameat renameat2)],
    renameat   => [qw(renameat renameat2)],
);

# A traced call (strace's line, "name(args) = ret ...") in the one spelling
my $STR = qr/"(?:[^"\\]|\\.)*"/;    # a path as strace prints it
my @RESPELL = (
    [ qr/^(?:newfstatat|fstatat64)\((\d+), "", (.*), AT_EMPTY_PATH\)/ => sub { "fstat($1, $2)" } ],
    [ qr/^statx\((\d+), "", [\w|]*AT_EMPTY_PATH[\w|]*, STATX_BASIC_STATS, (.*)\)/ => sub { "fstat($1, $2)" } ],
    [ qr/^fstat64\(/ => sub { 'fstat(' } ],
    [ qr/^stat(?:64)?\(($STR), (.*)\)/ => sub { "newfstatat(AT_FDCWD, $1, $2, 0)" } ],
    [ qr/^lstat(?:64)?\(($STR), (.*)\)/ => sub { "newfstatat(AT_FDCWD, $1, $2, AT_SYMLINK_NOFOLLOW)" } ],
    [ qr/^fstatat64\(/ => sub { 'newfstatat(' } ],
    [ qr/^open\(/ => sub { 'openat(AT_FDCWD, ' } ],
    [ qr/^renameat2?\(AT_FDCWD, ($STR), AT_FDCWD, ($STR)(?:, 0)?\)/ => sub { "rename($1, $2)" } ],
    [ qr/^renameat2\((.*), 0\)/ => sub { "renameat($1)" } ],
);

# respell($line): strace's line (with or without -f's pid) in the one
# spelling: the first rule that matches rewrites the call's start.
sub respell {
    my ($line) = @_;
    my ($pid, $call) = $line =~ /\A(\d+\s+)?(.*)\z/s;
    for my $rule (@RESPELL) {
        my ($re, $to) = @$rule;
        next unless $call =~ $re;
        substr($call, 0, $+[0]) = $to->();
        last;
    }
    return ($pid // '') . $call;
}

# syscall_set(@names): strace's syscall set (trace=, inject=) of these
# operations in every spelling; "?": a name this architecture lacks is
# skipped (fstat64 exists on 32-bit ones only). A name not in %SPELLINGS is
# itself.
sub syscall_set {
    my (@names) = @_;
    my %seen;
    return join ',', grep { !$seen{$_}++ }
        map { my $n = $_; $SPELLINGS{$n} ? map { "?$_" } @{ $SPELLINGS{$n} } : $n } @names;
}

# ------------------------------------------------------------ strace

my $STRACE_WHY;

# '' when strace can trace a child perl and inject faults, else why not.
sub strace_why {
    return $STRACE_WHY if defined $STRACE_WHY;
    my $strace = which('strace');
    return $STRACE_WHY = 'strace not installed (apt-get install strace)' unless $strace;
    my $ver = `strace -V 2>/dev/null` // '';
    my ($maj, $min) = $ver =~ /version (\d+)\.(\d+)/;
    return $STRACE_WHY = 'cannot run strace -V' unless defined $maj;
    return $STRACE_WHY = "strace $maj.$min is too old (5.3+ for -e inject, when=, --seccomp-bpf: Debian 11 and later have it)"
        if $maj < 5 || ($maj == 5 && $min < 3);
    # ptrace may be forbidden (containers, yama); injection must really work
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        exec { $strace } $strace, '-qq', '-o', '/dev/null', '-e', 'inject=getppid:retval=4242',
            $^X, '-e', 'exit(getppid() == 4242 ? 0 : 3)' or POSIX::_exit(127);
    }
    waitpid $pid, 0;
    return $STRACE_WHY = "strace cannot trace or inject here (exit status $?: ptrace forbidden, as in some containers or by yama's ptrace_scope)" if $?;
    return $STRACE_WHY = '';
}

my $SEQ = 0;
my $ATTACH_REFUSED;    # strace -p could not attach here: attach runs a child perl
my %TRACEE;            # attach's workers, by the pid of the process that started them

# strace_call($perl_code, %opts) runs $perl_code (a string) in a child perl
# (FastFile with :all and FastFile::Writer loaded, warnings collected) between
# the markers, under strace -f. Options:
#   setup   => perl code run before the first marker (lexicals it declares
#              are seen by the snippet)
#   args    => [...]    @ARGV of the child
#   target  => $file    the snippet's $T
#   data    => $data, opts => {...}   the snippet's $D and $O
#   pid     => N        the $$ the child forges (e.g. $FFTest::PID); then
#                       %TMP% in paths and inject is "$target.tmp.N", %PID% N
#                       (without it the child keeps its own $$: a batch
#                       tells a fork by getpid() != $$)
#   paths   => [...]    trace only syscalls on these paths (-P)
#   trace   => [...]    trace only these syscalls (and with --seccomp-bpf only
#                       they stop the child, unless a signal is injected);
#                       'injected': the syscalls named in inject
#   inject  => [...]    each -e inject=...
#   strace  => [...]    more strace arguments
#   ulimit_f => N       run the child under `ulimit -f N`
#   ulimit_n => N       run the child under `ulimit -n N`
#   env     => {...}    extra environment for the child (LC_ALL=C always)
#   log     => $file    strace's log (default: a temp file)
#   timeout => seconds  (default 60)
#   attach  => 1        run the snippet in a long-lived perl of this process
#                       (t/lib/FFTracee.pm) that strace -p attaches to, not
#                       in a child perl started under strace: no perl start
#                       and module loading per call (~30 ms of CPU each).
#                       Tracing and the when= counts start at the ready
#                       marker, the snippet runs as in a perl of its own
#                       (see FFTracee.pm). Not with ulimit_f/ulimit_n (a
#                       child perl then); where strace cannot attach (yama),
#                       a child perl from then on. The log holds no line of
#                       perl's start: nothing before the begin marker.
# Returns a hash: ok (the snippet did not die), err ($@), errno ($! right
# after it, numeric), ret (its value, first in list context), warnings (in
# the child), traced (markers seen), calls (records between the markers),
# injected (number of "(INJECTED)" lines), stdout (less the result line),
# stderr, output (both), status ($? of strace), pid ($$ in the child), tmp
# ("$target.tmp.<pid>"), log (strace's
# output). A record: {name, args, ret, errno, injected, line}; a signal
# delivered is {name => 'signal', sig => 'SIGALRM', line}.
sub strace_call {
    my ($code, %o) = @_;
    my $job = _strace_job($code, %o);
    return _strace_exec($job) unless $job->{attach};
    my $w = _tracee(0);
    _tracee_send($w, $job);
    my $reply = _tracee_reply($w, $job->{deadline});
    die "traced child did not finish in $job->{timeout}s\n" if !defined $reply && time >= $job->{deadline};
    return strace_call($code, %o) if _attach_refused($reply);
    return _strace_result($job, $reply);
}

# What strace_call runs: the strace command, the markers, the control
# directory (removed with the job: not at exit, as a test makes hundreds,
# and a worker of strace_calls leaves with exit_child, a registered name,
# freed early, could meanwhile be another worker's: they share rand's
# state), the request for attach mode.
sub _strace_job {
    my ($code, %o) = @_;
    my $timeout = $o{timeout} || 60;
    # a limit needs a shell before the perl: only a perl of its own has it
    my $attach = $o{attach} && !defined $o{ulimit_f} && !defined $o{ulimit_n} && !$ATTACH_REFUSED;
    my $ctl = File::Temp::tempdir('fftest-XXXXXX', TMPDIR => 1);
    my $n = ++$SEQ;
    my @markers = map { "/nonexistent-fftest-$_-$$-$n" } qw(ready begin end);
    my ($m_ready, $m_begin, $m_end) = @markers;
    my $pid = $o{pid};
    my $log = $o{log} || "$ctl/log";

    my $tmp = defined $o{target} && $pid ? "$o{target}.tmp.$pid" : undef;
    my $subst = sub {
        my ($s) = @_;
        die "strace_call: %PID% or %TMP% without pid (and target)\n"
            if $s =~ /%PID%/ && !$pid || $s =~ /%TMP%/ && !defined $tmp;
        $s =~ s/%PID%/$pid/g;
        $s =~ s/%TMP%/$tmp/g if defined $tmp;
        return $s;
    };
    # each operation named in every spelling (syscall_set)
    my @inject = map { my ($set, $how) = split /:/, $subst->($_), 2; syscall_set(split /,/, $set) . ":$how" }
                 @{ $o{inject} || [] };
    die "strace_call: attach injects chdir itself\n" if $attach && grep { /^chdir:/ } @inject;
    my @filter;    # what strace traces and injects
    if ($o{trace}) {
        my @trace = ref $o{trace} ? syscall_set(@{ $o{trace} }) : map { /^([^:]+)/ } @inject;
        push @filter, '-e', 'trace=' . join(',', @trace, 'chdir');
        # strace 6.1 does not deliver an injected signal= under --seccomp-bpf;
        # strace -p cannot install the filter
        push @filter, '--seccomp-bpf' unless $attach || grep { /:signal=/ } @inject;
    }
    # attach: the first chdir strace sees in each process (to the ready
    # marker) succeeds
    push @filter, map { ('-e', "inject=$_") } @inject, $attach ? 'chdir:retval=0:when=1' : ();
    push @filter, @{ $o{strace} || [] };
    my $paths = $o{paths} && @{ $o{paths} }
        ? [ (map { $subst->($_) } @{ $o{paths} }), $attach ? $m_ready : (), $m_begin, $m_end ] : undef;
    my @cmd = ('strace', '-f', '-qq', '-o', $log, @filter, map { ('-P', $_) } @{ $paths || [] });

    my %env = (LC_ALL => 'C', %{ $o{env} || {} });
    my $job = { code => $code, o => \%o, attach => $attach, timeout => $timeout, deadline => time + $timeout,
                ctl => $ctl, ctl_guard => FFTest::RemoveTree->new($ctl), markers => \@markers,
                log => $log, cmd => \@cmd, env => \%env, filter => \@filter, paths => $paths };
    $job->{case} = { code => $code, setup => $o{setup}, args => $o{args} || [], env => \%env,
                     target => $o{target}, data => $o{data}, opts => $o{opts}, pid => $pid,
                     ctl => $ctl, markers => \@markers };
    $job->{request} = _dump({ cases => [ $job->{case} ], ready => $m_ready, strace => \@cmd }) if $attach;
    return $job;
}

# strace_call with a child perl of its own under strace.
sub _strace_exec {
    my ($job) = @_;
    my ($code, %o) = ($job->{code}, %{ $job->{o} });
    my (undef, $m_begin, $m_end) = @{ $job->{markers} };
    my @cmd = @{ $job->{cmd} };
    my $spec = _dump({ target => $o{target}, data => $o{data}, opts => $o{opts}, pid => $o{pid} });
    my $child = join "\n",
        'use strict; use warnings; no warnings "void";',
        'my $__spec = eval shift @ARGV; die "bad spec: $@" if $@;',
        'our @__warnings; BEGIN { $SIG{__WARN__} = sub { push @__warnings, $_[0] } }',
        'use FastFile qw(:all); use FastFile::Writer;',
        'our ($T, $D, $O) = @{$__spec}{qw(target data opts)};',
        '$$ = $__spec->{pid} if $__spec->{pid};',
        (defined $o{setup} ? "$o{setup};" : ''),
        "chdir '$m_begin';",
        "my \@__r = eval {\n#line 1 traced\n$code\n};",
        'my ($__errno, $__err) = ($! + 0, $@);',
        "chdir '$m_end';",
        '$| = 1; local ($\\, $,); my $__h = sub { defined $_[0] ? "x" . unpack("H*", $_[0]) : "-" };',
        'print "\nFFTEST-RESULT ", join(" ", $$, $__err eq "" ? 1 : 0, $__errno, $__h->($__r[0]), $__h->($__err),',
        '    map { $__h->($_) } @__warnings), "\n";',
        '';
    # a preloaded sanitizer runtime belongs to the perl under test, not to strace
    my $preload = $ENV{LD_PRELOAD};
    push @cmd, '-E', "LD_PRELOAD=$preload" if defined $preload && length $preload;
    my @perl = ($^X, inc_args(), '-e', $child, $spec, @{ $o{args} || [] });
    @perl = _ulimited(\%o, @perl);
    push @cmd, '--', @perl;

    my $spid = fork // die "fork: $!\n";
    if (!$spid) {
        delete $ENV{LD_PRELOAD};
        my %env = %{ $job->{env} };
        @ENV{ keys %env } = values %env;
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$job->{ctl}/stdout";
        open STDERR, '>', "$job->{ctl}/stderr";
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    my $status;
    while (1) {
        my $w = waitpid $spid, POSIX::WNOHANG();
        if ($w == $spid) { $status = $?; last }
        if (time > $job->{deadline}) {
            kill 'KILL', $spid;
            waitpid $spid, 0;
            die "traced child did not finish in $job->{timeout}s\n";
        }
        select undef, undef, undef, 0.005;
    }
    return _strace_result($job, "done $status");
}

# The result hash of a job that ended with $reply ("done <status>", or
# undef: the worker ended).
sub _strace_result {
    my ($job, $reply) = @_;
    my %o = %{ $job->{o} };
    my ($m_ready, $m_begin, $m_end) = @{ $job->{markers} };
    my ($status) = ($reply // '') =~ /^done (-?\d+)/;
    my $log = slurp($job->{session_log} // $job->{log}) // '';
    if ($job->{session_log}) {
        # the session's lines of the process that ran this case, from its
        # begin marker (before: the worker's running of the session)
        my ($cpid) = $log =~ /^(\d+) +chdir\("\Q$m_begin\E"/m;
        $log = defined $cpid ? join('', $log =~ /^(\Q$cpid\E .*\n)/mg) : '';
        $log =~ s/\A.*?(?=^\d+ +chdir\("\Q$m_begin\E")//ms;
        spew($job->{log}, $log);
    }
    my %r = (status => $status, calls => [], warnings => [],
             ok => 0, errno => -1, err => 'no result from the child',
             log => $log, stdout => slurp("$job->{ctl}/stdout") // '',
             stderr => slurp("$job->{ctl}/stderr") // '');
    if ($r{stdout} =~ s/\n?FFTEST-RESULT (.*)\n\z//) {
        my $uh = sub { $_[0] eq '-' ? undef : pack('H*', substr($_[0], 1)) };
        my ($cpid, $ok, $errno, $ret, $err, @w) = split / /, $1;
        @r{qw(pid ok errno ret err warnings)} = ($cpid, $ok, $errno, $uh->($ret), $uh->($err), [ map { $uh->($_) } @w ]);
        $r{tmp} = "$o{target}.tmp.$cpid" if defined $o{target};
    } else {
        $r{err} .= ": $r{stdout}$r{stderr}";
    }
    if ($job->{attach}) {
        # the handshake is not the snippet's, nor what the worker does after
        # the end marker (the result, strace's end)
        $r{log} =~ s/^.*\Q$m_ready\E.*\n//mg;
        $r{log} =~ s/^(.*\Q$m_end\E.*\n).*/$1/ms;
        $r{stderr} .= slurp("$job->{ctl}/strace.err") // '';
        $r{err} .= ' (the worker ended)' if !defined $reply && !$r{ok};
    }
    $r{output} = $r{stdout} . $r{stderr};
    $r{log} = join '', map { respell($_) } split /^/m, $r{log};    # one spelling
    $r{injected} = () = $r{log} =~ /\(INJECTED\)/g;
    my $in = 0;
    for my $line (split /\n/, $r{log}) {
        if (index($line, $m_begin) >= 0) { $in = 1; $r{traced} = 1; next }
        if (index($line, $m_end) >= 0) { $in = 0; next }
        push @{ $r{calls} }, _parse_line($line) if $in;
    }
    return \%r;
}

# attach's worker number $i of this process (t/lib/FFTracee.pm), started
# when there is none (or it ended).
sub _tracee {
    my ($i) = @_;
    my $w = $TRACEE{$$}[$i];
    return $w if $w && $w->{pid};
    pipe my $req_r, my $req_w or die "pipe: $!\n";
    pipe my $rep_r, my $rep_w or die "pipe: $!\n";
    my @perl = ($^X, inc_args(), '-MFFTracee', '-e', 'FFTracee::serve()');
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        POSIX::dup2(fileno $req_r, 0) // POSIX::_exit(127);
        POSIX::dup2(fileno $rep_w, 3) // POSIX::_exit(127);
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        POSIX::setpgid(0, 0);    # its strace and cases: ended with it
        $ENV{LC_ALL} = 'C';
        exec { $perl[0] } @perl or POSIX::_exit(127);
    }
    close $req_r;
    close $rep_w;
    require IO::Handle;
    $req_w->autoflush(1);
    return $TRACEE{$$}[$i] = { pid => $pid, in => $req_w, out => $rep_r };
}

sub _tracee_send {
    my ($w, $job) = @_;
    local $SIG{PIPE} = 'IGNORE';    # a worker that died answers EOF
    print { $w->{in} } sprintf('%012d', length $job->{request}), $job->{request};
}

# The worker's reply to its request, or undef when it ended or the job's
# deadline passed (then it is ended).
sub _tracee_reply {
    my ($w, $deadline) = @_;
    my $rin = '';
    vec($rin, fileno $w->{out}, 1) = 1;
    my $line;
    while ((my $left = $deadline - time) > 0) {
        my $n = select(my $rout = $rin, undef, undef, $left);
        next if $n == 0 || $n < 0 && $!{EINTR};
        $line = readline $w->{out} if $n > 0;
        last;
    }
    chomp $line if defined $line;
    _tracee_end($w) unless defined $line;
    return $line;
}

sub _tracee_end {
    my ($w, $how) = @_;
    return unless $w && $w->{pid};
    kill 'KILL', -$w->{pid} unless $how;    # a case stuck (a timeout), its strace
    close $w->{in};    # what ends an idle one
    waitpid $w->{pid}, 0;
    close $w->{out};
    $w->{pid} = undef;
}

# Ends this process's workers (waited for: their CPU time is the test's).
sub end_tracees {
    local $?;    # in END: the test's exit status
    _tracee_end($_, 'idle') for @{ delete $TRACEE{$$} || [] };
}
END { end_tracees() }

# True (and attach off from now on) when strace could not attach to the
# worker (yama's ptrace_scope, a container): strace_why found a child perl
# under strace working.
sub _attach_refused {
    my ($reply) = @_;
    return 0 unless defined $reply && $reply =~ /^noattach/;
    $ATTACH_REFUSED = 1;
    return 1;
}

# The records of strace_call's result $r for the syscall $name.
sub calls_named { my ($r, $name) = @_; return grep { $_->{name} eq $name } @{ $r->{calls} } }

# The records of $r that are FastFile's I/O: without the memory allocator's
# calls (which perl or AddressSanitizer's allocator make at any time) and
# AddressSanitizer's sigaltstack (make asan).
my $NOT_IO = qr/\A(?:brk|mmap|munmap|mremap|mprotect|madvise|sigaltstack)\z/;
sub io_calls { my ($r) = @_; return grep { $_->{name} !~ $NOT_IO } @{ $r->{calls} } }

sub _dump {
    local $Data::Dumper::Useqq = 1; local $Data::Dumper::Terse = 1;
    local $Data::Dumper::Indent = 0; local $Data::Dumper::Sortkeys = 1;
    return Data::Dumper::Dumper($_[0]);
}

sub _parse_line {
    my ($line) = @_;
    $line =~ s/^\d+\s+//;    # pid prefix of -f
    return { name => 'signal', sig => $1, line => $line } if $line =~ /^--- (SIG\w+)/;
    return { name => 'exit', line => $line } if $line =~ /^\+\+\+ /;
    return { name => $1, line => $line, partial => 1 } if $line =~ /^(\w+)\(.*<unfinished \.\.\.>$/;
    if (my ($name, $args, $ret, $errno, $rest)
            = $line =~ /^(\w+)\((.*)\)\s+=\s+(0x[0-9a-f]+|-?\d+|\?)(?:\s+(E[A-Z0-9]+)\s+\([^)]*\))?(.*)$/) {
        return { name => $name, args => $args, ret => $ret, errno => $errno,
                 injected => ($rest =~ /INJECTED/ ? 1 : 0), line => $line };
    }
    return { name => '?', line => $line };
}

# strace_call for each spec (a hash: code => ..., and strace_call's options),
# up to $o{jobs} at a time (when every spec has attach => 1: see
# _strace_calls_attach) (strace costs mostly context switches, so this
# scales with the CPUs). Results come back in order. Nothing else may be a
# child of the caller meanwhile.
sub strace_calls {
    my ($specs, %o) = @_;
    my $jobs = $o{jobs} || 2 * ncpu();
    inc_args();    # computed once, here, not in every worker
    return _strace_calls_attach($specs, $jobs) unless grep { !$_->{attach} } @$specs;
    my $dir = tempdir();
    my (%running, @res);
    my $next = 0;
    while ($next < @$specs || %running) {
        while ($next < @$specs && keys %running < $jobs) {
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                my %s = %{ $specs->[$next] };
                my $r = eval { strace_call(delete $s{code}, %s) }
                     || { ok => 0, err => "strace_call died: $@", errno => -1, warnings => [] };
                if (open my $fh, '>', "$dir/result.$next") {
                    print {$fh} _dump($r);
                    close $fh;
                }
                exit_child(0);
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
        $res[$i] = ref $r eq 'HASH' ? $r : _no_result('worker gave no result');
    }
    return \@res;
}

sub _no_result {
    my ($why) = @_;
    return { ok => 0, err => $why, errno => -1, warnings => [], log => '', injected => 0, calls => [] };
}

# Cases one strace session runs at most (each in a process of its own)
my $SESSION_CASES = 16;

# strace_calls when every spec has attach => 1: the specs with the same
# strace filter (trace, inject, strace options) share a session, which
# traces the union of their paths (-P); $jobs workers of attach (no fork of
# this process) are each given the next session when they answer.
sub _strace_calls_attach {
    my ($specs, $jobs) = @_;
    my (@res, @sessions, %open);
    for my $k (0 .. $#$specs) {
        my %s = %{ $specs->[$k] };
        my $job = eval { _strace_job(delete $s{code}, %s) };
        if (!$job) { $res[$k] = _no_result("strace_call died: $@"); next }
        if (!$job->{attach}) {    # attach refused: a child perl
            $res[$k] = eval { _strace_exec($job) } || _no_result("strace_call died: $@");
            next;
        }
        my $key = join "\0", @{ $job->{filter} }, $job->{paths} ? '-P' : '';
        my $session = $open{$key};
        if (!$session || @{ $session->{jobs} } >= $SESSION_CASES) {
            push @sessions, $session = $open{$key} = { jobs => [], specs => [] };
        }
        push @{ $session->{jobs} }, $job;
        push @{ $session->{specs} }, $k;
    }
    _session_request($_) for @sessions;
    my %busy;    # worker number => session
    while (@sessions || %busy) {
        for my $i (grep { !$busy{$_} } 0 .. $jobs - 1) {
            last unless @sessions;
            my $session = shift @sessions;
            _tracee_send(_tracee($i), $session);
            $busy{$i} = $session;
        }
        my $rin = '';
        vec($rin, fileno _tracee($_)->{out}, 1) = 1 for keys %busy;
        my ($first) = sort { $a <=> $b } map { $_->{deadline} } values %busy;
        my $n = select(my $rout = $rin, undef, undef, List::Util::max(0, $first - time) + 0.01);
        for my $i (sort keys %busy) {
            my $session = $busy{$i};
            my $w = $TRACEE{$$}[$i];
            my $ready = $n > 0 && vec($rout, fileno $w->{out}, 1);
            next unless $ready || time >= $session->{deadline};
            delete $busy{$i};
            my $reply = _tracee_reply($w, $ready ? time + 60 : 0);
            my @k = @{ $session->{specs} };
            if (_attach_refused($reply)) {
                for my $k (@k) {
                    my %s = %{ $specs->[$k] };
                    $res[$k] = eval { strace_call(delete $s{code}, %s) } || _no_result("strace_call died: $@");
                }
            } elsif (!defined $reply && time >= $session->{deadline}) {
                $res[$_] = _no_result("strace_call died: traced child did not finish in $session->{timeout}s\n") for @k;
            } else {
                @res[@k] = map { _strace_result($_, $reply) } @{ $session->{jobs} };
            }
        }
    }
    return \@res;
}

# A session's request, strace command and deadline; one job alone is run
# as strace_call runs it.
sub _session_request {
    my ($session) = @_;
    my @jobs = @{ $session->{jobs} };
    $session->{timeout} = List::Util::sum(map { $_->{timeout} } @jobs);
    $session->{deadline} = time + $session->{timeout};
    if (@jobs == 1) {
        $session->{request} = $jobs[0]{request};
        return;
    }
    my $log = "$jobs[0]{ctl}/session.log";
    $_->{session_log} = $log for @jobs;
    my @paths = $jobs[0]{paths} ? map { @{ $_->{paths} } } @jobs : ();
    my @cmd = ('strace', '-f', '-qq', '-o', $log, @{ $jobs[0]{filter} }, map { ('-P', $_) } @paths);
    $session->{request} = _dump({ cases => [ map { $_->{case} } @jobs ], ready => $jobs[0]{markers}[0],
                                  strace => \@cmd });
}

# How FastFile's tempfile made the file behind $fh, from /proc/self/fd:
# 'O_TMPFILE' ("<dir>/#<ino> (deleted)"), 'memfd', 'named' (the
# reference's "<dir>/.tmpfile.<pid>", unlinked), or the link itself.
sub tempfile_kind {
    my ($fh) = @_;
    my $link = readlink('/proc/self/fd/' . fileno($fh)) // "readlink: $!";
    return $link =~ m{\A/memfd:} ? 'memfd'
         : $link =~ m{/\.tmpfile\.\d+ \(deleted\)\z} ? 'named'
         : $link =~ m{/#\d+ \(deleted\)\z} ? 'O_TMPFILE' : $link;
}

# Removes a directory tree when it goes out of scope.
package FFTest::RemoveTree;
sub new     { my ($class, $dir) = @_; return bless { dir => $dir, pid => $$ }, $class }
sub DESTROY { my ($self) = @_; File::Path::remove_tree($self->{dir}) if $$ == $self->{pid} }

1;
