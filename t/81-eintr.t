#!perl
# EINTR that comes without a signal, under strace injection:
#
# - A filesystem that answers EINTR forever (a misbehaving FUSE server, NFS
#   "intr") ends the call with EINTR after FF_EINTR_SPINS_MAX (100) retries
#   in a row, instead of spinning at full CPU: every API (file_set_contents,
#   with $\ through writev, the writer, the batch), every retry loop kind
#   (write, writev, the temp's openat, rename); target untouched, no temp.
#   EINTRs that each come with a signal (a handler runs each time) are not
#   bounded: 150 of them still end in a written file.
# - One EINTR in each syscall a call makes (found from a clean run, not
#   listed by hand), the cleanup's after a failed write too: the call ends
#   as without it, no temp left. On fastfs too: its cleanup's unlink
#   answered EINTR once.
# - A real signal storm (setitimer at 10 kHz, a perl handler): a reader
#   blocked on a FIFO and 400 writes and reads of every API, none fails.
# - An exclusive create retried after an EINTR finds the temp its first
#   attempt made (NFS or FUSE create, then answer EINTR): that file is
#   removed, nothing is left: on fastfs, whose "created" rule does exactly
#   that; and under strace, which cannot make a syscall both succeed and
#   fail, so the first open is failed with EINTR and the file it would have
#   made is put there beforehand (empty, ours, the mode asked, just now),
#   next to files that are not plausibly ours (not empty, another owner, a
#   wider mode, a symlink, two links): those are never touched.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(strace_why strace_call calls_named temps_in slurp spew errno_text tempdir exit_child);
use FastFile qw(:all);
use FastFile::Writer;
use Errno ();
use File::Path ();
use Time::HiRes ();

my $why = strace_why();
plan skip_all => "strace unusable: $why" if $why;

my $SPINS = 100;            # FF_EINTR_SPINS_MAX in ff_io.h
my $EINTR = Errno::EINTR();
my $dir = tempdir();
umask 022;

# ------------------------------------------------------- EINTR forever

