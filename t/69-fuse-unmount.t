#!perl
# t/lib/FastFS.pm where unmounting fails (issue 28). In a build root without
# /etc/mtab (debootstrap, sbuild, pbuilder) FUSE 2's fusermount mounts but
# cannot unmount ("failed to open /etc/mtab"): every FUSE test then left its
# mounts behind, dead, and only root could remove them. The harness's probe
# mounts and unmounts, and skips with fusermount's message when that fails;
# a teardown that cannot unmount says so, loudly; nothing stays mounted that
# the harness could have removed.
#
# A fake fusermount (first in PATH) mounts with the real one and fails every
# unmount as that fusermount does; then the real one in a namespace whose
# /etc has no mtab. Run as root, the normal user is nobody in a private
# mount namespace with its own /dev/fuse node (mode 0666, as on a Debian
# host), so nothing it leaves outlives the test; root's own mounter,
# umount(8), is faked too. Where a mount made anyway would stay for good
# (no /etc/mtab: auto_unmount cannot unmount either) that case skips and
# says why; a normal user there checks that the probe mounts nothing
# (xt/tools/fuse-asuser.sh runs this file so, as CI does).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use FFTest qw(tempdir which run_perl in_child);
use FastFS;

my $MTAB = 'fusermount: failed to open /etc/mtab: No such file or directory';

# What a test file does: the probe, then (as a test that mounts anyway
# would) one mount and its unmount, each outcome on a line.
my $CHILD = <<'PERL';
use FastFS;
print "probe: ", FastFS::available(), "\n";
my $fs = eval { FastFS->mount } or die "mount: $@";
print "unmount: ", ($fs->unmount ? 'ok' : $fs->unmount_error), "\n";
PERL

my $build = FastFS::build();    # as root here: nobody cannot write t/fusefs
plan skip_all => "fastfs: $build" if $build;
plan skip_all => 'no /dev/fuse' unless -e '/dev/fuse';

# The children's FastFS and daemon, copied where nobody can read them: the
# tree may be in a private directory (make tarball-check unpacks into one).
my $LIB = do {
    my $copy = tempdir();
    for my $d ('', '/t', '/t/lib', '/t/fusefs') {
        -d "$copy$d" or mkdir "$copy$d" or die "mkdir $copy$d: $!";
        chmod 0755, "$copy$d" or die "chmod $copy$d: $!";
    }
    # -p: the daemon stays newer than its source, so FastFS builds nothing
    system('cp', '-p', "t/lib/$_", "$copy/t/lib/") == 0 or die "cp t/lib/$_ failed\n"
        for qw(FastFS.pm FFTest.pm);
    system('cp', '-p', FastFS::binary(), "t/fusefs/fastfs.c", "$copy/t/fusefs/") == 0
        or die "cp t/fusefs failed\n";
    "$copy/t/lib";
};

# A directory with a fake command $name for every name in @names; $body is
# its shell text.
sub fake_bin {
    my ($body, @names) = @_;
    my $bin = tempdir();
    chmod 0755, $bin or die "chmod $bin: $!";
    for my $name (@names) {
        open my $fh, '>', "$bin/$name" or die "$bin/$name: $!";
        print $fh "#!/bin/sh\n$body";
        close $fh or die "$bin/$name: $!";
        chmod 0755, "$bin/$name" or die "chmod: $!";
    }
    return $bin;
}

# ---------------------------------------------------------- root: umount fails
SKIP: {
    skip 'root mounts with umount(8): only as root', 5 if $> != 0;
    my $bin = fake_bin(qq{echo "umount: \$2: fake failure" >&2\nexit 32\n}, 'umount');
    my $tmp = tempdir();
    my ($st, $out) = run_perl($CHILD, switches => ["-I$LIB"],
                              env => { PATH => "$bin:$ENV{PATH}", TMPDIR => $tmp });
    is $st, 0, 'root, umount fails: the child ran' or diag $out;
    like $out, qr{^probe: cannot unmount: umount: \Q$tmp\E/fastfs-\w+: fake failure$}m,
        'root, umount fails: the probe skips with umount\'s message';
    like $out, qr{^unmount: umount: }m, '... and a teardown returns it';
    my @left = FastFS::mounts_under($tmp);
    is_deeply \@left, [], '... nothing stays mounted (the daemon unmounts as it exits)';
    system 'umount', '-l', $_ for @left;
    opendir my $dh, $tmp or die "$tmp: $!";
    is_deeply [ grep { !/^\.\.?\z/ } readdir $dh ], [], '... nothing left in its TMPDIR';
}

