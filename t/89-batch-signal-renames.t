#!perl
# file_set_contents_many's renames are all or nothing against signals too:
# a signal that comes between two renames (strace delivers it as the third
# renameat(2) returns) must not leave some targets new and the others old.
# Its handler runs once every target is renamed, however it ends: by
# returning, by a die (thrown after the renames), by exit (the batch's
# loops poll perl's pending handlers, and an exit unwinds past any eval:
# the batch was left half renamed); nor does a signal whose default action
# ends the process (SIGTERM, no handler) end it half renamed. The signal
# mask after the call is the one before, and no signal is lost.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir slurp spew temps_in strace_why run_perl syscall_set);
use FastFile ();

if (my $why = strace_why()) { plan skip_all => $why }

my $N = 6;
my $root = tempdir();

# The child: old targets written the plain way, then the batch. It prints
# "call <ok or its error>" and the signal mask before and after; END prints
# the handlers run.
my $CHILD = <<'CODE';
use strict;
use warnings;
use FastFile qw(file_set_contents_many);
my ($d, $n, $how) = @ARGV;
for (1 .. $n) { open my $fh, '>', "$d/f$_" or die; print {$fh} "old$_\n"; close $fh }
my $ran = 0;
sub mask { open my $s, '<', '/proc/self/status' or die; /^SigBlk:\s*(\S+)/ and return $1 for <$s>; '' }
$SIG{USR1} = $how eq 'exit' ? sub { $ran++; exit 7 }
           : $how eq 'die'  ? sub { $ran++; die "handler\n" }
           :                  sub { $ran++ };
END { print "ran $ran\n" }
$| = 1;
my $before = mask();
my $ok = eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. $n ]); 1 };
my $x = 0;
$x += $_ for 1 .. 3;    # (ops: where perl runs a pending handler itself)
print 'call ', ($ok ? 'ok' : "died $@"), "\n";
print 'mask ', (mask() eq $before ? 'same' : 'changed: ' . $before . ' -> ' . mask()), "\n";
CODE

# how, the signal, what the child prints, its exit status
my @cases = (
    [ 'exit', 'USR1', qr/\Aran 1\n\z/,                                        7 << 8 ],
    [ 'die',  'USR1', qr/\Acall died handler\n\nmask same\nran 1\n\z/,          0 ],
    [ 'runs', 'USR1', qr/\Acall ok\nmask same\nran 1\n\z/,                    0 ],
    [ 'runs', 'TERM', qr/\A\z/,                                               15 ],
);
for my $c (@cases) {
    my ($how, $sig, $out_re, $status) = @$c;
    my $label = "a SIG$sig " . ($sig eq 'TERM' ? 'with no handler' : "whose handler ${how}s")
              . ' after the third rename';
    my $d = tempdir();
    my ($st, $out) = run_perl($CHILD, args => [ $d, $N, $how ],
                              strace => [ '-e', 'trace=' . syscall_set('renameat'),
                                          '-e', 'inject=' . syscall_set('renameat') . ":signal=$sig:when=3" ]);
    is($st, $status, "$label: the exit status") or diag $out;
    like($out, $out_re, "$label: what it printed");
    is_deeply([ map { slurp("$d/f$_") } 1 .. $N ], [ map { "new$_\n" } 1 .. $N ],
              "$label: every target new (none left old)");
    is_deeply([ temps_in($d) ], [], "$label: no temp");
}

# A process with another thread (an ithread: a pthread, as a C library's
# threads are): blocking signals in the batch's thread does not hold a
# signal sent to the process, the kernel gives it to the other thread. The
# batch pauses 1 s after its third rename (strace delay_exit); the other
# thread waits until the third target is new, then sends SIGTERM to the
# process (kill(2) with $$). With no handler the process dies; with a
# handler that exits, the other thread's interpreter runs it. Either way
# the batch's renames go on to the end (made in a child process of their
# own, which a signal to the process does not reach): every target new.
# Before, the process died with 3 targets new, 3 old, 3 temps left.
# The other thread blocking every signal: SIGTERM waits until the renames
# are done, as in a process of one thread. Where clone fails (EAGAIN
# injected: the caller renames itself) the promise does not hold, as the
# POD says: the process dies with 3 targets new, 3 old, their temps left.
my $THREADED = <<'CODE';
use strict;
use warnings;
use threads;
use POSIX ();
use FastFile qw(file_set_contents_many);
my ($d, $n, $how) = @ARGV;
for (1 .. $n) { open my $fh, '>', "$d/f$_" or die; print {$fh} "old$_\n"; close $fh }
$SIG{TERM} = sub { POSIX::_exit(7) } if $how eq 'exit';
my $all = POSIX::SigSet->new;
$all->fillset;
my $was = POSIX::SigSet->new;
# the other thread starts with the mask of its creator
POSIX::sigprocmask(POSIX::SIG_BLOCK(), $all, $was) if $how eq 'blocks';
my $pid = $$;
my $killer = threads->create(sub {
    my $f3 = "$d/f3";
    for (1 .. 20000) {
        open my $fh, '<', $f3 or die;
        my $l = <$fh> // '';
        if ($l eq "new3\n") { kill 'TERM', $pid; return 1 }
        select undef, undef, undef, 0.0005;
    }
    return 0;
});
POSIX::sigprocmask(POSIX::SIG_SETMASK(), $was) if $how eq 'blocks';
$| = 1;
my $ok = eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. $n ]); 1 };
print 'call ', ($ok ? 'ok' : "died $@"), "\n";
$killer->join;
print "not killed\n";
CODE

