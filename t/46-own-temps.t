#!perl
# Nothing is published but what the call itself created: a rename moves
# only a temp this call made. A batch whose pair's target is another
# pair's temp name (directly, through a symlink, through ".."); user code
# (signal handlers, code between atomic_writer and commit) that replaces a
# temp by name.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(slurp spew tempdir strace_why strace_call);

use FastFile qw(:all);
use FastFile::Writer;

my $dir = tempdir();
my $n = 0;

sub entries {
    my ($d) = @_;
    opendir my $dh, $d or die "$d: $!";
    return join ' ', sort grep { !/^\.\.?\z/ } readdir $dh;
}

# ---- a batch: one pair's target is another pair's temp name
for my $c (
    # label, the names as given (relative to a fresh directory: x and x.tmp.$$ in d)
    [ 'temp named as a target',          "d/x.tmp.$$", 'd/x' ],
    [ '... the other order',             'd/x', "d/x.tmp.$$" ],
    [ '... through a symlink',           "e/x.tmp.$$", 'd/x' ],
    [ '... through ..',                  "d/sub/../x.tmp.$$", 'd/x' ],
    [ '... through a symlink, reversed', 'd/x', "e/x.tmp.$$" ],
) {
    my ($label, $first, $second) = @$c;
    for my $opts ({}, { noclobber => 1 }, { fsync => 1 }) {
        my $what = "$label" . (%$opts ? ' (' . join(',', keys %$opts) . ')' : '');
        my $top = "$dir/" . ++$n;
        mkdir $top or die;
        mkdir "$top/d" or die;
        mkdir "$top/d/sub" or die;
        symlink 'd', "$top/e" or die;
        my $w = eval { file_set_contents_many([ "$top/$first" => "first\n", "$top/$second" => "second\n" ], $opts) };
        is($w, 2, "batch, $what: 2 written") or diag $@;
        is(slurp("$top/$first"), "first\n", "batch, $what: '$first' holds its own bytes");
        is(slurp("$top/$second"), "second\n", "batch, $what: '$second' holds its own bytes");
        is(entries("$top/d"), "sub x x.tmp.$$", "batch, $what: nothing else in the directory");
    }
}

# ---- the writer: code between atomic_writer and commit replaces its temp
for my $how ('file_set_contents', 'unlink and write', 'rename over') {
    my $t = "$dir/w-" . ++$n;
    spew($t, "old\n");
    my $w = atomic_writer($t);
    $w->print("mine\n");
    my $tmp = "$t.tmp.$$";
    ok(-e $tmp, "writer, $how: its temp is $tmp") or next;
    if ($how eq 'file_set_contents') { file_set_contents($tmp, "other\n") }
    elsif ($how eq 'unlink and write') { unlink $tmp or die; spew($tmp, "other\n") }
    else { spew("$t.x", "other\n"); rename "$t.x", $tmp or die }
    ok(!eval { $w->commit; 1 }, "writer, $how: commit fails");
    like($@, qr/^unable to replace '\Q$t\E' - its temporary file '\Q$tmp\E' was replaced or removed during the call - /,
         "writer, $how: ... saying why");
    is(slurp($t), "old\n", "writer, $how: target untouched");
    is(slurp($tmp), "other\n", "writer, $how: the other file is left alone");
    undef $w;
    is(slurp($tmp), "other\n", "writer, $how: ... also when the writer goes");
    unlink $tmp;
}
{   # the temp removed: commit fails, nothing published
    my $t = "$dir/w-" . ++$n;
    my $w = atomic_writer($t);
    unlink "$t.tmp.$$" or die;
    ok(!eval { $w->commit; 1 }, 'writer, temp removed: commit fails');
    ok(!-e $t, '... no target made');
}

