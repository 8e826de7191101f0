#!perl
# A temp that user code replaced is never published, whatever inode number
# the new file gets. ext4 and xfs give a freed inode number to the next
# file made: a signal handler that removes the temp (closed by then, in
# the commit or between a batch's files) and creates a file of that name
# gets the temp's number, and a check of device and inode alone passes.
# Run on a loop-mounted ext4 image where we may mount (root), else in the
# test directory if its filesystem reuses numbers; skipped where neither.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(slurp spew tempdir strace_why strace_call which);

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
plan skip_all => "no directory here gives a removed file's inode number to the next one ($mount_why; "
                 . "the test directory's filesystem does not)" unless reuses_numbers($dir);
diag('no file handles in this build (portable, or no name_to_handle_at): the identity is the inode number')
    unless FastFile::_build_info()->{file_handle};

my $n = 0;

# The handler: the temp (its name's file) removed, a file of that name
# made, with the temp's number (said on stdout).
my $REPLACE = 'local $SIG{ALRM} = sub { my $tmp = "$T.tmp.$$"; my $ino = (lstat $tmp)[1] // -1;'
              . ' unlink $tmp or die "unlink: $!"; open my $fh, ">", $tmp or die "open: $!";'
              . ' print $fh "other\n"; close $fh or die;'
              . ' print "number reused\n" if (lstat $tmp)[1] == $ino };';

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
    my $t = "$dir/t-" . ++$n;
    my $noclobber = $label =~ /noclobber/;
    spew($t, "old\n") unless $noclobber;
    my $r = strace_call($REPLACE . $call, attach => 1, target => $t, pid => $FFTest::PID, trace => ['write'],
                        inject => ["write:signal=SIGALRM:when=$when"]);
    my $tmp = "$t.tmp.$FFTest::PID";
    like($r->{stdout}, qr/number reused/, "$label: the handler's file got the temp's inode number")
        or diag $r->{log};
    ok(!$r->{ok}, "$label: the call fails") or diag $r->{log};
    like($r->{err}, qr/^unable to replace '\Q$t\E' - its temporary file '\Q$tmp\E' was replaced or removed during the call - /,
         "$label: ... saying why");
    is(slurp($t), $noclobber ? undef : "old\n", "$label: target untouched");
    is(slurp($tmp), "other\n", "$label: the handler's file left alone");
    ok(!-e "$t.b", "$label: no other target written") if $label =~ /many/ && $label !~ /one pair/;
    opendir my $dh, $dir or die;
    is_deeply([ sort grep { /^t-\Q$n\E\./ } readdir $dh ], [ "t-$n.tmp.$FFTest::PID" ],
              "$label: nothing else left");
    unlink $tmp;
}

done_testing();
