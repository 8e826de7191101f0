#!perl
# if_changed on t/fusefs, counted by the filesystem: an unchanged file gets
# no modifying request of any kind (fastfs's modify_requests: create, write,
# setattr, rename, unlink, link, mknod, mkdir, ..., each a stored sqlite
# transaction on pmxcfs) and at most one READ of its bytes; a changed file
# of the same size is read once, then written; a file whose size differs is
# written without reading its old bytes, with the requests of a plain call.
# On both mounts: without caches, and with pmxcfs' 1 s caching (-o cache).
# First, on a local directory, what a skipped write leaves as it was (the
# README's Proxmox VE section lists it): inode, mode (even when another
# perm is asked for), owner, hard links, mtime, ctime, and no inotify event
# but open, access and close-nowrite.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes ();
use lib 't/lib';
use FFTest qw(slurp temps_in tempdir);
use Reference qw(ref_file_set_contents);
use FastFS;
use FastFile qw(file_set_contents);

local $SIG{ALRM} = sub { die "t/75-fuse-if-changed.t: watchdog: took more than 60 s\n" };
alarm 60;

my @MODIFYING = qw(modify_requests create_requests write_requests truncate_requests
                   rename_requests unlink_requests);

# The counters of what $code sent to $fs, and what it returned.
sub counted {
    my ($fs, $code) = @_;
    $fs->reset;
    my $r = $code->();
    return ($r, $fs->counters);
}

# inode, mtime and ctime (nanoseconds where the filesystem has them)
sub stamp {
    my ($path) = @_;
    my @st = Time::HiRes::lstat($path) or return "missing: $!";
    return "ino $st[1] mtime $st[9] ctime $st[10]";
}

# Deterministic bytes with a line structure, like a config.
sub config_of {
    my ($size, $seed) = @_;
    my $s = '';
    $s .= sprintf "key%06d: value %d\n", length $s, $seed while length $s < $size;
    return substr($s, 0, $size - 1) . "\n";
}

# inotify(7) through syscall(2), without a module: inotify_watch gives a
# handle watching the paths (or the reason why not), inotify_events the
# names of the events read from it so far.
my %IN = (ACCESS => 0x1, MODIFY => 0x2, ATTRIB => 0x4, CLOSE_WRITE => 0x8,
          CLOSE_NOWRITE => 0x10, OPEN => 0x20, MOVED_FROM => 0x40, MOVED_TO => 0x80,
          CREATE => 0x100, DELETE => 0x200, DELETE_SELF => 0x400, MOVE_SELF => 0x800);
sub inotify_watch {
    my @paths = @_;
    eval { require 'syscall.ph'; 1 } or return 'no syscall.ph (h2ph) for this perl';
    my $fd = syscall(&SYS_inotify_init1, 04000 | 02000000);    # IN_NONBLOCK | IN_CLOEXEC
    return "inotify_init1: $!" if $fd < 0;
    open my $fh, '<&=', $fd or return "fdopen inotify: $!";
    for my $p (@paths) {
        syscall(&SYS_inotify_add_watch, $fd, $p, 0xfff) >= 0 or return "inotify_add_watch $p: $!";
    }
    return $fh;
}
sub inotify_events {
    my ($fh) = @_;
    my ($buf, %seen) = ('');
    while (sysread $fh, $buf, 65536, length $buf) { }
    while (length $buf >= 16) {
        my (undef, $mask, undef, $len) = unpack 'lLLL', $buf;
        $mask & $IN{$_} and $seen{$_} = 1 for keys %IN;
        substr $buf, 0, 16 + $len, '';
    }
    return join ' ', sort keys %seen;
}

# --- a local directory: what a skipped write leaves as it was ---
{
    my $d = tempdir();
    my $f = "$d/vm.conf";
    my $data = config_of(1024, 7);
    file_set_contents($f, $data, 0640);
    link $f, "$d/hardlink" or die "link: $!\n";
    chown 65534, 65534, $f or die "chown: $!\n" if $> == 0;    # another user's (not a sticky dir)
    my @before = Time::HiRes::lstat($f);
    my $watch = inotify_watch($d, $f);
    my $r = file_set_contents($f, $data, { if_changed => 1, perm => 0600 });
    my @after = Time::HiRes::lstat($f);
    is $r, 0, 'local: same bytes, another perm: if_changed returns 0';
    is_deeply [ @after[1, 2, 3, 4, 5, 9, 10] ], [ @before[1, 2, 3, 4, 5, 9, 10] ],
        'local: inode, mode (0640, not the 0600 asked), links, owner, group, mtime, ctime as they were';
    is +(lstat "$d/hardlink")[1], $after[1], 'local: the hard link still names the file';
    SKIP: {
        skip "inotify: $watch", 2 unless ref $watch;
        is inotify_events($watch), 'ACCESS CLOSE_NOWRITE OPEN',
            'local: inotify (directory and file watched): only open, access, close-nowrite';
        file_set_contents($f, $data);
        like inotify_events($watch), qr/\bCLOSE_WRITE\b.*\bMOVED_TO\b/,
            'local: a plain rewrite: close-write, moved-to (the watch sees writes)';
    }
}