# ---- a signal handler that replaces the temp while a call writes it: the
# single call and the batch fail, target untouched, the other file kept
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    for my $c (
        [ 'file_set_contents', 'file_set_contents($T, "mine\n")' ],
        [ 'file_set_contents_many', 'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])' ],
        [ 'file_set_contents_many, the second temp', 'file_set_contents_many([ "$T.b" => "b\n", $T => "mine\n" ])' ],
        [ 'file_set_contents_many, fsync', 'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ], { fsync => 1 })' ],
    ) {
        my ($label, $call) = @$c;
        my $t = "$dir/s-" . ++$n;
        spew($t, "old\n");
        my $r = strace_call('local $SIG{ALRM} = sub { file_set_contents("$T.tmp.$$", "other\n") };' . $call,
                            attach => 1, target => $t, pid => $FFTest::PID, trace => ['write'],
                            inject => ['write:error=EINTR:signal=SIGALRM:when=' . ($label =~ /second/ ? 2 : 1)]);
        ok(!$r->{ok}, "handler replaces the temp, $label: the call fails") or diag $r->{log};
        like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was replaced or removed during the call/,
             "handler replaces the temp, $label: ... saying why");
        is(slurp($t), "old\n", "handler replaces the temp, $label: target untouched");
        is(slurp("$t.tmp.$FFTest::PID"), "other\n", "handler replaces the temp, $label: the handler's file left alone");
        ok(!-e "$t.b", "handler replaces the temp, $label: no other target written") if $label =~ /many/;
        opendir my $dh, $dir or die;
        is_deeply([ sort grep { /^\Q$n\E/ || /^s-\Q$n\E\./ } readdir $dh ], [ "s-$n.tmp.$FFTest::PID" ],
                  "handler replaces the temp, $label: no temp of ours left");
        unlink "$t.tmp.$FFTest::PID";
    }
}

# ---- targets that differ only in case, on a directory that folds case:
# one file, an error as for a target given twice. The check runs where the
# second temp's plain name is found taken: simulated here by a handler
# that makes that name a link to the first temp (what a folding directory
# shows), then on a real casefold tmpfs where the kernel has one.
SKIP: {
    my $why = strace_why();
    skip $why, 4 if $why;
    my $d = "$dir/fold-sim";
    mkdir $d or die;
    my $r = strace_call('local $SIG{ALRM} = sub { link "$ARGV[0]/A.tmp.$$", "$ARGV[0]/a.tmp.$$" or die "link: $!" };'
                        . ' file_set_contents_many([ "$ARGV[0]/A" => "1\n", "$ARGV[0]/a" => "2\n" ])',
                        attach => 1, args => [$d], trace => ['write'], inject => ['write:error=EINTR:signal=SIGALRM:when=1']);
    ok(!$r->{ok}, 'folded names (simulated): the batch fails') or diag $r->{log};
    is($r->{err}, "file_set_contents_many: '$d/A' and '$d/a' are the same file\n", '... as for a target given twice');
    ok(!-e "$d/A" && !-e "$d/a", '... nothing published');
    is(entries($d), "a.tmp.$r->{pid}", '... only the link the handler made is left');
}
# ---- the same where the directory's names differ too: "real/x" and
# "L/X" (L a symlink to real) are one file where case folds. The leaves
# fold alike, so the two directory names are told apart by identity (one
# directory), and the second temp's name is found taken by the first
# temp (the handler's link, as above): the same error.
SKIP: {
    my $why = strace_why();
    skip $why, 3 if $why;
    my $d = "$dir/fold-dirs";
    mkdir $d or die;
    mkdir "$d/real" or die;
    symlink 'real', "$d/L" or die;
    # "L" sorts first: X's temp is written first, through L
    my $r = strace_call('local $SIG{ALRM} = sub { link "$ARGV[0]/real/X.tmp.$$", "$ARGV[0]/real/x.tmp.$$" or die "link: $!" };'
                        . ' file_set_contents_many([ "$ARGV[0]/real/x" => "1\n", "$ARGV[0]/L/X" => "2\n" ])',
                        attach => 1, args => [$d], trace => ['write'], inject => ['write:error=EINTR:signal=SIGALRM:when=1']);
    ok(!$r->{ok}, 'folded names in two directory names (simulated): the batch fails') or diag $r->{log};
    is($r->{err}, "file_set_contents_many: '$d/L/X' and '$d/real/x' are the same file\n",
       '... as for a target given twice');
    is(entries("$d/real"), "x.tmp.$r->{pid}", '... nothing published, only the link the handler made left');
}

