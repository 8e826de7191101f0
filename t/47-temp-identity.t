#!perl
# What a call publishes is what it wrote, whatever user code (a signal
# handler) did to its temp by name meanwhile:
# - a temp removed and made again is never published, whatever inode
#   number the new file gets. ext4 and xfs give a freed inode number to
#   the next file made: a handler that removes the temp (closed by then,
#   in the commit or between a batch's files) and creates a file of that
#   name gets the temp's number, and a check of device and inode alone
#   passes. Run on a loop-mounted ext4 image where we may mount (root),
#   else in the test directory if its filesystem reuses numbers; skipped
#   where neither.
# - a temp written into by name (open '>' or '>>': the same file) is not
#   published by file_set_contents and file_set_contents_many: the temp
#   is read back after user code ran. The writer (bytes not kept) and
#   file_copy publish what the file holds: the POD says so, tested here.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(slurp spew tempdir strace_why strace_call which);
use FastFS;
use Errno ();

use FastFile qw(:all);

my $why = strace_why();
plan skip_all => $why if $why;

my $top = tempdir();
my $mounted;
my $parent = $$;

# An ext4 image, loop-mounted: numbers are reused there whatever the root
# filesystem is.
sub mount_ext4 {
    return 'not root (mount)' if $>;
    return 'mkfs.ext4 not installed' unless which('mkfs.ext4');
    my $img = "$top/ext4.img";
    open my $fh, '>', $img or die "$img: $!";
    truncate $fh, 8 << 20 or die "truncate: $!";
    close $fh;
    return 'mkfs.ext4 failed' if system("mkfs.ext4 -q -F '$img' >/dev/null 2>&1");
    mkdir "$top/mnt" or die;
    return 'mount -o loop failed' if system("mount -o loop '$img' '$top/mnt' 2>/dev/null");
    $mounted = "$top/mnt";
    chmod 0777, $mounted;
    return '';
}

# 1 when a file made right after another's removal gets its number in $d
sub reuses_numbers {
    my ($d) = @_;
    my $same = 1;
    for (1 .. 3) {
        spew("$d/probe-a", '');
        my $ino = (stat "$d/probe-a")[1];
        unlink "$d/probe-a" or die;
        spew("$d/probe-b", '');
        $same &&= (stat "$d/probe-b")[1] == $ino;
        unlink "$d/probe-b" or die;
    }
    return $same;
}

my $mount_why = mount_ext4();
my $dir = $mounted || $top;
END { system('umount', $mounted) if $mounted && $$ == $parent }
my $no_reuse = reuses_numbers($dir) ? ''
    : "no directory here gives a removed file's inode number to the next one ($mount_why; "
      . "the test directory's filesystem does not)";

my $n = 0;
my $HANDLES = FastFile::_build_info()->{file_handle};
diag('this build has no file handles (name_to_handle_at): the identity is the inode number') unless $HANDLES;

sub ours_left {
    my ($t) = @_;
    my ($d, $leaf) = $t =~ m{\A(.*)/([^/]+)\z};
    opendir my $dh, $d or die;
    return [ sort grep { /^\Q$leaf\E\./ } readdir $dh ];
}

# The handler: the temp (its name's file) removed, a file of that name
# made, with the temp's number (said on stdout).
my $REPLACE = 'local $SIG{ALRM} = sub { my $tmp = "$T.tmp.$$"; my $ino = (lstat $tmp)[1] // -1;'
              . ' unlink $tmp or die "unlink: $!"; open my $fh, ">", $tmp or die "open: $!";'
              . ' print $fh "other\n"; close $fh or die;'
              . ' print "number reused\n" if (lstat $tmp)[1] == $ino };';

