#!perl
# Security: what another user (or an attacker) can plant in the directory.
#
# - A symlink at the temp name "$target.tmp.$$" is never followed (O_EXCL)
#   nor removed; the write still succeeds under a random-suffixed name and
#   the symlink's target is untouched -- also when the write then fails.
# - In a sticky world-writable directory (01777) the files of another user
#   (uid 65534, made by a forked child after setuid) are never touched, even
#   one sitting at our temp name; a non-root writer cannot replace them.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(temps_in slurp spew errno_text run_perl in_child);
use Errno ();
use File::Temp ();
use POSIX ();

use FastFile qw(:all);
use FastFile::Writer;

my $ROOT = File::Temp::tempdir('ff95-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $ROOT or die "chmod $ROOT: $!";    # other users must get through it
umask 022;

sub inode { my @s = lstat $_[0]; return @s ? "$s[0]:$s[1]" : 'none' }
# a file's bytes, a symlink's target: with fs.protected_symlinks=1 (Debian's
# default) even root may not follow another user's link in a sticky directory
sub content_of { return -l $_[0] ? 'symlink to ' . readlink $_[0] : slurp($_[0]) }

# ------------------------------------------- a symlink at the temp name

{
    my $d = "$ROOT/symlink";
    mkdir $d or die;
    spew("$d/victim", "victim's data\n");
    spew("$d/target", "old\n");
    symlink "$d/victim", "$d/target.tmp.$$" or die "symlink: $!";
    ok file_set_contents("$d/target", "new\n"), 'symlink at the temp name: the write succeeds';
    is slurp("$d/target"), "new\n", 'the target has the new content';
    ok !-l "$d/target", 'the target is a regular file';
    is slurp("$d/victim"), "victim's data\n", 'the file the symlink points to is untouched';
    ok -l "$d/target.tmp.$$", 'the symlink is not removed';
    is readlink("$d/target.tmp.$$"), "$d/victim", 'and still points where it did';
    is_deeply [ grep { $_ ne "target.tmp.$$" } temps_in($d) ], [], 'no other temp left';

    # dangling: following it would create the file it names
    unlink "$d/target.tmp.$$";
    symlink "$d/created-through-link", "$d/target.tmp.$$" or die;
    ok file_set_contents("$d/target", "newer\n", 0600), 'dangling symlink at the temp name: succeeds';
    ok !-e "$d/created-through-link", 'nothing created through the dangling symlink';
    ok -l "$d/target.tmp.$$", 'the dangling symlink is still there';
    is slurp("$d/target"), "newer\n", 'target replaced';
    is sprintf('%04o', (stat "$d/target")[2] & 07777), '0600', 'with the requested mode';

    # a directory and a fifo at the temp name: not ours either
    unlink "$d/target.tmp.$$";
    mkdir "$d/target.tmp.$$" or die;
    ok file_set_contents("$d/target", "dir\n"), 'directory at the temp name: succeeds';
    ok -d "$d/target.tmp.$$", 'the directory is still there';
    rmdir "$d/target.tmp.$$";
    POSIX::mkfifo("$d/target.tmp.$$", 0600) or die "mkfifo: $!";
    ok file_set_contents("$d/target", "fifo\n"), 'fifo at the temp name: succeeds (not opened, not blocked)';
    ok -p "$d/target.tmp.$$", 'the fifo is still there';
    unlink "$d/target.tmp.$$";

    symlink "$d/victim", "$d/target.tmp.$$" or die;
    my $w = FastFile::Writer->new("$d/target");
    $w->print("from the writer\n");
    ok $w->commit, 'FastFile::Writer with a symlink at the temp name: commits';
    is slurp("$d/target"), "from the writer\n", 'FastFile::Writer: target replaced';
    is slurp("$d/victim"), "victim's data\n", 'FastFile::Writer: symlink target untouched';
    ok -l "$d/target.tmp.$$", 'FastFile::Writer: the symlink is not removed';
    unlink "$d/target.tmp.$$";
    is_deeply [ temps_in($d) ], [], 'no temp file left';

    # when the write then fails (RLIMIT_FSIZE: EFBIG), the cleanup must remove
    # our random-named temp, not the planted symlink
    SKIP: {
        skip 'no /bin/sh', 4 unless -x '/bin/sh';
        my $code = q{
            $SIG{XFSZ} = 'IGNORE';
            require FastFile;
            my $d = $ARGV[0];
            symlink "$d/victim", "$d/target.tmp.$$" or die "symlink: $!";
            my $ok = eval { FastFile::file_set_contents("$d/target", 'x' x 300_000); 1 };
            print join "|", $ok ? 1 : 0, $! + 0, $$, $@;
        };
        my (undef, $res) = run_perl($code, args => [$d], ulimit_f => 64);
        my ($ok, $errno, $cpid, $err) = split /\|/, $res, 4;
        is $errno, Errno::EFBIG(), 'failed write with a symlink at the temp name: EFBIG'
            or diag $res;
        like $err // '', qr/^unable to write '\Q$d\E\/target\.tmp\.\Q$cpid\E\.[0-9a-f]+' - /,
            'the croak names the random-suffixed temp';
        ok -l "$d/target.tmp.$cpid", 'the symlink survived the cleanup';
        is slurp("$d/victim"), "victim's data\n", 'its target is untouched';
        unlink "$d/target.tmp.$cpid";
    }
    is slurp("$d/target"), "from the writer\n", 'the target kept its content';
    is_deeply [ temps_in($d) ], [], 'no temp file left';
}

# --------------------------------------- a sticky world-writable directory

SKIP: {
    skip 'needs root to create files as another user', 1 if $> != 0;
    my $d = "$ROOT/sticky";
    mkdir $d or die;
    chmod 01777, $d or die;
    my ($uid, $gid) = (65534, 65534);
    my ($writer_uid, $writer_gid) = (65533, 65533);

    # the other user's files, one at each name we will use
    my $parent = $$;    # our temp names are "<name>.tmp.$parent"
    my $res = in_child(sub {
        spew("$d/theirs", "their file\n", 0644);
        spew("$d/ours.tmp.$parent", "their file at our temp name\n", 0644);
        spew("$d/victim", "their victim\n", 0644);
        symlink "$d/victim", "$d/ours2.tmp.$parent" or die "symlink: $!";
        return 'made';
    }, $uid, $gid);
    is $res, 'ok made', 'uid 65534 made its files in the sticky directory' or diag $res;
    my %before = map { $_ => [ inode("$d/$_"), content_of("$d/$_"), (lstat "$d/$_")[4, 2] ] }
        qw(theirs victim), "ours.tmp.$$", "ours2.tmp.$$";

    ok file_set_contents("$d/ours", "ours\n"), 'root writes its own file next to them';
    ok file_set_contents("$d/ours2", "ours2\n"), 'and another, with their symlink at its temp name';
    is slurp("$d/ours"), "ours\n", 'our content';
    is((stat "$d/ours")[4], 0, 'owned by us');
    my $w = FastFile::Writer->new("$d/ours");
    $w->print("ours again\n");
    ok $w->commit, 'FastFile::Writer next to them';
    for my $f (sort keys %before) {
        my @now = (inode("$d/$f"), content_of("$d/$f"), (lstat "$d/$f")[4, 2]);
        is_deeply \@now, $before{$f}, "their '$f' is untouched (inode, content, owner, mode)";
    }

    # a non-root writer: may not replace their file (sticky bit), and must
    # clean up after the refused rename
    my $out = in_child(sub {
        my $ok = eval { file_set_contents("$d/theirs", "stolen\n"); 1 };
        my @r = ($ok ? 1 : 0, $! + 0, $@);
        my $ok2 = eval { file_set_contents("$d/mine", "mine\n"); 1 } ? 1 : 0;
        return join '|', @r, $ok2, $$;
    }, $writer_uid, $writer_gid);
    my ($ok, $errno, $err, $ok2, $wpid) = $out =~ /\Aok (.*)\z/s ? split(/\|/, $1, 5) : ();
    is $ok, 0, 'uid 65533 cannot replace their file' or diag $out;
    is $errno, Errno::EPERM(), 'EPERM';
    is $err, "close (rename) atomic file '$d/theirs' failed: " . errno_text(Errno::EPERM()) . "\n",
        'croak text';
    is $ok2, 1, 'uid 65533 can write its own file there';
    is((stat "$d/mine")[4], $writer_uid, 'owned by uid 65533');
    for my $f (sort keys %before) {
        my @now = (inode("$d/$f"), content_of("$d/$f"), (lstat "$d/$f")[4, 2]);
        is_deeply \@now, $before{$f}, "their '$f' is still untouched";
    }
    my @left = grep { !$before{$_} } temps_in($d);
    is_deeply \@left, [], 'no temp file of ours left';
}

done_testing;
