#!perl
# FastFile::Writer across fork and threads: a forked child can neither
# commit nor destroy the parent's writer (its temp stays, its buffered data
# is written once, by the parent); a thread's clone of a writer is inert.
use strict;
use warnings;

use Test::More;
use Config;
use POSIX ();

use FastFile::Writer;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in run_perl inc_args strace_why no_warnings syscall_set);

# ------------------------------------------------------------------- fork

{
    my $dir = tempdir();
    my $t = "$dir/forked";
    spew($t, "old\n");
    my $tmp = "$t.tmp.$$";
    my $w = FastFile::Writer->new($t, { buffer_size => 64 });
    $w->print("before fork\n");        # buffered: must be written once, by the parent

    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = 1;
        $ok &&= !eval { $w->commit; 1 } && $@ eq "FastFile::Writer: the writer belongs to process "
                                                . getppid() . "\n";
        $ok &&= !eval { $w->print('z' x 100); 1 } && $@ =~ /belongs to process/;
        my $copy = $w;
        undef $w;
        undef $copy;                    # the child's copy goes away
        POSIX::_exit($ok ? 0 : 1);
    }
    waitpid $pid, 0;
    is($?, 0, 'child: commit and a flushing print croak "belongs to process"');
    ok(-e $tmp, "the child's destruction left the parent's temp alone");

    $pid = fork // die "fork: $!";
    if (!$pid) {
        $w->abort;                      # abort in the child: its copy only
        exit 0;                         # and global destruction
    }
    waitpid $pid, 0;
    ok(-e $tmp, "... so did the child's abort and exit");

    $w->print("after fork\n");
    ok($w->commit, "the parent's commit works");
    is(slurp($t), "before fork\nafter fork\n", '... with its data, written once');
    is_deeply([temps_in($dir)], [], '... no temp left');
    no_warnings('fork');
}

# fork, a relative name: the child's chdir and its end leave the parent's
# temp alone (in the directory of new); the parent commits there after a
# chdir of its own
{
    my $dir = tempdir();
    my ($made, $moved) = ("$dir/made", "$dir/moved");
    mkdir $_ or die "mkdir $_: $!" for $made, $moved;
    require Cwd;
    my $cwd = Cwd::getcwd();
    chdir $made or die "chdir: $!";
    my $w = FastFile::Writer->new('rel');
    $w->print("parent\n");
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        chdir $moved or POSIX::_exit(2);
        my $ok = !eval { $w->commit; 1 } && $@ =~ /belongs to process/;
        $w->abort;
        undef $w;
        exit($ok ? 0 : 1);              # and global destruction
    }
    waitpid $pid, 0;
    is($?, 0, 'fork, relative name: the child chdirs, its commit croaks, it aborts and exits');
    ok(-e "$made/rel.tmp.$$", "... the parent's temp stays");
    chdir $moved or die "chdir: $!";
    ok(eval { $w->commit }, "the parent's commit after a chdir of its own") or diag $@;
    chdir $cwd or die "chdir: $!";
    is(slurp("$made/rel"), "parent\n", '... in the directory of new');
    is_deeply([ temps_in($made), glob("$moved/*") ], [], '... no temp left');
    no_warnings('fork, relative name');
}

# ---------------------------------------------------------------- threads

SKIP: {
    skip 'perl without ithreads', 2 unless $Config{useithreads};
    my $dir = tempdir();
    my ($status) = run_perl(<<'PERL', switches => ['-MFastFile::Writer'], args => ["$dir/threaded"]);
use threads;
local $SIG{ALRM} = sub { exit 9 }; alarm 30;
my $w = FastFile::Writer->new($ARGV[0]);
$w->print("parent\n");
my $fh = $w->fh;
# the clone is a reference to an unblessed undef: no method, nothing to free
my $inert = threads->create(sub {
    ref $w eq 'SCALAR' && !defined $$w && !eval { $w->print("from the thread\n"); 1 } ? 1 : 0
})->join;
exit 2 unless $inert;
$w->print("still mine\n");
print {$fh} "via fh\n";
$w->commit or exit 3;
exit 0;
PERL
    is($status, 0, 'threads: the clone is inert, the parent commits');
    is(slurp("$dir/threaded"), "parent\nstill mine\nvia fh\n", '... with its data');
}