SKIP: {
skip $no_reuse, 1 if $no_reuse;
for my $c (
    # label, the call, the write (of the traced ones) whose signal runs the handler after the temp's close
    [ 'file_set_contents', 'file_set_contents($T, "mine\n")', 1 ],
    [ 'file_set_contents, fsync', 'file_set_contents($T, "mine\n", { fsync => 1 })', 1 ],
    [ 'file_set_contents_many', 'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])', 1 ],
    [ 'file_set_contents_many, the second temp', 'file_set_contents_many([ "$T.b" => "b\n", $T => "mine\n" ])', 2 ],
    [ 'file_set_contents_many, one pair', 'file_set_contents_many([ $T => "mine\n" ])', 1 ],
    [ 'writer', 'my $w = atomic_writer($T); $w->print("mine\n"); $w->commit', 1 ],
    [ 'writer, noclobber', 'my $w = atomic_writer($T, { noclobber => 1 }); $w->print("mine\n"); $w->commit', 1 ],
    [ 'file_set_contents, noclobber', 'file_set_contents($T, "mine\n", { noclobber => 1 })', 1 ],
) {
    my ($label, $call, $when) = @$c;
    my $noclobber = $label =~ /noclobber/;
    my ($t, $r, $tmp);
    # on a filesystem others use too (not our own image), another process
    # may take the freed number first: tried again, a few times
    for my $try (1 .. ($mounted ? 1 : 5)) {
        $t = "$dir/t-" . ++$n;
        $tmp = "$t.tmp.$FFTest::PID";
        spew($t, "old\n") unless $noclobber;
        $r = strace_call($REPLACE . $call, attach => 1, target => $t, pid => $FFTest::PID, trace => ['write'],
                         inject => ["write:signal=SIGALRM:when=$when"]);
        last if $r->{stdout} =~ /number reused/;
        unlink grep { -e } $t, "$t.b", $tmp;
    }
    if ($r->{stdout} !~ /number reused/ && !$mounted) {
        SKIP: { skip "$label: the freed inode number went to another file 5 times", 1 }
        next;
    }
    like($r->{stdout}, qr/number reused/, "$label: the handler's file got the temp's inode number")
        or diag $r->{log};
    ok(!$r->{ok}, "$label: the call fails") or diag $r->{log};
    is(slurp($t), $noclobber ? undef : "old\n", "$label: target untouched");
    ok(!-e "$t.b", "$label: no other target written") if $label =~ /many/ && $label !~ /one pair/;
    if (!$HANDLES) {
        # the inode alone: the handler's file is taken for the temp;
        # what it holds (other bytes, another size) fails the call, and
        # it is removed as the temp (the POD's CAVEATS)
        like($r->{err}, qr/^unable to replace '\Q$t\E' - its temporary file '\Q$tmp\E' was written to during the call - /,
             "$label (no file handles): ... as written to");
        ok(!-e $tmp, "$label (no file handles): the handler's file removed as the temp");
        next;
    }
    like($r->{err}, qr/^unable to replace '\Q$t\E' - its temporary file '\Q$tmp\E' was replaced or removed during the call - /,
         "$label: ... saying why");
    is(slurp($tmp), "other\n", "$label: the handler's file left alone");
    is_deeply(ours_left($t), [ "t-$n.tmp.$FFTest::PID" ], "$label: nothing else left");
    unlink $tmp;
}
}