# ------------------------------------------------- a normal user: fusermount fails
# $strip: the fake also drops auto_unmount from the mount, so that nothing
# unmounts once the daemon is gone: a build root's fusermount, whose
# watchdog fails as its unmount does. $strip 'no mtab': no fake, the real
# fusermount in a namespace whose /etc has no mtab (a copy of /etc bound
# over it). Returns the child's output and the mounts it left (listed
# before its namespace, if any, goes away).
my $REAL = which('fusermount3') // which('fusermount');
sub as_user {
    my ($strip) = @_;
    my $no_mtab = ($strip // '') eq 'no mtab';
    my $bin = $no_mtab ? tempdir() : fake_bin(<<"SH", qw(fusermount fusermount3));
for a do
    shift
    case \$a in -u) echo '$MTAB' >&2; exit 1 ;; esac
    ${\ ($strip ? q{a=$(printf '%s\n' "$a" | sed 's/,auto_unmount//; s/auto_unmount,//')} : ':') }
    set -- "\$@" "\$a"
done
exec '$REAL' "\$@"
SH
    my $tmp = tempdir();
    if ($no_mtab) {    # the copy of /etc beside it, root's (outside nobody's TMPDIR)
        chmod 0755, $tmp or die "chmod $tmp: $!";
        mkdir "$tmp/tmp" or die "$tmp/tmp: $!";
        $tmp = "$tmp/tmp";
    }
    # no PERL5LIB: make test's blib may be in a directory nobody cannot read
    my @child = ('env', '-u', 'PERL5LIB', '-u', 'PERLLIB', '-u', 'PERL5OPT',
                 "PATH=$bin:$ENV{PATH}", "TMPDIR=$tmp", $^X, "-I$LIB", '-e', $CHILD);
    if ($> != 0) {
        my ($st, $out) = run_perl($CHILD, switches => ["-I$LIB"],
                                  env => { PATH => "$bin:$ENV{PATH}", TMPDIR => $tmp });
        return ($tmp, $out, FastFS::mounts_under($tmp));
    }
    my $uid = getpwnam('nobody');
    my $dev = tempdir();
    chown $uid, -1, $tmp or die "chown $tmp: $!";
    my $rdev = (stat '/dev/fuse')[6];
    my ($maj, $min) = (($rdev >> 8) & 0xfff, ($rdev & 0xff) | (($rdev >> 12) & 0xfff00));
    my $script = <<'SH';
dev=$1 tmp=$2 maj=$3 min=$4 uid=$5 no_mtab=$6; shift 6
mount -t tmpfs -o mode=0755,size=64k fastfs-dev "$dev" &&
mknod -m 0666 "$dev/fuse" c "$maj" "$min" &&
mount --bind "$dev/fuse" /dev/fuse || exit 99
if [ "$no_mtab" = 1 ]; then
    mkdir "$tmp/../etc" && cp -a /etc/. "$tmp/../etc/" && rm -f "$tmp/../etc/mtab" &&
    mount --bind "$tmp/../etc" /etc || exit 98
fi
setpriv --reuid="$uid" --regid="$(id -g "$uid")" --clear-groups "$@" 2>&1
echo "exit: $?"
awk -v p="$tmp/" 'index($2, p) == 1 { print "left: " $2 }' /proc/self/mounts
SH
    my ($st, $out) = run_perl('exec @ARGV or die "exec: $!"', args => [
        'unshare', '-m', '--propagation', 'private', 'sh', '-c', $script, 'sh',
        $dev, $tmp, $maj, $min, $uid, ($no_mtab ? 1 : 0), @child ]);
    return ($tmp, $out, $out =~ /^left: (.*)$/mg);
}

# Why nobody cannot run this perl ('' if it can): a perl under a directory
# only root may enter (perlbrew or plenv in /root, one unpacked under
# mktemp -d) cannot be executed by the child as_user starts.
sub perl_as_nobody_why {
    my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
    my $out = in_child(sub {
        no warnings 'exec';    # the failure is the answer
        my $st = system { $^X } $^X, '-e', '0';
        return $st == 0 ? '' : $st == -1 ? "$!" : 'exit status ' . ($? >> 8);
    }, $uid, $gid);
    return $out =~ /\Aok (.*)\z/s ? $1 : $out;
}

my $exec_why;
my $user_why =
      !$REAL                                  ? "neither fusermount3 nor fusermount is installed ($FastFS::INSTALL_FUSERMOUNT)"
    : $> != 0 && (!-r '/dev/fuse' || !-w _)   ? 'no access to /dev/fuse'
    : $> != 0                                 ? ''
    : !defined getpwnam('nobody')             ? 'running as root and there is no user "nobody" to become'
    : !which('unshare') || !which('setpriv')  ? 'unshare or setpriv missing (apt-get install util-linux)'
    : system('unshare -m true 2>/dev/null')   ? 'unshare -m is not allowed here (a container without CAP_SYS_ADMIN)'
    : ($exec_why = perl_as_nobody_why())   ? "nobody cannot execute $^X: $exec_why"
    :                                           '';

