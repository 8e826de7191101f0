package FastFS;

# Test helper: mounts t/fusefs/fastfs (an in-memory FUSE filesystem
# that counts WRITE requests and injects faults) on a temporary directory.
#
#   use lib 't/lib';
#   use FastFS;
#   my $why = FastFS::available();
#   plan skip_all => "fastfs: $why" if $why;
#   my $fs = FastFS->mount(max_write => 131072);
#   ... write into $fs->dir ...
#   is $fs->counters->{write_requests}, 8;
#   $fs->control('fail write 28 /file.tmp.*');
#   $fs->unmount;          # also done by DESTROY and an END block
#
# unmount returns false when the unmount failed ($fs->unmount_error says
# why: fusermount's message); a mount that stays is reported with diag.
# available() mounts and unmounts once, so where unmounting fails (a build
# root without /etc/mtab) every FUSE test skips instead of leaving mounts.
#
# Mounting needs no fuse3 package: as root libfuse3 mounts by itself, as
# another user FUSE 2's fusermount will do (see _mounter). See
# t/fusefs/README for the control-file protocol.

use strict;
use warnings;

use Cwd ();
use Errno ();
use Fcntl qw(O_WRONLY LOCK_EX);
use File::Basename ();
use File::Spec ();
use lib File::Basename::dirname(__FILE__);
use FFTest qw(which);
use File::Temp ();
use POSIX ();
use Scalar::Util ();

my $ROOT = Cwd::abs_path(
    File::Spec->catdir(File::Basename::dirname(__FILE__), '..', '..'));
my $SRCDIR = File::Spec->catdir($ROOT, 't', 'fusefs');
my $BIN    = File::Spec->catfile($SRCDIR, 'fastfs');

my %LIVE;          # dir => weak ref to each mounted object, for END
my $AVAILABLE;     # cached result of available()

sub binary { $BIN }

sub _sleep { select(undef, undef, undef, $_[0]) }

# Builds the daemon if it is missing or older than its source.  A lock
# keeps parallel test files from running make at the same time. Another
# FUSE program of the tests (t/blockrec) passes its directory and name.
sub build {
    my ($srcdir, $name) = @_ ? @_ : ($SRCDIR, 'fastfs');
    my $bin = File::Spec->catfile($srcdir, $name);
    my $src = File::Spec->catfile($srcdir, "$name.c");
    return '' if -x $bin && -M $bin <= -M $src;
    return "no make (apt-get install make)" unless which('make');
    return "no pkg-config (apt-get install pkg-config)" unless which('pkg-config');
    open my $lock, '>', File::Spec->catfile($srcdir, '.build.lock')
        or return "cannot build: lock: $!";
    flock $lock, LOCK_EX or return "cannot build: flock: $!";
    return '' if -x $bin && -M $bin <= -M $src;     # someone else did
    my $pid = open(my $ph, '-|') // return "cannot build: fork: $!";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec 'make', '-C', $srcdir
            or POSIX::_exit(127);
    }
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    return "cannot build: " . ((split /\n/, $out)[-1] // "make failed: $?")
        . " (it needs libfuse3-dev and a C compiler)"
        if $? || !-x $bin;
    return '';
}

# How to mount and unmount here: { unmount => [command], path => dir to put
# first in the daemon's PATH (or undef) }, or the reason why we cannot.
#   root: libfuse3 mounts with mount(2) itself (no fusermount at all, as long
#     as auto_unmount is not asked for) and the daemon unmounts with umount2(2)
#     on SIGTERM; our own unmount is umount(8) -l.
#   others: libfuse3 runs fusermount3 (setuid root). FUSE 2's fusermount
#     speaks the same protocol, so where only it is installed (a Proxmox VE
#     host: Debian's fuse3 package would remove fuse, which pmxcfs needs) a
#     private directory with a "fusermount3" symlink to it goes first in the
#     daemon's PATH.
my $MOUNTER;

# The package that brings a fusermount: on Debian 12 (Proxmox VE 8) fuse,
# which pmxcfs needs and fuse3 would remove; on Debian 13 (Proxmox VE 9) fuse
# is a transitional package for fuse3, whose libfuse3 pmxcfs uses.
our $INSTALL_FUSERMOUNT = 'apt-get install fuse3; on Debian 12: fuse';