# ---- written in place: a handler opens the temp by name and writes into
# it (the same file: its identity holds). file_set_contents and the batch
# read the temp back before the rename once a handler ran, and fail; the
# handler's bytes, or a mix, are never published. A handler that touches
# nothing, or writes the very bytes, changes nothing.
my $big = 'b' x (600 * 1024);     # more than one read of the check
my %CALL = (
    single => 'file_set_contents($T, $D)',
    batch => 'file_set_contents_many([ $T => $D, "$T.b" => "b\n" ])',
    'batch, second' => 'file_set_contents_many([ "$T.b" => "b\n", $T => $D ])',
    'batch, fsync' => 'file_set_contents_many([ $T => $D, "$T.b" => "b\n" ], { fsync => 1 })',
    'batch, one pair' => 'file_set_contents_many([ $T => $D ])',
);
for my $c (
    # label, handler's code on the temp ($tmp), data, $\, inject, 1 when the call must fail
    [ "'>' after the write", 'open my $fh, ">", $tmp or die; print $fh "other\n"; close $fh', "mine\n", undef, 'write:signal=SIGALRM:when=1', 1 ],
    [ "'>' during the write (EINTR)", 'open my $fh, ">", $tmp or die; print $fh "other\n"; close $fh', "mine\n", undef, 'write:error=EINTR:signal=SIGALRM:when=1', 1 ],
    [ "'>>' after the write", 'open my $fh, ">>", $tmp or die; print $fh "x"; close $fh', "mine\n", undef, 'write:signal=SIGALRM:when=1', 1 ],
    [ "'+<' one byte changed, same size", 'open my $fh, "+<", $tmp or die; print $fh "M"; close $fh', "mine\n", undef, 'write:signal=SIGALRM:when=1', 1 ],
    [ "'+<' the last byte of a big file", 'open my $fh, "+<", $tmp or die; seek $fh, -1, 2; print $fh "x"; close $fh', $big, undef, 'write:signal=SIGALRM:when=1', 1 ],
    [ "'>' with \$\\ set", 'open my $fh, ">", $tmp or die; print $fh "other\n"; close $fh', "mine", "\n", 'write:signal=SIGALRM:when=1', 1 ],
    [ 'handler touches nothing', '1', "mine\n", undef, 'write:signal=SIGALRM:when=1', 0 ],
    [ 'handler touches nothing, $\\ set', '1', "mine", "!\n", 'write:signal=SIGALRM:when=1', 0 ],
    [ 'handler touches nothing, big file', '1', $big, undef, 'write:signal=SIGALRM:when=1', 0 ],
    [ "'>' the very bytes", 'open my $fh, ">", $tmp or die; print $fh "mine\n"; close $fh', "mine\n", undef, 'write:signal=SIGALRM:when=1', 0 ],
) {
    my ($how, $code, $data, $ors, $inject, $fails) = @$c;
    for my $api (sort keys %CALL) {
        my $label = "$api, $how";
        my $t = "$dir/p-" . ++$n;
        spew($_, "old\n") for $t, "$t.b";
        my $when = $api =~ /second/ ? 2 : 1;
        (my $inj = $inject) =~ s/when=1/when=$when/;
        $inj =~ s/^write/writev/ if defined $ors;   # data and $\ in one writev
        my $r = strace_call('local $SIG{ALRM} = sub { my $tmp = "$T.tmp.$$"; ' . $code . ' };'
                            . (defined $ors ? ' local $\ = $O->{ors};' : '') . " $CALL{$api}",
                            attach => 1, target => $t, data => $data, opts => { ors => $ors },
                            pid => $FFTest::PID, trace => [ $inj =~ /^(\w+)/ ], inject => [$inj]);
        my $want = $data . ($ors // '');
        if ($fails) {
            ok(!$r->{ok}, "$label: the call fails") or diag $r->{log};
            like($r->{err}, qr/^(?:file_set_contents_many: )?unable to replace '\Q$t\E' - its temporary file '\Q$t.tmp.$FFTest::PID\E' was written to during the call - /,
                 "$label: ... saying why");
            is(slurp($t), "old\n", "$label: target untouched");
            is(slurp("$t.b"), "old\n", "$label: no other target written") if $api =~ /batch,? (?!one)/ || $api eq 'batch';
            # the temp was still the call's own file: removed
            is_deeply(ours_left($t), [ "p-$n.b" ], "$label: no temp left");
        } else {
            ok($r->{ok}, "$label: the call succeeds") or diag $r->{err}, $r->{log};
            is(slurp($t), $want, "$label: the target holds the bytes passed");
        }
    }
}

# ---- the writer keeps no copy of its bytes: commit checks the temp's
# size against what it wrote. Code between atomic_writer and commit (or a
# handler in commit) that writes into the temp by name with '>' or '>>'
# changes it: commit fails. Bytes changed in place at the same size are
# published (the POD says so).
for my $c (
    # label, code between print and commit, 1 when commit must fail, what the target then holds
    [ "'>' before the flush", 'open my $fh, ">", $tmp or die; print $fh "other\n"; close $fh', 1 ],
    [ "'>' after the flush", 'open my $fh, ">", $tmp or die; print $fh "x"; close $fh', 1, 1 ],
    [ "'>>' after the flush", 'open my $fh, ">>", $tmp or die; print $fh "x"; close $fh', 1, 1 ],
    [ "'+<' same size, after the flush (not seen)", 'open my $fh, "+<", $tmp or die; print $fh "M"; close $fh', 0, 1, "Mine\n" ],
    [ "'>', then more of the writer's bytes (not seen)",
      'open my $fh, ">", $tmp or die; print $fh "x"; close $fh; $w->print("more\n")', 0, 1, "x\0\0\0\0more\n" ],
) {
    my ($how, $code, $fails, $flushed, $holds) = @$c;
    my $label = "writer, $how";
    my $t = "$dir/w-" . ++$n;
    spew($t, "old\n");
    my $tmp = "$t.tmp.$$";
    my $w = atomic_writer($t, $flushed ? { buffer_size => 1 } : ());
    $w->print("mine\n");
    eval $code;
    die $@ if $@;
    my $ok = eval { $w->commit; 1 };
    if ($fails) {
        ok(!$ok, "$label: commit fails");
        like($@, qr/^unable to replace '\Q$t\E' - its temporary file '\Q$tmp\E' was written to during the call - /,
             "$label: ... saying why");
        is(slurp($t), "old\n", "$label: target untouched");
        undef $w;
        is_deeply(ours_left($t), [], "$label: no temp left");
    } else {
        ok($ok, "$label: commit succeeds") or diag $@;
        is(slurp($t), $holds, "$label: the target holds what the temp held");
    }
}
# a handler in commit, after the temp's close
{
    my $t = "$dir/w-" . ++$n;
    spew($t, "old\n");
    my $r = strace_call('local $SIG{ALRM} = sub { open my $fh, ">", "$T.tmp.$$" or die; print $fh "other\n"; close $fh };'
                        . ' my $w = atomic_writer($T); $w->print("mine\n"); $w->commit',
                        attach => 1, target => $t, pid => $FFTest::PID, trace => ['write'],
                        inject => ['write:signal=SIGALRM:when=1']);
    ok(!$r->{ok}, "writer, a handler in commit writes '>': commit fails") or diag $r->{log};
    like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was written to during the call - /, '... saying why');
    is(slurp($t), "old\n", '... target untouched');
    is_deeply(ours_left($t), [], '... no temp left');
}