my @forever = (
    [ 'file_set_contents, write', 'write',
      'file_set_contents($T, "new\n")', 'unable to write' ],
    [ 'file_set_contents with $\\, writev', 'writev',
      'local $\ = "\n"; file_set_contents($T, "new")', 'unable to write' ],
    [ 'file_set_contents, the open of the temp', 'openat',
      'file_set_contents($T, "new\n")', 'unable to open file' ],
    [ 'file_set_contents, rename', 'rename',
      'file_set_contents($T, "new\n")', 'close \(rename\) atomic file' ],
    [ 'FastFile::Writer, write at commit', 'write',
      'my $w = FastFile::Writer->new($T); $w->print("new\n"); $w->commit', 'unable to write' ],
    [ 'file_set_contents_many, write', 'write',
      'file_set_contents_many([ $T => "new\n" ])', 'unable to write' ],
);
my $n = 0;
for my $c (@forever) {
    my ($label, $call, $code, $text) = @$c;
    my $t = "$dir/forever" . ++$n;
    spew($t, "old\n");
    my $t0 = Time::HiRes::time();
    # the temp's path only: perl's own output is not interrupted; the
    # timeout is the watchdog (the old code spun until killed)
    my $r = eval {
        strace_call($code, target => $t, pid => $FFTest::PID, attach => 1, paths => [ '%TMP%', $t ],
                    inject => ["$call:error=EINTR"], trace => [$call], timeout => 20)
    } || { ok => 1, err => $@, injected => -1 };
    my $took = Time::HiRes::time() - $t0;
    ok(!$r->{ok}, "$label: EINTR forever: the call fails") or diag($r->{err});
    is($r->{errno}, $EINTR, "$label: \$! is EINTR");
    like($r->{err} // '', qr/^$text .*(?: - |: )\Q${\ errno_text($EINTR)}\E\n/, "$label: the croak says which step");
    is($r->{injected}, $SPINS, "$label: after $SPINS tries, no more");
    is(slurp($t), "old\n", "$label: target untouched");
    is_deeply([ temps_in($dir) ], [], "$label: no temp left");
    note sprintf '%s: %.2f s under strace', $label, $took;
}

# EINTRs that each come with a signal: handled, retried, never bounded
{
    my $t = "$dir/signalled";
    spew($t, "old\n");
    my $code = 'my $n = 0; local $SIG{ALRM} = sub { $n++ }; file_set_contents($T, "new\n"); $n';
    my $r = strace_call($code, target => $t, pid => $FFTest::PID, attach => 1, paths => ['%TMP%'],
                        inject => ['write:error=EINTR:signal=SIGALRM:when=1..150'], timeout => 60);
    ok($r->{ok}, '150 EINTRs, each with a signal: the call succeeds') or diag($r->{err});
    is($r->{ret}, 150, '... the handler ran 150 times');
    is(slurp($t), "new\n", '... content');
    is_deeply([ temps_in($dir) ], [], '... no temp left');
}

# ------------------------------- one EINTR in each syscall a call makes

# Every syscall of the core retries EINTR (bounded), the cleanup's too (no
# handler runs there: perl is unwinding). Found, not listed: the syscalls
# each call makes on its own paths are taken from a clean run, then each
# one, in turn, answers EINTR once: the call must end as the clean run did
# (written, or the injected error), and leave no temp. A syscall added later
# is swept with the rest.
{
    my @sweep = (
        [ 'file_set_contents, follow_symlinks, preserve, fsync, if_changed',
          'file_set_contents($T, "new\n", { follow_symlinks => 1, preserve => 1, fsync => 1, if_changed => 1 })' ],
        [ 'file_set_contents, mkdir, fsync',
          'file_set_contents("$T.d/x/y", "new\n", { mkdir => 1, fsync => 1 }); rename "$T.d/x/y", $T' ],
        [ 'FastFile::Writer, follow_symlinks, preserve, fsync',
          'my $w = FastFile::Writer->new($T, { follow_symlinks => 1, preserve => 1, fsync => 1 }); $w->print("new\n"); $w->commit' ],
        [ 'file_set_contents_many, follow_symlinks, preserve, fsync',
          'file_set_contents_many([ $T => "new\n" ], { follow_symlinks => 1, preserve => 1, fsync => 1 })' ],
        [ 'file_get_contents', 'file_get_contents($T) eq "old\n" or die "read: wrong bytes\n"' ],
        [ 'file_read_firstline', 'file_read_firstline($T) eq "old" or die "read: wrong line\n"' ],
        # the cleanup after a failed write
        [ 'file_set_contents, the write fails', 'file_set_contents($T, "new\n")', 'write:error=ENOSPC' ],
        [ 'FastFile::Writer, the write fails',
          'my $w = FastFile::Writer->new($T); $w->print("new\n"); $w->commit', 'write:error=ENOSPC' ],
        [ 'file_set_contents_many, the write fails', 'file_set_contents_many([ $T => "new\n" ])', 'write:error=ENOSPC' ],
    );
    my ($cases, $syscalls) = (0, 0);
    for my $c (@sweep) {
        my ($label, $code, $fault) = @$c;
        my $d = "$dir/sweep" . ++$n;
        mkdir $d or die "mkdir $d: $!";
        my $t = "$d/link";          # a symlink to "real" (followed, or replaced)
        my $fresh = sub {
            File::Path::remove_tree(glob("$d/*"));    # (no rm process: a fork each)
            spew("$d/real", "old\n", 0640);
            symlink 'real', $t or die "symlink: $!";
        };
        my @paths = ($d, $t, "$d/real", map({ ("$_.tmp.%PID%") } $t, "$d/real"),
                     "$t.d", "$t.d/x", "$t.d/x/y", "$t.d/x/y.tmp.%PID%");
        my @fault = $fault ? ($fault) : ();
        my $outcome = sub {
            my ($r) = @_;
            my $err = $r->{ok} ? '' : $r->{err} // '';
            return join '|', $err, slurp("$d/real") // '-', slurp($t) // '-', -l $t ? 'link' : 'file';
        };
        $fresh->();
        my $clean = strace_call($code, target => $t, pid => $FFTest::PID, attach => 1, paths => \@paths, inject => \@fault);
        my $want = $outcome->($clean);
        my %seen;
        my @names = sort grep { !$seen{$_}++ && $_ !~ /\A(?:close|write|writev|chdir)\z/ }
            map { $_->{name} } @{ $clean->{calls} };
        ok(@names >= 2, "$label: its syscalls found (@names)");
        for my $name (@names) {
            $fresh->();
            my $r = strace_call($code, target => $t, pid => $FFTest::PID, attach => 1, paths => \@paths,
                                inject => [ @fault, "$name:error=EINTR:when=1" ]);
            ok($r->{injected} >= 1, "$label, $name: EINTR injected") or next;
            is($outcome->($r), $want, "$label, $name answers EINTR once: as without it")
                or diag($r->{err});
            is_deeply([ temps_in($d), -d "$t.d/x" ? temps_in("$t.d/x") : () ], [], "$label, $name: no temp left");
            $syscalls++;
        }
        $cases++;
    }
    note "one EINTR each: $syscalls syscalls of $cases calls";
}

# ------------------------------------------ a real signal storm, no strace

# setitimer at 10 kHz with a perl handler: every EINTR comes with a signal,
# so none counts towards the bound, and no call fails: a reader blocked on
# a FIFO (interrupted again and again until its writer speaks, 0.2 s later)
# and writes of every API meanwhile.
SKIP: {
    require POSIX;
    skip 'no setitimer', 1 unless eval { Time::HiRes::setitimer(Time::HiRes::ITIMER_REAL(), 0); 1 };
    # valgrind hands the signals over in bursts: perl dies with "Maximal
    # count of pending signals (120) exceeded", FastFile or not
    skip 'a 10 kHz signal storm under valgrind', 1 if $ENV{FASTFILE_LEAKCHECK};
    my $d = "$dir/storm";
    mkdir $d or die "mkdir $d: $!";
    my $fifo = "$d/fifo";
    POSIX::mkfifo($fifo, 0600) or die "mkfifo: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open my $w, '>', $fifo or POSIX::_exit(1);
        Time::HiRes::sleep(0.2);
        print {$w} "late\n";
        close $w;
        POSIX::_exit(0);
    }
    my $signals = 0;
    local $SIG{ALRM} = sub { $signals++ };
    Time::HiRes::setitimer(Time::HiRes::ITIMER_REAL(), 0.0001, 0.0001);
    my $got = eval { file_get_contents($fifo) };
    my $read_err = $@;
    my $read_signals = $signals;
    my ($fails, $writes) = (0, 0);
    for my $i (1 .. 100) {
        my $t = "$d/f" . ($i % 4);
        for my $code (sub { file_set_contents($t, "x" x 65536, { preserve => 1, fsync => $i == 1 }) },
                      sub { my $w = FastFile::Writer->new($t); $w->print("y" x 65536); $w->commit },
                      sub { file_set_contents_many([ $t => 'z' x 65536, "$t.b" => 'b' ]) },
                      sub { file_get_contents($t) }) {
            $writes++;
            eval { $code->(); 1 } or $fails++;
        }
    }
    Time::HiRes::setitimer(Time::HiRes::ITIMER_REAL(), 0);
    waitpid $pid, 0;
    is($got, "late\n", 'signal storm: the FIFO reader gets its line') or diag($read_err);
    cmp_ok($read_signals, '>', 100, "signal storm: ... through $read_signals signals");
    is($fails, 0, "signal storm: $writes writes and reads, none failed ($signals signals in all)");
    is_deeply([ temps_in($d) ], [], 'signal storm: no temp left');
}

