#!perl
# The pid in temp names is kept (xs_pid.c: a page every fork's child gets
# zeroed), so a call asks no getpid, and no child ever names a temp after
# its parent: perl's fork, a fork in a signal handler, a fork from another
# ithread, a new ithread (same process: the same pid), open's "-|", a C
# library's fork() that perl knows nothing of (a preloaded getppid that
# forks, standing for another XS module's fork), a raw fork syscall. Each
# child writes its own target after the parent's cache holds the parent's
# pid; strace -f sees the name each process opens. A script that assigns
# to $$ still gets its value, as the reference's "$$" does.
use strict;
use warnings;

use Config;
use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp strace_why which inc_args temps_in run_perl respell syscall_set);
use FastFile ();
use POSIX ();

plan skip_all => 'strace: ' . strace_why() if strace_why();
plan skip_all => 'no pid cache in this build or kernel (FF_PORTABLE, Linux before 4.14): $$ is read each call'
    unless FastFile::_build_info()->{pid_cache};

my $dir = tempdir();

# fork() from C code perl does not see: getppid, preloaded, forks (libc's
# fork, atfork handlers and all) and returns what fork returns.
my $cfork;
SKIP: {
    my $cc = $Config{cc};
    skip 'a preloaded library does not mix with a sanitizer runtime', 1 if $ENV{FASTFILE_SANITIZED};
    open my $fh, '>', "$dir/cfork.c" or die "$dir/cfork.c: $!";
    print {$fh} "#include <unistd.h>\npid_t getppid(void) { return fork(); }\n";
    close $fh or die;
    if (system("$cc -shared -fPIC -o $dir/cfork.so $dir/cfork.c >$dir/cc.out 2>&1") == 0) {
        $cfork = "$dir/cfork.so";
        pass('a C fork() helper built');
    } else {
        skip "cannot build a shared object with $cc: " . slurp("$dir/cc.out"), 1;
    }
}

# The raw fork syscall's number (no libc fork: no atfork handler runs).
my $sys_fork = $Config{archname} =~ /^x86_64-linux/ ? 57 : undef;
my $HAVE_THREADS = $Config{useithreads} ? 1 : 0;

my $script = <<'PERL';
use strict; use warnings;
use FastFile qw(file_set_contents);
use POSIX ();
my ($d, $have_threads, $sys_fork, $cfork) = @ARGV;
require threads if $have_threads;
$| = 1;
# each case: a target written where the case says, and the pid its temp must have
sub expect { my ($case, $pid) = @_; print "$case $pid\n" }
sub child_writes { my ($case) = @_; file_set_contents("$d/$case", $case); expect($case, $$) }
file_set_contents("$d/warm", 'x') for 1 .. 2;      # the parent's pid is cached
expect('warm', $$);

# perl's fork
my $pid = fork // die "fork: $!";
if (!$pid) { child_writes('fork'); POSIX::_exit(0) }
waitpid $pid, 0;

# a fork in a signal handler, during a call that goes on in the parent
{
    local $SIG{USR1} = sub {
        my $p = fork // die "fork: $!";
        if (!$p) { child_writes('handler'); POSIX::_exit(0) }
        waitpid $p, 0;
    };
    kill 'USR1', $$;
    file_set_contents("$d/after-handler", 'x');
    expect('after-handler', $$);
}

# open with -|
my $oh;
$pid = open($oh, '-|') // die "open -|: $!";
if (!$pid) { child_writes('open'); POSIX::_exit(0) }
print while <$oh>;
close $oh;

if ($have_threads) {
    # a new ithread: the same process, the same pid
    threads->create(sub { file_set_contents("$d/thread", 'x'); expect('thread', $$) })->join;
    # a fork from another ithread's interpreter
    threads->create(sub {
        file_set_contents("$d/thread-warm", 'x');       # this interpreter's page filled
        my $p = fork // die "fork: $!";
        if (!$p) { child_writes('thread-fork'); POSIX::_exit(0) }
        waitpid $p, 0;
    })->join;
}