my $PORTABLE = FastFile::_build_info()->{portable};
SKIP: {
    require Config;
    skip 'a perl without ithreads', 14 unless $Config::Config{useithreads};
    for my $c ([ 'no handler', 'default', 15 ], [ 'a handler that exits', 'exit', 7 << 8 ],
               [ 'no handler, the other thread blocks every signal', 'blocks', 15 ],
               [ 'no handler, clone fails', 'default', 15, 'clone' ]) {
        my ($label, $how, $status, $no_clone) = @$c;
        $label = "another thread, SIGTERM to the process after the third rename, $label";
        # (the portable build renames in the calling thread: not covered, POD)
        if ($PORTABLE && $how ne 'blocks' && !$no_clone) {
            SKIP: { skip "$label: the portable build makes no child for the renames", $how eq 'exit' ? 3 : 4 }
            next;
        }
        my $d = tempdir();
        # (threads->create uses clone3: only the batch's clone fails)
        my $renames = syscall_set('renameat');
        my ($st, $out) = run_perl($THREADED, args => [ $d, $N, $how ],
                                  strace => [ '-e', "trace=$renames,clone",
                                              '-e', "inject=$renames:delay_exit=1000000:when=3",
                                              ($no_clone ? ('-e', 'inject=clone:error=EAGAIN') : ()) ]);
        is($st, $status, "$label: the exit status") or diag $out;
        if ($no_clone) {
            is_deeply([ map { slurp("$d/f$_") } 1 .. $N ], [ (map { "new$_\n" } 1 .. 3), map { "old$_\n" } 4 .. $N ],
                      "$label: 3 targets new, 3 old (not covered)");
            is(scalar(() = temps_in($d)), $N - 3, "$label: their temps left");
            next;
        }
        is($out, '', "$label: nothing printed (it died in the batch or at its end)") if $how ne 'exit';
        is_deeply([ map { slurp("$d/f$_") } 1 .. $N ], [ map { "new$_\n" } 1 .. $N ],
                  "$label: every target new (none left old)");
        is_deeply([ temps_in($d) ], [], "$label: no temp");
    }
}

# The renames made apart (another thread runs) fail as in the calling
# thread: the second rename's EIO (injected in the child) is told with the
# target replaced before it, the others untouched, no temp left.
SKIP: {
    skip 'a perl without ithreads', 3 unless $Config::Config{useithreads};
    skip 'the portable build makes no child for the renames', 3 if $PORTABLE;
    my $d = tempdir();
    my $code = <<'CODE';
use threads;
use FastFile qw(file_set_contents_many);
my ($d) = @ARGV;
threads->create(sub { sleep 10 })->detach;
for (1 .. 3) { open my $fh, '>', "$d/f$_" or die; print {$fh} "old$_\n"; close $fh }
eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. 3 ]) };
print $@, $! + 0, "\n";
CODE
    my ($st, $out) = run_perl($code, args => [$d], strace => [ '-e', 'trace=' . syscall_set('renameat'),
                                                               '-e', 'inject=' . syscall_set('renameat') . ':error=EIO:when=2' ]);
    is($out, "file_set_contents_many: replaced '$d/f1', then close (rename) atomic file '$d/f2' failed: "
           . FFTest::errno_text(5) . "\n5\n", 'renames apart, the second fails: the error, $!') or diag("status $st");
    is_deeply([ map { slurp("$d/f$_") } 1 .. 3 ], [ "new1\n", "old2\n", "old3\n" ], 'renames apart, the second fails: the first replaced');
    is_deeply([ temps_in($d) ], [], 'renames apart, the second fails: no temp');
}