# ---- the same on a real FUSE mount (the kernel gives a handle there, the
# server's node id, but it does not last: where it differs the device and
# inode decide; the read-back goes through READ requests)
SKIP: {
    my $why = FastFS::available();
    skip "fastfs: $why", 1 if $why;
    my $fs = FastFS->mount;
    my $fd = $fs->dir;
    for my $c (
        [ 'single', 'file_set_contents($T, "mine\n")' ],
        [ 'batch', 'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])' ],
        [ 'writer', 'my $w = atomic_writer($T); $w->print("mine\n"); $w->commit' ],
    ) {
        my ($api, $call) = @$c;
        for my $touch (0, 1) {
            my $label = "fuse, $api, " . ($touch ? "a handler writes '>' into the temp" : 'a handler touches nothing');
            my $t = "$fd/f-" . ++$n;
            spew($_, "old\n") for $t, "$t.b";
            my $code = $touch ? 'open my $fh, ">", "$T.tmp.$$" or die; print $fh "other\n"; close $fh' : '1';
            my $r = strace_call("local \$SIG{ALRM} = sub { $code }; $call", attach => 1, target => $t,
                                pid => $FFTest::PID, trace => ['write'], inject => ['write:signal=SIGALRM:when=1']);
            if ($touch) {
                ok(!$r->{ok}, "$label: the call fails") or diag $r->{log};
                like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was written to during the call - /,
                     "$label: ... saying why");
                is(slurp($t), "old\n", "$label: target untouched");
                is_deeply(ours_left($t), [ "f-$n.b" ], "$label: no temp left");
            } else {
                ok($r->{ok}, "$label: the call succeeds") or diag $r->{err}, $r->{log};
                is(slurp($t), "mine\n", "$label: the target holds the bytes passed");
            }
        }
    }
    # FUSE's handle is the server's node id: a kernel that forgets the
    # temp's inode (memory pressure; here a handler drops the dentry and
    # inode caches) gets another one for the same file on its next
    # lookup. The temp is still the call's: published, nothing left.
    SKIP: {
        skip 'not root: cannot drop the kernel\'s inode cache', 1 if $>;
        for my $c (
            [ 'single', 'file_set_contents($T, "mine\n")' ],
            [ 'batch', 'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])' ],
            [ 'writer', 'my $w = atomic_writer($T); $w->print("mine\n"); $w->commit' ],
        ) {
            my ($api, $call) = @$c;
            my $label = "fuse, $api, the kernel forgets the temp's inode";
            my $t = "$fd/d-" . ++$n;
            spew($_, "old\n") for $t, "$t.b";
            my $r = strace_call('local $SIG{ALRM} = sub { open my $fh, ">", "/proc/sys/vm/drop_caches" or die "$!"; print $fh "2\n"; close $fh or die "$!" }; '
                                . $call, attach => 1, target => $t, pid => $FFTest::PID, trace => ['close'],
                                paths => ['%TMP%'], inject => ['close:signal=SIGALRM:when=1']);
            ok($r->{ok}, "$label: the call succeeds") or diag $r->{err}, $r->{log};
            is(slurp($t), "mine\n", "$label: the target holds the bytes passed");
            is_deeply(ours_left($t), [ "d-$n.b" ], "$label: no temp left");
        }
    }
    $fs->unmount;
}

