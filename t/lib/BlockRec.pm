package BlockRec;

# Test helper: a real filesystem (ext4, xfs, btrfs) on a loop device whose
# block writes and cache flushes t/blockrec/blockrec records, and the disk
# states a power cut could leave, each mounted on a second loop device.
#
#   my $why = BlockRec::available('xfs');
#   plan skip_all => $why if $why;
#   my $r = BlockRec->new(fs => 'xfs');     # recorder, mkfs, both loops
#   $r->mount_disk;  ... set up files in $r->dir ...
#   $r->start;       # the disk as it is now is the base of every state
#   ... calls on $r->dir, $r->mark('label') after each ...
#   $r->umount_disk;
#   my @log = $r->log;        # [ 'W', off, len ] [ 'F' ] [ 'M', label ]
#   my $err = $r->check_state($n, \@more, sub { my ($root) = @_; ... });
#   $r->destroy;     # also done by DESTROY, an END block and on signals
#
# A state is the base plus the writes among log entries 0 .. $n-1 and
# those with the indices in @more. check_state replays the journal (a
# read-write mount), runs the filesystem's checker, mounts the state
# read-only and runs the callback on it; it returns '' or what failed.
# Needs root, loop devices, FUSE (libfuse3-dev to build) and the mkfs tool.

use strict;
use warnings;

use Cwd ();
use File::Basename ();
use File::Spec ();
use File::Temp ();
use lib File::Basename::dirname(__FILE__);
use FFTest qw(which run_cmd);
use FastFS ();
use POSIX ();

my $ROOT = Cwd::abs_path(
    File::Spec->catdir(File::Basename::dirname(__FILE__), '..', '..'));
my $SRCDIR = File::Spec->catdir($ROOT, 't', 'blockrec');
my $BIN = File::Spec->catfile($SRCDIR, 'blockrec');

# per filesystem: image size (the smallest mkfs takes, sparse anyway), mkfs,
# the checker of a state (read-only), mount options
my %FS = (
    ext4 => { size => 64 << 20, mkfs => [qw(mkfs.ext4 -q -F -b 4096)],
              fsck => [qw(e2fsck -f -n)], tools => [qw(mkfs.ext4 e2fsck)] },
    xfs  => { size => 300 << 20, mkfs => [qw(mkfs.xfs -q -f)],
              fsck => [qw(xfs_repair -n)], tools => [qw(mkfs.xfs xfs_repair)] },
    btrfs => { size => 128 << 20, mkfs => [qw(mkfs.btrfs -q -f)],
               fsck => [qw(btrfs check --readonly)], tools => [qw(mkfs.btrfs btrfs)] },
);

my %LIVE;    # every recorder not destroyed yet, for END and signals

sub filesystems { return sort keys %FS }