# The case below needs fusermount's auto_unmount watchdog to remove the
# mount once the daemon is gone. It unmounts as `fusermount -u` does, so
# without /etc/mtab (debootstrap, sbuild and pbuilder roots have none) it
# cannot either, with fusermount3 as with FUSE 2's fusermount; and
# fusermount3's watchdog (fuse3 3.14) left the mount of a daemon killed
# with SIGKILL in place even with /etc/mtab. A mount made anyway would stay,
# dead, and only root could remove it: skip, and say why.
my $auto_unmount_why =
      !-e '/etc/mtab' ? "no /etc/mtab: fusermount's auto_unmount cannot unmount (as root: ln -s ../proc/self/mounts /etc/mtab)"
    : ($REAL // '') =~ /fusermount3\z/ || -x '/usr/bin/fusermount3'
                      ? "fusermount3's auto_unmount leaves a dead daemon's mount: it would stay, and only root could remove it"
    :                   '';

SKIP: {
    skip "a normal user's FUSE: $user_why", 4 if $user_why;
    skip $auto_unmount_why, 4 if $auto_unmount_why;
    my ($tmp, $out, @left) = as_user(0);
    like $out, qr{^probe: cannot unmount: \Q$MTAB\E$}m,
        'user, fusermount cannot unmount: the probe skips with its message' or diag $out;
    like $out, qr{^unmount: \Q$MTAB\E$}m, '... and a teardown returns it';
    is_deeply \@left, [], '... nothing stays mounted (auto_unmount unmounts as the daemon exits)';
    unlike $out, qr/could not unmount/, '... and no mount reported as left';
}

SKIP: {
    skip "a normal user's FUSE: $user_why", 3 if $user_why;
    skip 'a dead mount only in a private mount namespace (as root)', 3 if $> != 0;
    skip 'libfuse3 mounts with /usr/bin/fusermount3, not the fake', 3 if -x '/usr/bin/fusermount3';
    my ($tmp, $out, @left) = as_user(1);
    is scalar(@left), 2, 'user, nothing unmounts: the probe\'s mount and the one mounted anyway stay'
        or diag $out;
    my @said = $out =~ m{^# FastFS: could not unmount (\S+) \(\Q$MTAB\E\): it stays mounted}mg;
    is_deeply [ sort @said ], [ sort @left ], '... each one reported loudly, with fusermount\'s message';
    like $out, qr{^probe: cannot unmount: \Q$MTAB\E$}m, '... and the probe skips';
}

# The real thing: fusermount (FUSE 2's or fusermount3) where /etc/mtab is
# missing. The probe sees it without mounting (fusermount asked to unmount
# an empty directory), so not even its own mount stays.
SKIP: {
    skip "a normal user's FUSE: $user_why", 3 if $user_why;
    skip 'no /etc/mtab only in a private mount namespace (as root)', 3 if $> != 0;
    my ($tmp, $out, @left) = as_user('no mtab');
    like $out, qr{^probe: cannot unmount: \S*fusermount3?: failed to open /etc/mtab: No such file or directory$}m,
        'user, no /etc/mtab: the probe skips with fusermount\'s message' or diag $out;
    like $out, qr{^unmount: \S*fusermount3?: failed to open /etc/mtab}m, '... a mount made anyway cannot be unmounted';
    is scalar(@left), 1, '... and only that one stays: the probe mounted nothing' or diag $out;
}

# The same as a normal user in such a root (no namespace to drop the mount
# with): the probe alone, as every FUSE test file runs it; it skips with
# fusermount's message and mounts nothing, so nothing is left that the user
# cannot remove.
SKIP: {
    skip 'as root: the case above', 2 if $> == 0;
    skip "a normal user's FUSE: $user_why", 2 if $user_why;
    skip '/etc/mtab is there', 2 if -e '/etc/mtab';
    my $tmp = tempdir();
    my ($st, $out) = run_perl('use FastFS; print "probe: ", FastFS::available(), "\n";',
                              switches => ["-I$LIB"], env => { TMPDIR => $tmp });
    like $out, qr{^probe: cannot unmount: \S*fusermount3?: failed to open /etc/mtab: No such file or directory$}m,
        'user, no /etc/mtab: the probe skips with fusermount\'s message' or diag $out;
    is_deeply [ FastFS::mounts_under($tmp) ], [], '... and mounts nothing';
}

done_testing;