# ---- a filesystem without file handles (overlayfs, NFS exports
# without them): the note's name_to_handle_at fails (EOPNOTSUPP). A probe,
# not an error: $! is left as it was, through atomic_writer and commit.
{
    my $t = "$dir/e-" . ++$n;
    my $r = strace_call('$! = 0; my $w = atomic_writer($T); my $e = $! + 0; $w->print("mine\n"); $w->commit; "$e " . ($! + 0)',
                        attach => 1, target => $t, pid => $FFTest::PID, trace => ['name_to_handle_at'],
                        paths => ['%TMP%'], inject => ['name_to_handle_at:error=EOPNOTSUPP']);
    ok($r->{ok}, 'no file handles: the writer publishes') or diag $r->{err}, $r->{log};
    is($r->{ret}, '0 0', '... $! untouched by atomic_writer and commit');
    is(slurp($t), "mine\n", '... the bytes');
}

# ---- what the check costs, where a handler ran (the POD's numbers):
# the single call's in t/25; the writer's always
SKIP: {
    skip 'no file handles in this build', 1 unless $HANDLES;
    my $t = "$dir/cost-" . ++$n;
    my $r = strace_call('my $w = atomic_writer($T); $w->print("mine\n"); $w->commit',
                        attach => 1, target => $t, pid => $FFTest::PID, paths => ['%TMP%']);
    my @seq = map { $_->{name} } grep { $_->{name} ne 'signal' } @{ $r->{calls} };
    is("@seq", 'openat fstat name_to_handle_at write lseek close name_to_handle_at newfstatat rename',
       "writer: fstat and name_to_handle_at in new; lseek, name_to_handle_at, fstatat in commit") or diag $r->{log};
}