# the kernel's fork, without libc
if ($sys_fork) {
    $pid = syscall($sys_fork);
    die "fork syscall: $!" if $pid < 0;
    if (!$pid) { child_writes('syscall-fork'); POSIX::_exit(0) }
    waitpid $pid, 0;
}

# libc's fork() from C code (the preloaded getppid)
if ($cfork) {
    $pid = getppid();
    if (!$pid) { child_writes('c-fork'); POSIX::_exit(0) }
    waitpid $pid, 0;
}

# a script's own $$ is honoured, until the next fork
{
    local $$ = 4242;
    file_set_contents("$d/assigned", 'x');
    expect('assigned', 4242);
}
file_set_contents("$d/restored", 'x');
expect('restored', $$);
PERL

my $log = "$dir/log";
my ($status, $out) = run_perl($script, strace => [ '-e', 'trace=' . syscall_set('openat'), '-o', $log ],
                              args => [ $dir, $HAVE_THREADS, $sys_fork // 0, $cfork ? 1 : 0 ],
                              env => { $cfork ? (LD_PRELOAD => $cfork) : () });
is($status, 0, 'the script ran') or diag($out);

my %want = $out =~ /^(\S+) (\d+)$/mg;
my $strace = slurp($log) // '';
my %got;
for my $line (map { respell($_) } split /\n/, $strace) {
    $got{$1}{$2} = 1 while $line =~ m{openat\(AT_FDCWD, "\Q$dir\E/([\w-]+)\.tmp\.(\d+)"}g;
}
my @cases = ('warm', 'fork', 'handler', 'after-handler', 'open',
             ($HAVE_THREADS ? ('thread', 'thread-fork') : ()),
             ($sys_fork ? 'syscall-fork' : ()), ($cfork ? 'c-fork' : ()), 'assigned', 'restored');
for my $case (@cases) {
    ok(defined $want{$case}, "$case: the case ran") or next;
    is(join(',', sort keys %{ $got{$case} || {} }), $want{$case}, "$case: the temp is named after pid $want{$case}");
}
SKIP: {
    skip 'no threads', 1 unless $HAVE_THREADS;
    isnt($want{'thread-fork'}, $want{warm}, "the fork from another ithread is another process");
}
# Loaded late, in a thread first, then in the main interpreter, each
# interpreter destroyed in full (PERL_DESTRUCT_LEVEL=2: its page unmapped,
# its reference to *$ given back) without a crash or a leak report; a fork
# after that still names its temps after itself.
{
    my $late = <<'PERL';
use strict; use warnings;
my ($d, $have_threads) = @ARGV;
if ($have_threads) {
    require threads;
    threads->create(sub { require FastFile; FastFile::file_set_contents("$d/late-thread", "t") })->join;
}
require FastFile;
FastFile::file_set_contents("$d/late-main", "m");
my $pid = fork // die "fork: $!";
if (!$pid) { FastFile::file_set_contents("$d/late-child", "c"); exit 0 }
waitpid $pid, 0;
exit($? >> 8);
PERL
    my $ldir = "$dir/late";
    mkdir $ldir or die "mkdir $ldir: $!";
    local $ENV{PERL_DESTRUCT_LEVEL} = 2;
    my $out = `$^X @{[ inc_args() ]} -e '$late' $ldir $HAVE_THREADS 2>&1`;
    is($?, 0, 'loaded late (in a thread first), interpreters destroyed in full: exit 0') or diag($out);
    unlike($out, qr/leaked|panic|Attempt to free/i, '... no leak report or panic') or diag($out);
    is(join(',', map { -e "$ldir/$_" ? 1 : 0 } ($HAVE_THREADS ? 'late-thread' : ()), 'late-main', 'late-child'),
       join(',', (1) x ($HAVE_THREADS ? 3 : 2)), '... every file written');
    is_deeply([ temps_in($ldir) ], [], '... no temp left');
}

is_deeply([ temps_in($dir) ], [], 'no temp left');

done_testing();