# The renames made apart from a thread with the smallest stack threads
# allows (16 KiB): the child's stack is a block of its own (malloc), not a
# part of the caller's stack (it was 32 KiB there: SIGSEGV, status 139).
SKIP: {
    skip 'a perl without ithreads', 2 unless $Config::Config{useithreads};
    my $d = tempdir();
    my $code = <<'CODE';
use threads;
use FastFile qw(file_set_contents_many);
my ($d) = @ARGV;
threads->create(sub { sleep 10 })->detach;
my $small = threads->create({ stack_size => 16384 }, sub {
    eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. 3 ]); 1 } ? 'ok' : "died $@";
});
print $small->join, "\n";
CODE
    my ($st, $out) = run_perl($code, args => [$d]);
    is("$st $out", "0 ok\n", 'renames apart from a thread with a 16 KiB stack: the call returns');
    is_deeply([ map { slurp("$d/f$_") } 1 .. 3 ], [ map { "new$_\n" } 1 .. 3 ],
              'renames apart from a thread with a 16 KiB stack: every target new');
}

# The renames' child killed (SIGKILL to it alone: another thread of the
# caller finds it in /proc/PID/task/*/children once a given target is new,
# while strace holds the child 0.3 s at a rename): the caller tells what was
# made. Killed after a rename (delay_exit) that file is replaced (it was
# told as failed: "replaced f1, then ... f2 failed" with f2 new); after the
# last one every target is new and the call succeeds (it died); killed
# before a rename (delay_enter) that file failed, as before.
SKIP: {
    skip 'a perl without ithreads', 9 unless $Config::Config{useithreads};
    skip 'the portable build makes no child for the renames', 9 if $PORTABLE;
    skip 'no /proc/PID/task/TID/children', 9 unless -e "/proc/$$/task/$$/children";
    my $KILLER = <<'CODE';
use threads;
use FastFile qw(file_set_contents_many);
my ($d, $seen) = @ARGV;
for (1 .. 4) { open my $fh, '>', "$d/f$_" or die; print {$fh} "old$_\n"; close $fh }
my $pid = $$;
my $killer = threads->create(sub {
    for (1 .. 20000) {
        open my $fh, '<', "$d/f$seen" or die;
        if ((<$fh> // '') eq "new$seen\n") {
            for my $c (glob "/proc/$pid/task/*/children") {
                open my $ch, '<', $c or next;
                my @kids = split ' ', (<$ch> // '');
                return kill('KILL', @kids) if @kids;
            }
            return 0;
        }
        select undef, undef, undef, 0.0005;
    }
    return -1;
});
my $ok = eval { file_set_contents_many([ map { ("$d/f$_", "new$_\n") } 1 .. 4 ]); 1 };
print 'killed ', $killer->join, "\n", 'call ', ($ok ? "ok\n" : "died $@");
CODE
    for my $c ([ 'after the second rename', 'delay_exit', 2, 2, 2, "died file_set_contents_many: replaced '%s/f1', '%s/f2', then close (rename) atomic file '%s/f3' failed: " . FFTest::errno_text(4) ],
               [ 'after the last rename', 'delay_exit', 4, 4, 4, 'ok' ],
               [ 'before the second rename', 'delay_enter', 2, 1, 1, "died file_set_contents_many: replaced '%s/f1', then close (rename) atomic file '%s/f2' failed: " . FFTest::errno_text(4) ]) {
        my ($label, $delay, $when, $seen, $new, $want) = @$c;
        my $d = tempdir();
        my $renames = syscall_set('renameat');
        my ($st, $out) = run_perl($KILLER, args => [ $d, $seen ],
                                  strace => [ '-e', "trace=$renames", '-e', "inject=$renames:$delay=300000:when=$when" ]);
        $want =~ s{%s}{$d}g;
        like($out, qr/^killed 1\ncall \Q$want\E\n/m, "renames' child killed $label: the call says what was made") or diag("status $st");
        is_deeply([ map { slurp("$d/f$_") } 1 .. 4 ], [ (map { "new$_\n" } 1 .. $new), map { "old$_\n" } $new + 1 .. 4 ],
                  "renames' child killed $label: $new targets new");
        is_deeply([ temps_in($d) ], [], "renames' child killed $label: no temp");
    }
}

done_testing();