# ------------------------------------- an exclusive create retried after EINTR

# what the first open "made", at $tmp (made here, just before the call)
my %orphan = (
    ours         => [ sub { spew($_[0], '') }, 1 ],
    'not empty'  => [ sub { spew($_[0], 'x') }, 0 ],
    'wider mode' => [ sub { spew($_[0], '', 0666) }, 0 ],
    symlink      => [ sub { symlink "$_[0].victim", $_[0] or die "symlink: $!" }, 0 ],
    'two links'  => [ sub { spew($_[0], ''); link $_[0], "$_[0].link" or die "link: $!" }, 0 ],
);
$orphan{'another owner'} = [ sub { spew($_[0], ''); chown 65534, 65534, $_[0] or die "chown: $!" }, 0 ]
    if $> == 0;
my %api = (
    file_set_contents => 'file_set_contents($T, "new\n")',
    writer => 'my $w = FastFile::Writer->new($T); $w->print("new\n"); $w->commit',
    batch => 'file_set_contents_many([ $T => "new\n" ])',
);
for my $kind (sort keys %orphan) {
    my ($setup, $ours) = @{ $orphan{$kind} };
    for my $api (sort keys %api) {
        my $label = "$api, EINTR then EEXIST, $kind";
        my $d = "$dir/orphan" . ++$n;
        mkdir $d or die "mkdir $d: $!";
        my $t = "$d/target";
        spew($t, "old\n");
        my $tmp = "$t.tmp.$FFTest::PID";
        $setup->($tmp);
        # the batch opens its temp relative to the directory's fd (open first)
        my ($paths, $when) = $api eq 'batch' ? ([$d], 2) : (['%TMP%'], 1);
        my $r = strace_call($api{$api}, target => $t, pid => $FFTest::PID, attach => 1, paths => $paths,
                            inject => ["openat:error=EINTR:when=$when"]);
        ok($r->{ok}, "$label: the write succeeds") or diag($r->{err}, $r->{stderr});
        is($r->{injected}, 1, "$label: the first open was interrupted");
        is(slurp($t), "new\n", "$label: content");
        if ($ours) {
            ok(!-e $tmp && !-l $tmp, "$label: the orphan of the interrupted open is gone");
            my @opens = map { ($_->{errno} // 'ok') . ($_->{args} =~ /\.tmp\.\d+"/ ? '' : '(random name)') }
                grep { $_->{name} eq 'openat' && $_->{args} =~ /O_EXCL/ } @{ $r->{calls} };
            my @plain = grep { !/random/ } @opens;
            is("@plain", 'EINTR EEXIST', "$label: EINTR, EEXIST, and the name is never created again") or diag("@opens");
            is($opens[-1], 'ok(random name)', "$label: a random name instead") if $api eq 'batch';  # the others' -P sees only %TMP%
        } else {
            ok(-e $tmp || -l $tmp, "$label: not plausibly ours: left alone");
            unlink $tmp, "$tmp.link";
        }
        ok(!-e "$tmp.victim", "$label: nothing made through a link");
        is_deeply([ temps_in($d) ], [], "$label: no temp left");
        unlink glob("$d/*");
    }
}

# ------------------- the "orphan" was another writer's: it is never recreated

# Writer A (same $$: another PID namespace, another node, another thread)
# has created "<target>.tmp.<pid>" and not written yet (its write held 1.5 s)
# when writer B's create of that name is interrupted and retried: B finds an
# empty file of ours, just made, and removes it. Had B created that name
# again (the old code), A's rename would publish B's empty temp, and B's
# data would land in the target in place, B's rename failing: the target
# was seen empty for a second. Now B takes a random name: the target only
# ever holds the old or a complete content, that of a writer that succeeded.
{
    my $d = "$dir/two-writers";
    mkdir $d or die "mkdir $d: $!";
    my $t = "$d/target";
    my $tmp = "$t.tmp.$FFTest::PID";
    spew($t, "old\n");
    my %want = ("old\n" => 1, 'A' x 4096 => 1, 'B' x 4096 => 1);
    my $writer = sub {
        my ($who, @inject) = @_;
        my $pid = fork // die "fork: $!";
        return $pid if $pid;
        my $r = eval {
            strace_call("file_set_contents(\$T, '$who' x 4096)", target => $t, pid => $FFTest::PID, attach => 1,
                        paths => ['%TMP%'], inject => \@inject, timeout => 20)
        };
        exit_child($r && $r->{ok} ? 0 : 1);    # (_exit: no END block of the test's)
    };
    require POSIX;
    my $a = $writer->('A', 'write:delay_enter=1500000:when=1');
    my $t0 = Time::HiRes::time();
    Time::HiRes::sleep(0.01) until -e $tmp || Time::HiRes::time() - $t0 > 10;
    ok(-e $tmp && -z $tmp, "two writers: A's temp is there, empty");
    my $b = $writer->('B', 'openat:error=EINTR:when=1', 'write:delay_enter=1500000:when=1');
    my (%seen, %status);
    while (keys %status < 2) {
        my $c = slurp($t) // 'missing';
        $seen{ $want{$c} ? $c : length($c) ? 'partial' : $c eq 'missing' ? 'missing' : 'empty' }++;
        for my $p (grep { !exists $status{$_} } $a, $b) {
            $status{$p} = $? >> 8 if waitpid($p, POSIX::WNOHANG()) == $p;
        }
        Time::HiRes::sleep(0.005);
    }
    my @odd = grep { !$want{$_} } sort keys %seen;
    is("@odd", '', 'two writers: the target was never empty, partial or missing');
    my $final = slurp($t);
    my @ok = map { $_->[0] } grep { $status{ $_->[1] } == 0 } [ 'A', $a ], [ 'B', $b ];
    ok(@ok && grep({ $final eq $_ x 4096 } @ok), "two writers: the target holds a content whose writer succeeded (@ok)")
        or diag('final: ' . substr($final, 0, 8) . '...');
    is_deeply([ temps_in($d) ], [], 'two writers: no temp left');
}

# ------------------------------- the same on a filesystem that really does it

# fastfs' "created" rule makes the file and then answers EINTR, as an NFS
# server or a FUSE server interrupted after the fact does
SKIP: {
    require FastFS;
    my $why = FastFS::available();
    skip "fastfs: $why", 1 if $why;
    my $fs = FastFS->mount(max_write => 131072);
    for my $api (sort keys %api) {
        my $label = "fastfs, $api: the create made the file, then said EINTR";
        my $t = $fs->dir . "/$api";
        spew($t, "old\n");
        $fs->control("failn 1 created 4 /$api.tmp.*");
        my $r = strace_call($api{$api}, target => $t, pid => $FFTest::PID, attach => 1, trace => ['openat']);
        ok($r->{ok}, "$label: the write succeeds") or diag($r->{err});
        my @opens = map { ($_->{errno} // 'ok') . ($_->{args} =~ /\.tmp\.\d+"/ ? '' : '(random name)') }
            grep { $_->{args} =~ /\Q$api\E\.tmp\.\d+(?:\.[0-9a-f]{16})?"/ } calls_named($r, 'openat');
        is("@opens", 'EINTR EEXIST ok(random name)', "$label: EINTR, EEXIST, then a random name, never the same again");
        is(slurp($t), "new\n", "$label: content");
        is_deeply([ temps_in($fs->dir) ], [], "$label: nothing left behind");
    }
    # the cleanup's unlink answered EINTR once (the server was interrupted):
    # retried, the temp does not stay behind
    for my $api (sort keys %api) {
        my $label = "fastfs, $api: the write fails, the cleanup's unlink says EINTR once";
        my $t = $fs->dir . "/clean-$api";
        spew($t, "old\n");
        $fs->control("fail write 28 /clean-$api.tmp.*\nfailn 1 unlink 4 /clean-$api.tmp.*");
        my $r = strace_call($api{$api}, target => $t, pid => $FFTest::PID, attach => 1, trace => [qw(unlink unlinkat)]);
        ok(!$r->{ok}, "$label: the call fails");
        like($r->{err} // '', qr/ - \Q${\ errno_text(Errno::ENOSPC())}\E\n\z/, "$label: with the write's ENOSPC");
        my @unlinks = map { $_->{errno} // 'ok' } grep { $_->{args} =~ /clean-\Q$api\E\.tmp\./ } @{ $r->{calls} };
        is("@unlinks", 'EINTR ok', "$label: the unlink retried");
        is(slurp($t), "old\n", "$label: target untouched");
        is_deeply([ temps_in($fs->dir) ], [], "$label: no temp left");
    }
    $fs->unmount;
}

done_testing;