# ---- a temp whose name folds to another pair's target ("x.tmp.$$" beside
# "X.TMP.$$"): where case folds, that pair's rename would replace it and
# "x" would get the other pair's bytes. Such a temp takes a random name,
# as one that is another pair's target exactly does.
SKIP: {
    my $why = strace_why();
    skip $why, 3 if $why;
    my $d = "$dir/fold-temp";
    mkdir $d or die;
    my $r = strace_call('file_set_contents_many([ "$ARGV[0]/X.TMP.$$" => "1\n", "$ARGV[0]/x" => "2\n" ])',
                        attach => 1, args => [$d], trace => ['openat']);
    ok($r->{ok}, 'temp named like another target but for case: the batch succeeds') or diag $r->{err};
    my @made = $r->{log} =~ /openat\(\d+, "(x\.tmp\.[^"]*)", [^)]*O_CREAT/g;
    like("@made", qr/\Ax\.tmp\.$r->{pid}\.[0-9a-f]{16}\z/, '... its temp takes a random name') or diag $r->{log};
    is(slurp("$d/x") . slurp("$d/X.TMP.$r->{pid}"), "2\n1\n", '... each target its own bytes');
}
# ... every target whose temp is that target, not only the first of the
# names that fold alike: beside "X", "x"'s plain temp "x.tmp.$$" is the
# first pair's target, whose rename (first) would replace it, and x's
# rename would then move the first pair's bytes to x (the batch
# succeeding, x.tmp.$$ gone); also where the names are of two names of
# one directory (L a symlink to sub)
for my $order ([ 'x.tmp.PID', 'X', 'x' ], [ 'x.tmp.PID', 'x', 'X' ], [ 'X.TMP.PID', 'X', 'x' ],
               [ 'sub/x.tmp.PID', 'L/X', 'L/x' ]) {
    my $d = "$dir/fold-all-" . join('-', @$order) =~ tr{/}{_}r;
    mkdir $d or die;
    mkdir "$d/sub" or die;
    symlink 'sub', "$d/L" or die;
    my @names = map { s/PID/$$/r } @$order;
    my $w = eval { file_set_contents_many([ map { ("$d/$_" => "$_\n") } @names ]) };
    is($w, 3, "@$order: the batch writes all three") or diag $@;
    is(join('', map { slurp("$d/$_") // "(none)\n" } @names), join('', map { "$_\n" } @names),
       '... each target its own bytes');
}
SKIP: {
    skip 'casefold: needs root (mount)', 9 if $>;
    skip 'casefold: this kernel has no casefold tmpfs (/sys/fs/tmpfs/features/casefold; CONFIG_UNICODE, Linux 6.13+)', 9
        unless -e '/sys/fs/tmpfs/features/casefold';
    skip 'casefold: chattr not installed', 9 unless FFTest::which('chattr');
    my $mnt = "$dir/fold";
    mkdir $mnt or die;
    skip "casefold: mount -o casefold failed", 9 if system('mount', '-t', 'tmpfs', '-o', 'casefold,size=1m', 'tmpfs', $mnt);
    my $ok = eval {
        mkdir "$mnt/d" or die "mkdir: $!";
        system('chattr', '+F', "$mnt/d") == 0 or die "chattr +F failed\n";
        1;
    };
    my $err = $@;
    if ($ok) {
        for my $pairs ([ 'A' => "1\n", 'a' => "2\n" ], [ 'x' => "1\n", 'X' => "2\n" ]) {
            my @l = @$pairs;
            $l[$_ * 2] = "$mnt/d/$l[$_ * 2]" for 0, 1;
            spew("$mnt/d/x", "old\n") if $l[0] =~ /x\z/;    # an existing target too
            ok(!eval { file_set_contents_many(\@l); 1 }, "casefold, $l[0] and $l[2]: the batch fails");
            like($@, qr/are the same file/, '... as for a target given twice');
        }
        is(slurp("$mnt/d/x"), "old\n", 'casefold: the existing target untouched');
        symlink 'd', "$mnt/L" or die "symlink: $!";
        ok(!eval { file_set_contents_many([ "$mnt/d/x" => "1\n", "$mnt/L/X" => "2\n" ]); 1 },
           'casefold, d/x and L/X (L a symlink to d): the batch fails');
        like($@, qr/are the same file/, '... as for a target given twice');
        unlink "$mnt/d/x";
        ok(eval { file_set_contents_many([ "$mnt/d/X.TMP.$$" => "1\n", "$mnt/d/x" => "2\n" ]); 1 },
           'casefold, X.TMP.$$ and x: the batch succeeds') or diag $@;
        is(slurp("$mnt/d/x") . slurp("$mnt/d/X.TMP.$$"), "2\n1\n", '... each target its own bytes');
    } else {
        fail("casefold: $err");
    }
    system('umount', $mnt);
}

# ---- a handler run while the temps are checked before the renames (after
# the first one's check) that replaces the first temp, checked already: it
# is checked again, nothing is published. (With more than one file the
# renames themselves run with signals blocked: no handler runs between
# them, t/88.) The first signal comes at the first write, so that the
# temps' identities are noted and checked.
SKIP: {
    my $why = strace_why();
    skip $why, 4 if $why;
    my $t = "$dir/r-" . ++$n;
    spew($_, "old\n") for $t, "$t.b";
    # the temp is looked at twice: noted, then checked (its file handle,
    # where the build has them, else fstatat)
    my $look = FastFile::_build_info()->{file_handle} ? 'name_to_handle_at' : 'newfstatat';
    my $r = strace_call('our $k = 0; local $SIG{ALRM} = sub { file_set_contents("$T.tmp.$$", "other\n") if ++$k == 2 };'
                        . ' file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])',
                        attach => 1, target => $t, pid => $FFTest::PID, trace => ['write', $look],
                        inject => ['write:signal=SIGALRM:when=1', "$look:signal=SIGALRM:when=2"]);
    ok(!$r->{ok}, 'handler in the check of the temps replaces one checked: the batch fails');
    is($r->{err}, "unable to replace '$t' - its temporary file "
                  . "'$t.tmp.$FFTest::PID' was replaced or removed during the call - Stale file handle\n",
       '... naming it, nothing replaced');
    is(slurp($t) . slurp("$t.b"), "old\nold\n", '... both targets untouched');
    is(slurp("$t.tmp.$FFTest::PID"), "other\n", "... the handler's file left alone");
}

# ---- noclobber: a handler run on an EINTR of its publishing step
# (renameat2, or the link where renameat2 is refused: the portable build,
# NFS) that replaces the temp: nothing published. (The retry published the
# handler's file as the target.)
SKIP: {
    my $why = strace_why();
    skip $why, 1 if $why;
    my %api = (
        file_set_contents => 'file_set_contents($T, "mine\n", { noclobber => 1 })',
        writer => 'my $w = FastFile::Writer->new($T, { noclobber => 1 }); $w->print("mine\n"); $w->commit',
        file_set_contents_many => 'file_set_contents_many([ $T => "mine\n" ], { noclobber => 1 })',
    );
    my @steps = (
        [ 'by link', 'linkat', [ 'renameat2:error=EINVAL', 'linkat:error=EINTR:signal=SIGALRM:when=1' ] ],
        FastFile::_build_info()->{renameat2}
            ? [ 'renameat2', 'renameat2', [ 'renameat2:error=EINTR:signal=SIGALRM:when=1' ] ] : (),
    );
    for my $step (@steps) {
        my ($how, $call, $inject) = @$step;
        for my $api (sort keys %api) {
            my $label = "noclobber ($how), $api: a handler on its EINTR replaces the temp";
            my $t = "$dir/n-" . ++$n;
            my $r = strace_call('require FastFile::Writer; '
                                . 'local $SIG{ALRM} = sub { file_set_contents("$T.tmp.$$", "other\n") }; '
                                . $api{$api},
                                attach => 1, target => $t, pid => $FFTest::PID, trace => [ 'renameat2', $call ],
                                inject => $inject);
            ok(!$r->{ok}, "$label: the call fails") or diag $r->{log};
            like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was replaced or removed during the call/,
                 "$label: ... saying why");
            ok(!-e $t, "$label: no target made");
            is(slurp("$t.tmp.$FFTest::PID"), "other\n", "$label: the handler's file left alone");
            opendir my $dh, $dir or die;
            is_deeply([ sort grep { /^n-\Q$n\E\b/ } readdir $dh ], [ "n-$n.tmp.$FFTest::PID" ],
                      "$label: no temp of ours left");
            unlink "$t.tmp.$FFTest::PID";
        }
    }
}

done_testing();