# '' if $fs can be recorded here, else why not (for skip_all)
sub available {
    my ($fs) = @_;
    my $spec = $FS{$fs} or return "unknown filesystem $fs";
    return 'not root (loop devices and mounts)' if $> != 0;
    return 'no /dev/fuse' unless -c '/dev/fuse';
    return 'no loop devices (/dev/loop-control; modprobe loop)' unless -c '/dev/loop-control';
    for my $tool ('losetup', 'blockdev', @{ $spec->{tools} }) {
        return "no $tool (apt-get install " . ({ 'mkfs.ext4' => 'e2fsprogs', e2fsck => 'e2fsprogs',
            'mkfs.xfs' => 'xfsprogs', xfs_repair => 'xfsprogs', 'mkfs.btrfs' => 'btrfs-progs',
            btrfs => 'btrfs-progs' }->{$tool} // 'mount') . ')' unless _tool($tool);
    }
    return "the kernel has no $fs" unless _kernel_has($fs);
    my $why = FastFS::build($SRCDIR, 'blockrec');
    return "blockrec: $why" if $why;
    return '';
}

sub _tool {
    my ($name) = @_;
    return which($name) // (grep { -x } map { "$_/$name" } qw(/usr/sbin /sbin))[0];
}

sub _kernel_has {
    my ($fs) = @_;
    for (1, 2) {
        open my $fh, '<', '/proc/filesystems' or return 0;
        return 1 if grep { /\t\Q$fs\E$/ } <$fh>;
        run_cmd(_tool('modprobe') // 'modprobe', $fs);    # once, then look again
    }
    return 0;
}

# runs a command; dies with its output when it fails
sub _run {
    my (@cmd) = @_;
    $cmd[0] = _tool($cmd[0]) // $cmd[0];
    my ($status, $out) = run_cmd(@cmd);
    die "@cmd: " . ($out =~ s/\s+\z//r) . " (exit " . ($status >> 8) . ")\n" if $status;
    return $out;
}

# _run, again while the device is busy (a moment after an umount), 3 s at most
sub _busy_retry {
    my (@cmd) = @_;
    for my $try (1 .. 30) {
        my $out = eval { _run(@cmd) };
        return $out if defined $out;
        die $@ if $try == 30 || $@ !~ /busy/i;
        select undef, undef, undef, 0.1;
    }
}

# Runs this test again (exec) in a mount namespace of its own, where no
# other process on the machine gets a copy of its mounts (a copy made by
# someone's unshare(1) keeps a state's filesystem alive after our umount,
# and the loop device busy), and where every mount goes when the test ends,
# however it ends. Does nothing without unshare(1) or when already done.
sub private_mounts {
    my (@argv) = @_;
    return if $ENV{FF_BLOCKREC_NS} || $> != 0;
    my $unshare = _tool('unshare') or return;
    my ($status) = run_cmd($unshare, '-m', '--propagation', 'private', 'true');
    return if $status;
    $ENV{FF_BLOCKREC_NS} = 1;
    exec { $unshare } $unshare, '-m', '--propagation', 'private', $^X, FFTest::inc_args(), $0, @argv;
    die "exec $unshare: $!\n";
}

sub new {
    my ($class, %opt) = @_;
    my $spec = $FS{ $opt{fs} } or die "BlockRec: unknown filesystem $opt{fs}\n";
    my $tag = "blockrec-$opt{fs}-$$";
    my $self = bless { fs => $opt{fs}, spec => $spec, owner => $$,
        mount_opts => $opt{mount_opts} // '', size => $opt{size} // $spec->{size},
        rec => File::Temp::tempdir("$tag-rec-XXXXXX", TMPDIR => 1, CLEANUP => 0),
        mnt => File::Temp::tempdir("$tag-mnt-XXXXXX", TMPDIR => 1, CLEANUP => 0),
        smnt => File::Temp::tempdir("$tag-state-XXXXXX", TMPDIR => 1, CLEANUP => 0),
    }, $class;
    $LIVE{$self} = $self;
    $self->_mount_recorder;
    $self->{disk} = _run(qw(losetup -f --show --direct-io=on), "$self->{rec}/disk") =~ s/\s+\z//r;
    _run(@{ $spec->{mkfs} }, $self->{disk});
    $self->{state} = _run(qw(losetup -f --show --direct-io=on), "$self->{rec}/state") =~ s/\s+\z//r;
    return $self;
}

# the recorder, as FastFS mounts fastfs (and torn down by its _teardown)
sub _mount_recorder {
    my ($self) = @_;
    my $dir = $self->{rec};
    my $log = $self->{log_file} = "$dir.log";
    my $parent = $$;
    my $pid = fork // die "BlockRec: fork: $!\n";
    if (!$pid) {
        $ENV{BLOCKREC_PARENT_PID} = $parent;
        $ENV{BLOCKREC_SIZE} = $self->{size};
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $log;
        open STDERR, '>&', \*STDOUT;
        exec { $BIN } $BIN, '-f', '-s', '-o', 'default_permissions,fsname=blockrec', $dir
            or POSIX::_exit(127);
    }
    @$self{qw(pid dir unmount log)} = ($pid, $dir, [ _tool('umount'), '-l' ], $log);
    my $deadline = time + 10;
    until (-e "$dir/ctl") {
        my $exited = waitpid($pid, POSIX::WNOHANG()) == $pid;
        die "BlockRec: recorder did not mount on $dir: " . (FFTest::slurp($log) // '') . "\n"
            if $exited || time > $deadline;
        select undef, undef, undef, 0.02;
    }
    $self->{recorder_up} = 1;
}

sub dir { $_[0]{mnt} }
sub fs  { $_[0]{fs} }

sub control {
    my ($self, $cmd) = @_;
    open my $fh, '>', "$self->{rec}/ctl" or die "BlockRec: ctl: $!\n";
    syswrite $fh, "$cmd\n" or die "BlockRec: '$cmd': $!\n";
    close $fh or die "BlockRec: '$cmd': $!\n";
}

sub start { $_[0]->control('start') }
sub mark  { $_[0]->control("mark $_[1]") }

# the log since start: [ 'W', offset, length ], [ 'F' ], [ 'M', label ]
sub log {
    my ($self) = @_;
    my $text = FFTest::slurp("$self->{rec}/ctl") // die "BlockRec: ctl: $!\n";
    my @log;
    for (split /\n/, $text) {
        push @log, /^W (\d+) (\d+)$/ ? [ 'W', $1, $2 ] : /^F$/ ? ['F'] : /^M (.*)$/ ? [ 'M', $1 ] : ();
    }
    return @log;
}

sub counters {
    my ($self) = @_;
    my $text = FFTest::slurp("$self->{rec}/ctl") // die "BlockRec: ctl: $!\n";
    return { map { /^([a-z_]+) (\d+)$/ ? ($1, $2) : () } split /\n/, $text };
}

# btrfs remembers each device of a filesystem by its path: a state (older)
# and the disk (newer) share the fsid, so forget both before mounting either
sub _forget {
    my ($self) = @_;
    return unless $self->{fs} eq 'btrfs';
    run_cmd(_tool('btrfs'), qw(device scan --forget), $_) for grep defined, @$self{qw(disk state)};
}

sub mount_disk {
    my ($self) = @_;
    $self->_forget;
    _run('mount', ($self->{mount_opts} ? ('-o', $self->{mount_opts}) : ()), $self->{disk}, $self->{mnt});
    $self->{disk_mounted} = 1;
}

sub umount_disk {
    my ($self) = @_;
    _run('umount', $self->{mnt});
    $self->{disk_mounted} = 0;
}

# Builds the state, then: a read-only mount (which replays the journal,
# ext4's and xfs', or btrfs' log tree, on the loop device), $check->(mount
# point) (a text: '' when all is well), umount, the checker on the replayed
# state. Returns '' or what failed.
sub check_state {
    my ($self, $n, $more, $check) = @_;
    $self->control("state $n @$more");
    my $dev = $self->{state};
    my $err = eval {
        _run('blockdev', '--flushbufs', $dev);    # no block of the last state cached
        $self->_forget;
        _busy_retry('mount', '-o', ($self->{fs} eq 'xfs' ? 'ro,nouuid' : 'ro'), $dev, $self->{smnt});
        $self->{state_mounted} = 1;
        my $bad = $check->($self->{smnt});
        _run('umount', $self->{smnt});
        $self->{state_mounted} = 0;
        my ($fsck, @args) = @{ $self->{spec}{fsck} };
        my $out = eval { _busy_retry($fsck, @args, $dev); '' } // $@;
        $bad = join '; ', grep { length } $bad, "$fsck found errors: " . substr($out, 0, 2000) =~ s/\s+\z//r
            if length $out;
        $bad;
    } // $@;
    if ($self->{state_mounted}) {
        run_cmd(_tool('umount'), $self->{smnt});
        $self->{state_mounted} = 0;
    }
    return $err;
}

# the state as a sparse image file, for a look by hand at a failure
sub save_state {
    my ($self, $n, $more, $path) = @_;
    $self->control("state $n @$more");
    $self->control("save $path");
}

# Unmounts, detaches and stops everything, whatever state it is in.
sub destroy {
    my ($self) = @_;
    return if $self->{destroyed}++ || $self->{owner} != $$;
    delete $LIVE{$self};
    local ($?, $!, $@);
    for my $m (grep { $self->{"${_}_mounted"} } qw(disk state)) {
        my $dir = $m eq 'disk' ? $self->{mnt} : $self->{smnt};
        my ($status) = run_cmd(_tool('umount'), $dir);
        run_cmd(_tool('umount'), '-l', $dir) if $status;
    }
    $self->_forget;
    run_cmd(_tool('losetup'), '-d', $_) for grep defined, @$self{qw(disk state)};
    FastFS::_teardown($self) if $self->{recorder_up};
    rmdir $_ for @$self{qw(mnt smnt rec)};
}

sub DESTROY { $_[0]->destroy }

END { $_->destroy for values %LIVE }

# a test killed by a signal still cleans up (END runs on die)
for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub { die "BlockRec: SIG$sig\n" } if !$SIG{$sig} || $SIG{$sig} eq 'DEFAULT';
}

1;