my $why = FastFS::available();
if ($why) {
    SKIP: { skip "fastfs: $why", 1 }
    done_testing;
    exit;
}

# --- the fixture: modify_requests counts every modifying request, one each ---
{
    my $fs = FastFS->mount;
    my $d = $fs->dir;
    file_set_contents("$d/f", "data\n");
    my @kinds = (
        [ 'chmod (SETATTR mode)',      sub { chmod 0600, "$d/f" } ],
        [ 'chown (SETATTR uid, gid)',  sub { chown $>, (split ' ', $))[0], "$d/f" } ],
        [ 'utime (SETATTR times)',     sub { utime undef, undef, "$d/f" } ],
        [ 'truncate (SETATTR size)',   sub { truncate "$d/f", 1 } ],
        [ 'mkdir',                     sub { mkdir "$d/dir" } ],
        [ 'rmdir',                     sub { rmdir "$d/dir" } ],
        [ 'symlink',                   sub { symlink 'f', "$d/sym" } ],
        [ 'link',                      sub { link "$d/f", "$d/hard" } ],
        [ 'rename',                    sub { rename "$d/hard", "$d/hard2" } ],
        [ 'unlink',                    sub { unlink "$d/hard2" } ],
        [ 'mknod of a FIFO (fastfs answers ENOSYS)', sub { POSIX::mkfifo("$d/fifo", 0600); 1 } ],
    );
    for my $k (@kinds) {
        my ($r, $c) = counted($fs, $k->[1]);
        is $c->{modify_requests}, 1, "fastfs: $k->[0] counts as one modifying request";
    }
    my ($r, $c) = counted($fs, sub { my @st = stat "$d/f"; slurp("$d/f"); opendir(my $dh, $d); my @e = readdir $dh; 1 });
    is $c->{modify_requests}, 0, 'fastfs: stat, read and readdir count none';
    $fs->unmount;
}

for my $cache (0, 1) {
    my $fs = FastFS->mount(cache => $cache);
    my $mount = $cache ? 'cached mount' : 'uncached mount';
    for my $size (1024, 65536) {
        my $file = $fs->dir . "/cfg-$size";
        my $data = config_of($size, 1);
        my $what = "$mount, $size bytes";
        file_set_contents($file, $data);

        # same bytes: left alone
        my $before = stamp($file);
        my ($r, $c) = counted($fs, sub { file_set_contents($file, $data, { if_changed => 1 }) });
        is $r, 0, "$what, same bytes: if_changed returns 0";
        is_deeply { map { $_ => $c->{$_} } @MODIFYING }, { map { $_ => 0 } @MODIFYING },
            "$what, same bytes: no modifying request of any kind";
        cmp_ok $c->{read_requests}, '<=', 1, "$what, same bytes: at most one READ ($c->{read_requests})";
        is stamp($file), $before, "$what, same bytes: inode, mtime and ctime as they were";
        ok slurp($file) eq $data, "$what, same bytes: the bytes as they were";

        # the reference and a plain call rewrite it: what if_changed saves
        my ($rr, $rc) = counted($fs, sub { ref_file_set_contents($file, $data) });
        my ($fr, $fc) = counted($fs, sub { file_set_contents($file, $data) });
        cmp_ok $rc->{modify_requests}, '>=', 3, "$what, same bytes: the reference sends $rc->{modify_requests} modifying requests";
        is $fc->{modify_requests}, $rc->{modify_requests}, "$what, same bytes: a plain FastFile call as many";

        # same size, other bytes (one byte in the middle): read once, written
        my $changed = $data;
        substr($changed, $size >> 1, 1) ^= "\x01";
        ($r, $c) = counted($fs, sub { file_set_contents($file, $changed, { if_changed => 1 }) });
        is $r, 1, "$what, same size, other bytes: returns 1";
        cmp_ok $c->{read_requests}, '<=', 1, "$what, same size, other bytes: at most one READ";
        is $c->{modify_requests}, $fc->{modify_requests},
            "$what, same size, other bytes: the plain call's $fc->{modify_requests} modifying requests";
        is_deeply [ @$c{qw(create_requests write_requests rename_requests)} ], [ 1, 1, 1 ],
            "$what, same size, other bytes: create, one write, rename";
        ok slurp($file) eq $changed, "$what, same size, other bytes: the new bytes on the mount";
        isnt stamp($file), $before, "$what, same size, other bytes: a new inode";

        # another size: written without reading the old bytes
        my $longer = "$changed# one more line\n";
        ($r, $c) = counted($fs, sub { file_set_contents($file, $longer, { if_changed => 1 }) });
        is $r, 1, "$what, other size: returns 1";
        is $c->{read_requests}, 0, "$what, other size: the old bytes are not read";
        is $c->{modify_requests}, $fc->{modify_requests},
            "$what, other size: the plain call's $fc->{modify_requests} modifying requests";
        ok slurp($file) eq $longer, "$what, other size: the new bytes on the mount";
        is_deeply [ temps_in($fs->dir) ], [], "$what: no temp file left";
    }
    $fs->unmount;
}

alarm 0;
done_testing;