# ---- file_copy checks the identity only: a handler's write into its
# temp is published (the POD says so)
{
    my $t = "$dir/c-" . ++$n;
    spew("$t.src", "mine\n");
    spew($t, "old\n");
    # at the first close, the source's after its bytes are in the temp
    my $r = strace_call('local $SIG{ALRM} = sub { open my $fh, "+<", "$T.tmp.$$" or die; print $fh "M"; close $fh };'
                        . ' file_copy("$T.src", $T)',
                        attach => 1, target => $t, pid => $FFTest::PID, trace => ['close'],
                        inject => ["close:signal=SIGALRM:when=1"]);
    ok($r->{ok}, "file_copy, a handler writes into the temp: the copy succeeds") or diag $r->{err}, $r->{log};
    is(slurp($t), "Mine\n", '... and publishes what the temp holds') or diag $r->{log};
}

# ---- a temp its owner may not read (perm 0200): root reads it back; any
# other user checks its identity and its size (the POD says so)
for my $c (
    # label, the handler's bytes, 1 when a normal user's call fails
    [ 'other size', "other\n", 1 ],
    [ 'same size', "MINE\n", 0 ],
) {
    my ($how, $bytes, $user_fails) = @$c;
    my $t = "$dir/m-" . ++$n;
    my $r = strace_call('local $SIG{ALRM} = sub { open my $fh, ">", "$T.tmp.$$" or die "open: $!"; print $fh $D; close $fh };'
                        . ' file_set_contents($T, "mine\n", 0200)',
                        attach => 1, target => $t, data => $bytes, pid => $FFTest::PID, trace => ['write'],
                        inject => ['write:signal=SIGALRM:when=1']);
    if ($> == 0 || $user_fails) {
        ok(!$r->{ok}, "perm 0200, '>' of the $how: the handler's write is found") or diag $r->{log};
        like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was written to during the call - /, '... saying why');
        ok(!-e $t, '... nothing published');
        is_deeply(ours_left($t), [], '... no temp left');
    } else {
        ok($r->{ok}, "perm 0200, not root, '>' of the $how: the temp cannot be read back, its size is right")
            or diag $r->{err};
        chmod 0600, $t;
        is(slurp($t), $bytes, '... publishing what the temp holds');
    }
    unlink $t;
}