sub _mounter {
    return $MOUNTER if $MOUNTER;
    if ($> == 0) {
        my $umount = which('umount') // (grep { -x } '/usr/bin/umount', '/bin/umount')[0]
            // return 'umount(8) missing (apt-get install mount)';
        return $MOUNTER = { unmount => [ $umount, '-l' ], path => undef };
    }
    if (my $fm3 = which('fusermount3')) {
        return $MOUNTER = { unmount => [ $fm3, '-u', '-z' ], path => undef };
    }
    my $fm = which('fusermount')
        // return "not root, and neither fusermount3 nor fusermount is installed ($INSTALL_FUSERMOUNT)";
    my $shim = File::Temp::tempdir('fastfs-bin-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    symlink $fm, "$shim/fusermount3"
        or return "cannot link $shim/fusermount3 to $fm: $!";
    return $MOUNTER = { unmount => [ $fm, '-u', '-z' ], path => $shim };
}

# '' if fastfs can be used here, otherwise why not (for skip_all). The
# probe mounts and unmounts: where the unmount fails (fusermount in a build
# root without /etc/mtab: debootstrap, sbuild, pbuilder) every later mount
# would stay behind, dead, and only root could remove it.
sub available {
    return $AVAILABLE if defined $AVAILABLE;
    my $why = '';
    my $mounter = _mounter();
    if (!-e '/dev/fuse') {
        $why = 'no /dev/fuse';
    } elsif (!-r '/dev/fuse' || !-w _) {
        $why = 'no access to /dev/fuse';
    } elsif (!ref $mounter) {
        $why = $mounter;
    } elsif (my $err = _unmount_without_mtab($mounter)) {
        $why = "cannot unmount: $err";
    } else {
        $why = build();
        if (!$why) {
            my $fs = eval { FastFS->mount };
            if (!$fs) {
                $why = "mount failed: " . ($@ =~ s/\s+\z//r);
            } elsif (!$fs->unmount) {
                $why = "cannot unmount: " . $fs->unmount_error;
            }
        }
    }
    return $AVAILABLE = $why;
}

# FUSE 2's fusermount opens /etc/mtab before it unmounts anything (as a
# normal user), and a build root may have none: then it cannot unmount, and
# even the probe's mount would stay, dead. Seen without mounting: its
# message when asked to unmount an empty directory, if it names /etc/mtab.
sub _unmount_without_mtab {
    my ($mounter) = @_;
    return '' if $> == 0 || -e '/etc/mtab';
    my $dir = File::Temp::tempdir('fastfs-probe-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    my $err = _run_unmount($mounter->{unmount}, $dir);
    rmdir $dir;
    return $err =~ m{/etc/mtab} ? $err : '';
}

# FastFS->mount(max_write => N, direct_io => 1, threads => 1, debug => 1, cache => 1,
#               pmxcfs => 1)
# cache => 1: names and attributes cached for a second, as on pmxcfs (the
# default is none, so a crash leaves the kernel nothing stale)
# pmxcfs => 1: libfuse as pmxcfs runs it: multi-threaded, no hard_remove,
# the 1 s caches, direct_io opens; a reader racing a replacing writer gets
# pmxcfs' ENOENT there (the default mount: ESTALE). See t/fusefs/README.
# threads => 1 runs the multi-threaded loop with -o intr, so an INTERRUPT
# cuts a "delay" short (write returns EINTR); default is single-threaded.
sub mount {
    my ($class, %opt) = @_;
    my $why = build();
    die "fastfs: $why\n" if $why;
    my $mounter = _mounter();
    die "fastfs: $mounter\n" unless ref $mounter;
    my $max_write = $opt{max_write} || 131072;
    my $dir = File::Temp::tempdir('fastfs-XXXXXX', TMPDIR => 1, CLEANUP => 0);
    my $log = "$dir.log";
    my @o = ("max_write=$max_write", 'default_permissions', 'fsname=fastfs');
    # fusermount's watchdog unmounts if the daemon dies; as root there is no
    # fusermount (asking for it would need fusermount3) and we umount ourselves
    push @o, 'auto_unmount' if $> != 0;
    push @o, 'direct_io' if $opt{direct_io};
    push @o, 'intr'      if $opt{threads};
    push @o, 'cache'     if $opt{cache};
    push @o, 'pmxcfs'    if $opt{pmxcfs};
    my @cmd = ($BIN, '-f', ($opt{threads} || $opt{pmxcfs} ? () : '-s'),
               ($opt{debug} ? '-d' : ()), '-o', join(',', @o), $dir);

    my $parent = $$;
    my $pid = fork;
    if (!defined $pid) {
        my $err = $!;
        rmdir $dir;
        die "fastfs: fork: $err\n";
    }
    if (!$pid) {
        # die with us even if we are SIGKILLed: see main() in fastfs.c
        $ENV{FASTFS_PARENT_PID} = $parent;
        $ENV{PATH} = "$mounter->{path}:$ENV{PATH}" if defined $mounter->{path};
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $log;
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd
            or POSIX::_exit(127);
    }
    my $self = bless { dir => $dir, pid => $pid, owner => $$, log => $log,
                       max_write => $max_write, unmount => $mounter->{unmount} }, $class;
    Scalar::Util::weaken($LIVE{$dir} = $self);

    # live once the hidden control file shows up (the bare directory has
    # no such file); bounded, and give up early if the daemon died
    my $deadline = time + 10;
    until (-e "$dir/.fastfs") {
        my $exited = waitpid($pid, POSIX::WNOHANG()) == $pid;
        if ($exited || time > $deadline) {
            my $status = $?;
            my $err = _slurp($log) // '';
            $self->unmount;
            $err =~ s/\s+\z//;
            die "fastfs: mount on $dir failed: " . ($err
                || ($exited ? "exit status $status" : 'timeout')) . "\n";
        }
        _sleep(0.02);
    }
    return $self;
}

sub dir { $_[0]{dir} }
sub pid { $_[0]{pid} }

sub _slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return;
    local $/;
    return scalar <$fh>;
}

# Counters as a hashref; write_sizes becomes an arrayref of numbers.
sub counters {
    my ($self) = @_;
    my $text = _slurp("$self->{dir}/.fastfs");
    die "fastfs: cannot read control file: $!\n" unless defined $text;
    my %c = map { /^(\S+) ?(.*)$/ ? ($1, $2) : () } split /\n/, $text;
    $c{write_sizes} = [ split /,/, $c{write_sizes} // '' ];
    return \%c;
}

# Sends one command line; dies if fastfs rejects it (EINVAL).
sub control {
    my ($self, $cmd) = @_;
    $cmd .= "\n" unless $cmd =~ /\n\z/;
    sysopen my $fh, "$self->{dir}/.fastfs", O_WRONLY
        or die "fastfs: open control file: $!\n";
    # a write may come back short (seen under load): fastfs runs a command
    # when its line is complete, so the rest follows in another write
    for (my $off = 0; $off < length $cmd; ) {
        my $n = syswrite $fh, $cmd, length($cmd) - $off, $off;
        next if !defined $n && $!{EINTR};
        die "fastfs: '$cmd' rejected: $!\n" unless defined $n;
        $off += $n;
    }
    close $fh or die "fastfs: close control file: $!\n";
    return 1;
}

sub reset { $_[0]->control('reset') }

# Another node's change as pmxcfs gets it (no kernel request): after the
# $after-th READ request on $path from now (0: at once), $path holds what
# $from holds now. Paths from the mount root, "/name". See t/fusefs/README.
sub swap {
    my ($self, $path, $after, $from) = @_;
    return $self->control("swap $path $after $from");
}

# The same after every $every-th READ request on $path, the two versions
# in turn, until $fs->unswap: a file that changes during every read.
sub flip {
    my ($self, $path, $every, $from) = @_;
    return $self->control("flip $path $every $from");
}

sub unswap { $_[0]->control('unswap') }
sub clear { $_[0]->control('clear') }

# The mount points /proc/mounts lists, decoded (octal escapes).
sub mount_points {
    open my $fh, '<', '/proc/mounts' or return;
    return map { my $m = (split ' ')[1] // ''; $m =~ s/\\([0-7]{3})/chr oct $1/ge; $m } <$fh>;
}

# The mount points below $dir (what a test left there).
sub mounts_under {
    my ($dir) = @_;
    return grep { index($_, "$dir/") == 0 } mount_points();
}

sub _mounted {
    my ($dir) = @_;
    return scalar grep { $_ eq $dir } mount_points();
}

# Says what went wrong with a mount where the test's output shows it: a
# diag when Test::More runs the show, else on STDERR.
sub _loudly {
    my ($msg) = @_;
    if (Test::Builder->can('new')) {
        Test::Builder->new->diag($msg);
    } else {
        print STDERR "# $msg\n";
    }
}

# Runs the unmount command on $dir: '' when it succeeded, else why not (its
# message, or its exit status when it said nothing).
sub _run_unmount {
    my ($cmd, $dir) = @_;
    my @cmd = (@$cmd, $dir);
    my $pid = open(my $ph, '-|') // return "fork: $!";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd
            or POSIX::_exit(127);
    }
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    return '' unless $?;
    $out =~ s/\s+\z//;
    $out =~ s/\n/; /g;
    return length $out ? $out : "@cmd: exit status " . ($? >> 8);
}

# Polls until $dir is no longer in /proc/mounts, for at most $secs; true
# if it went.
sub _gone_within {
    my ($dir, $secs) = @_;
    for (0 .. $secs / 0.02) {
        return 1 unless _mounted($dir);
        _sleep(0.02);
    }
    return !_mounted($dir);
}

# Unmounts (lazily, so open files cannot block it), reaps the daemon and
# removes the directory.  Safe to call more than once.  Returns '' when
# the unmount worked, else why it failed; a mount that stays is reported
# loudly (a dead mount a normal user cannot remove).
sub _teardown {
    my ($d) = @_;
    local ($?, $!, $@);
    my ($dir, $pid) = @$d{qw(dir pid)};
    return $d->{error} if $d->{done}++;
    delete $LIVE{$dir};
    my $err = _mounted($dir) ? _run_unmount($d->{unmount}, $dir) : '';
    $err = "still in /proc/mounts after @{ $d->{unmount} }"
        if !$err && !_gone_within($dir, 1);
    # the daemon exits once unmounted; nudge it if not (at once when the
    # unmount failed: it will not go by itself), then insist.
    # -1 means already reaped (maybe by the test's own wait): no kill then
    REAP: for my $sig (($err ? () : 0), 'TERM', 'KILL') {
        kill $sig, $pid if $sig;
        for (1 .. 100) {
            my $r = waitpid($pid, POSIX::WNOHANG()) // -1;
            last REAP if $r == $pid || $r == -1;
            _sleep(0.02);
        }
    }
    # a daemon that dies unmounts (root: umount2; others: fusermount's
    # auto_unmount watchdog, a moment later); root's umount -l is the last
    # resort
    if ($err && !_gone_within($dir, 0.5) && $> == 0) {
        my $why = _run_unmount([ 'umount', '-l' ], $dir);
        $err .= "; umount -l: $why" if $why;
    }
    if (_mounted($dir)) {
        _loudly("FastFS: could not unmount $dir ($err): it stays mounted; "
              . "only root can remove it now (umount -l $dir)");    # t/69 matches this text
    } else {
        rmdir $dir;
    }
    unlink $d->{log};
    return $d->{error} = $err;
}

# True when the unmount worked; false when it failed (unmount_error says
# why), even if the mount went once the daemon died.
sub unmount {
    my ($self) = @_;
    return 1 if $self->{owner} != $$;    # a forked child must not unmount
    my $err = _teardown($self);
    $self->{done} = 1;
    return !$err;
}

sub unmount_error { $_[0]{error} // '' }

sub DESTROY {
    my ($self) = @_;
    $self->unmount if !$self->{done};
}

END {
    for my $d (grep defined, values %LIVE) {
        $d->unmount;
    }
}

1;