# A writer whose class lets threads copy it (new called as a function with
# another class; a subclass whose CLONE_SKIP says 0): the copy holds no
# writer. It cannot write, and freeing it when the thread ends neither
# removes the parent's temp nor frees its writer (that was a double free, and
# the parent's commit failed with EBADF).
SKIP: {
    skip 'perl without ithreads', 8 unless $Config{useithreads};
    my $dir = tempdir();
    for my $how ('other', 'subclass') {
        my ($status, $out) = run_perl(<<'PERL', switches => ['-MFastFile::Writer'], args => ["$dir/$how", $how]);
use threads;
local $SIG{ALRM} = sub { exit 9 }; alarm 30;
@Sub::ISA = ('FastFile::Writer');
sub Sub::CLONE_SKIP { 0 }
my ($file, $how) = @ARGV;
my $w = $how eq 'other' ? FastFile::Writer::new('Other', $file) : Sub->new($file);
FastFile::Writer::print($w, "parent\n");
my $err = threads->create(sub {
    eval { FastFile::Writer::print($w, "from the thread\n"); 1 } ? 'printed' : $@;
})->join;
print $err;
FastFile::Writer::print($w, "still mine\n");
FastFile::Writer::commit($w);
exit 0;
PERL
        is($status, 0, "threads, $how: the parent commits after the thread ended");
        like($out, qr/^FastFile::Writer: not a writer object/, "... the thread's copy is no writer");
        is(slurp("$dir/$how"), "parent\nstill mine\n", '... the file has the parent\'s data');
        is_deeply([temps_in($dir)], [], '... no temp left');
    }
}

# A thread's writer left unfinished, its object's scalar held by an array
# (not by a reference, which global destruction clears first): it is freed
# when the thread's interpreter frees everything, after perl's exit list
# (that freed the $$ context its cleanup read: a segfault, valgrind's
# invalid reads in ffxs_pid_suffix). Its temp goes, the target stays.
SKIP: {
    skip 'perl without ithreads', 3 unless $Config{useithreads};
    my $dir = tempdir();
    spew("$dir/late", "old\n");
    my ($status, $out) = run_perl(<<'PERL', switches => ['-MFastFile::Writer'], args => ["$dir/late"]);
use threads;
local $SIG{ALRM} = sub { exit 9 }; alarm 30;
my $file = $ARGV[0];
threads->create(sub {
    for my $i (1 .. 3) {
        my $w = FastFile::Writer->new($file);
        $w->print("never committed\n");
        push our @held, sub { \@_ }->($$w);     # the object's scalar itself
    }
    return;
})->join;
print "joined\n";
exit 0;
PERL
    is($status, 0, 'threads: a writer freed late in its thread\'s destruction') or diag $out;
    is(slurp("$dir/late"), "old\n", '... the target untouched');
    is_deeply([temps_in($dir)], [], '... its temp removed');
}

# A relative name, and another thread's chdir while new creates the temp
# (strace holds the temp's open 0.3 s; the thread waits for the file, then
# chdirs): the temp, its rename and its removal are all in the directory
# new held. It held the working directory only after the temp was made:
# a chdir in between made it hold the other one, commit failed ESTALE and
# the temp stayed (8% of writers with a thread that chdirs in a loop).
SKIP: {
    skip 'perl without ithreads', 3 unless $Config{useithreads};
    my $why = strace_why();
    skip "fault injection: $why", 3 if $why;
    my $dir = tempdir();
    mkdir "$dir/$_" or die "mkdir: $!" for qw(made moved);
    spew("$dir/made/r", "old\n");
    my $code = <<'PERL';
use threads;
local $SIG{ALRM} = sub { exit 9 }; alarm 30;
my ($dir) = @ARGV;
$$ = 4242;          # the temp's name, r.tmp.4242, known to strace
chdir "$dir/made" or exit 2;
my $t = threads->create(sub {
    select undef, undef, undef, 0.01 until -e "$dir/made/r.tmp.4242";
    chdir "$dir/moved" or die "chdir: $!";
});
my $w = FastFile::Writer->new("r");
$w->print("new\n");
$t->join;
$w->commit;
print "committed\n";
PERL
    my (undef, $out) = run_perl($code, switches => ['-MFastFile::Writer'], args => [$dir],
        strace => [ '-e', 'trace=' . syscall_set('openat'), '-e', 'inject=' . syscall_set('openat') . ':delay_exit=300000',
                     '-P', 'r.tmp.4242' ]);
    is($out, "committed\n", 'threads: another thread chdirs while new makes the temp: committed');
    is(slurp("$dir/made/r"), "new\n", '... in the directory new held');
    is_deeply([ temps_in("$dir/made"), glob("$dir/moved/*") ], [], '... no temp left, nothing in the other directory');
}

no_warnings('the whole test');
done_testing;