# ---- a check that cannot be made is never a pass, nor a verdict: the
# call fails with what stopped it ($!), naming the temp; the target is
# untouched and the temp removed. A handler that takes the owner's read
# bit away from a temp the call made readable (perm 0644) does not make
# the read back be skipped: root reads it anyway, another user cannot
# check it.
my $CHECK_FAILED = sub {
    my ($t) = @_;
    return qr/^(?:file_set_contents_many: )?unable to replace '\Q$t\E' - unable to check its temporary file '\Q$t.tmp.$FFTest::PID\E' - /;
};
for my $c (
    # label, handler, call, inject, traced, $! (undef: the handler's bytes found as written)
    [ "'+<' same size, then chmod 0200", 'open my $fh, "+<", $tmp or die; print $fh "MINE\n"; close $fh; chmod 0200, $tmp or die',
      'file_set_contents($T, "mine\n")', [ 'close:signal=SIGALRM:when=1' ], ['close'], $> ? 'EACCES' : undef ],
    [ "batch, '+<' same size, then chmod 0200", 'open my $fh, "+<", $tmp or die; print $fh "MINE\n"; close $fh; chmod 0200, $tmp or die',
      'file_set_contents_many([ $T => "mine\n" ])', [ 'close:signal=SIGALRM:when=1' ], ['close'], $> ? 'EACCES' : undef ],
    [ 'the read back fails (EIO)', '1', 'file_set_contents($T, "mine\n")',
      [ 'close:signal=SIGALRM:when=1', 'read:error=EIO:when=1' ], [ 'close', 'read' ], 'EIO' ],
    [ 'batch, the read back fails (EIO)', '1', 'file_set_contents_many([ $T => "mine\n" ])',
      [ 'close:signal=SIGALRM:when=1', 'read:error=EIO:when=1' ], [ 'close', 'read' ], 'EIO' ],
    [ 'the read back cannot open (ENOMEM)', '1', 'file_set_contents($T, "mine\n")',
      [ 'close:signal=SIGALRM:when=1', 'openat:error=ENOMEM:when=2' ], [ 'close', 'openat' ], 'ENOMEM' ],
    # a real fault: the handler keeps every descriptor it can get
    [ 'the handler used up the descriptors (EMFILE)', 'our @held; while (open my $fh, "<", "/dev/null") { push @held, $fh }',
      'file_set_contents($T, "mine\n")', [ 'close:signal=SIGALRM:when=1' ], ['close'], 'EMFILE' ],
    [ 'batch, the handler used up the descriptors (EMFILE)', 'our @held; while (open my $fh, "<", "/dev/null") { push @held, $fh }',
      'file_set_contents_many([ $T => "mine\n", "$T.b" => "b\n" ])', [ 'close:signal=SIGALRM:when=2' ], ['close'], 'EMFILE' ],
    [ 'the look at its name fails (EIO)', '1', 'file_set_contents($T, "mine\n")',
      [ 'close:signal=SIGALRM:when=1', ($HANDLES ? 'name_to_handle_at' : 'newfstatat') . ':error=EIO:when=2' ],
      [ 'close', $HANDLES ? 'name_to_handle_at' : 'newfstatat' ], 'EIO' ],
    [ "writer, its fd's offset unknown (lseek)", '1', 'my $w = atomic_writer($T); $w->print("mine\n"); $w->commit',
      [ 'lseek:error=EIO:when=1' ], ['lseek'], 'EIO' ],
    # an interrupted lseek is retried, not taken as "no size to check"
    [ "writer, lseek interrupted, the handler appends", 'open my $fh, ">>", $tmp or die; print $fh "X"; close $fh',
      'my $w = atomic_writer($T); $w->print("mine\n"); $w->commit', [ 'lseek:error=EINTR:signal=SIGALRM:when=1' ], ['lseek'], undef ],
) {
    my ($how, $code, $call, $inject, $trace, $errno) = @$c;
    my $t = "$dir/k-" . ++$n;
    spew($_, "old\n") for $t, "$t.b";
    # (the descriptors a handler held are given back after the call: the
    # traced child needs some to report)
    my $r = strace_call('our $k = 0; local $SIG{ALRM} = sub { return if $k++; my $tmp = "$T.tmp.$$"; ' . $code . ' };'
                        . " my \$ok = eval { $call; 1 }; my \$e = \$! + 0; our \@held = (); \$! = \$e; die \$@ unless \$ok",
                        attach => 1, target => $t, pid => $FFTest::PID, trace => $trace,
                        paths => [ '%TMP%', "$t.b.tmp.$FFTest::PID" ], inject => $inject);
    ok(!$r->{ok}, "$how: the call fails") or diag $r->{log};
    if (defined $errno) {
        like($r->{err}, $CHECK_FAILED->($t), "$how: ... unable to check the temp");
        is($r->{errno}, Errno->can($errno)->(), "$how: ... \$! is $errno");
    } else {
        like($r->{err}, qr/its temporary file '\Q$t.tmp.$FFTest::PID\E' was written to during the call - /,
             "$how: ... found as written to");
    }
    is(slurp($t), "old\n", "$how: target untouched");
    is(slurp("$t.b"), "old\n", "$how: no other target written");
    is_deeply(ours_left($t), [ "k-$n.b" ], "$how: no temp left");
}

done_testing();
