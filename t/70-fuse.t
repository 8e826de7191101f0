#!perl
# FUSE write requests, counted by t/fusefs (an in-memory FUSE filesystem
# that models pmxcfs). One write(2) of the whole file means ceil(size /
# max_write) WRITE requests; Perl's print makes one write(2) per 8 KiB, and so
# at least ceil(size / 8 KiB) requests. This test fails if file_set_contents
# ever goes back to buffered (print-style) writing.
use strict;
use warnings;
use Test::More;
use Fcntl ();
use File::Spec ();
use POSIX qw(ceil);
use lib 't/lib';
use FFTest qw(slurp);
use Reference qw(print_era);
use FastFS;
use FastFile qw(file_set_contents file_get_contents);

my $why = FastFS::available();
if ($why && $ENV{FASTFILE_REQUIRE_FUSE}) {
    # CI sets this: it runs as root with /dev/fuse, like a Proxmox VE host
    # (fuse, no fuse3), where a skip would hide that FUSE testing broke
    plan tests => 1;
    fail "fastfs is usable here (FASTFILE_REQUIRE_FUSE is set)";
    diag "fastfs: $why";
    exit;
}
plan skip_all => "fastfs: $why" if $why;

local $SIG{ALRM} = sub { die "t/70-fuse.t: watchdog: took more than 60 s\n" };
alarm 60;

my @SIZES     = (1024, 65536, 1048576);
my @MAX_WRITE = (4096, 131072, 1048576);
# FUSE requests above 128 KiB need the kernel's max_pages (Linux 4.20+)
my ($kmaj, $kmin) = (POSIX::uname())[2] =~ /^(\d+)\.(\d+)/;
if (defined $kmaj && ($kmaj < 4 || ($kmaj == 4 && $kmin < 20))) {
    @MAX_WRITE = grep { $_ <= 131072 } @MAX_WRITE;
    diag "Linux $kmaj.$kmin: FUSE writes are capped at 128 KiB; max_write 1 MiB not tested";
}
my $PERLIO_BUF = 8192;    # PerlIO's buffer: print writes in these pieces

# Deterministic bytes that differ in every 4-byte word, high bytes included,
# so a lost, repeated or reordered request cannot go unnoticed.
sub payload {
    my ($size) = @_;
    my $x = $size;
    my $s = pack 'N*', map { $x = ($x * 1103515245 + 12345) % 4294967296 } 1 .. ceil($size / 4);
    return substr $s, 0, $size;
}

# Names in $dir except dot files (the control file is never listed anyway).
sub entries {
    my ($dir) = @_;
    opendir my $dh, $dir or return "cannot list $dir: $!";
    my @e = sort grep { !/^\./ } readdir $dh;
    closedir $dh;    # an open handle would keep the lazy unmount waiting
    return @e;
}

my %payload = map { $_ => payload($_) } @SIZES;
my (@dirs, @pids);

for my $max_write (@MAX_WRITE) {
    my $fs = FastFS->mount(max_write => $max_write);
    push @dirs, $fs->dir;
    push @pids, $fs->pid;
    is $fs->counters->{max_write}, $max_write, "mounted with max_write $max_write";

    for my $size (@SIZES) {
        my $data = $payload{$size};
        my $file = $fs->dir . "/fsc-$size";
        my $what = "file_set_contents, $size bytes, max_write $max_write";

        $fs->reset;
        ok eval { file_set_contents($file, $data); 1 }, "$what: succeeds"
            or diag $@;
        my $c = $fs->counters;
        my $want = ceil($size / $max_write);
        is $c->{write_requests}, $want, "$what: $want write request(s)";
        my $last = $size - ($want - 1) * $max_write;
        is_deeply $c->{write_sizes}, [ ($max_write) x ($want - 1), $last ],
            "$what: requests of max_write bytes, the last of $last";
        ok slurp($file) eq $data, "$what: stored bytes are identical";
        ok file_get_contents($file) eq $data, "$what: file_get_contents reads them back";
        is_deeply [ entries($fs->dir) ], [ sort map { "fsc-$_" } grep { $_ <= $size } @SIZES ],
            "$what: no temp file left";
    }

    # The print era: a regression to buffered writing looks like this.
    next unless $max_write == 131072;
    for my $size (@SIZES) {
        my $data = $payload{$size};
        my $file = $fs->dir . "/print-$size";
        my $what = "print-era writer, $size bytes, max_write $max_write";
        $fs->reset;
        print_era($file, $data);    # the pure-Perl writer before syswrite
        my $want = ceil($size / $PERLIO_BUF);
        is $fs->counters->{write_requests}, $want,
            "$what: $want write request(s), one per 8 KiB";
        ok slurp($file) eq $data, "$what: stored bytes are identical";
        unlink $file;
    }
}
# each $fs went out of scope at the end of its iteration: FastFS unmounted it

# Every mount gone: not in /proc/mounts, the daemons exited, dirs removed.
my %ours = map { $_ => 1 } @dirs;
# The fixture itself: a command written to the control file in two pieces
# (as the kernel may split a write under load) runs once its line is whole.
{
    my $fs = FastFS->mount;
    push @dirs, $fs->dir;
    push @pids, $fs->pid;
    my $d = $fs->dir;
    sysopen my $ctl, "$d/.fastfs", Fcntl::O_WRONLY() or die "open control file: $!";
    my @n = map { syswrite $ctl, $_ } "fail create 13 /sp", "lit.*\n";
    close $ctl;
    is_deeply \@n, [18, 6], 'control file: both pieces of a command line accepted';
    ok !eval { file_set_contents("$d/split", "x"); 1 }, 'control file: the command split in two took effect';
    like $@, qr/^unable to open file '\Q$d\E\/split\.tmp\.\d+'/, '... the create failed';
    $fs->control('clear');
    ok file_set_contents("$d/split", "x"), '... and clear removed it';
    $fs->unmount;
}

my @stale = grep { $ours{$_} } FastFS::mounts_under(File::Spec->tmpdir);
is_deeply \@stale, [], 'no stale fastfs mount in /proc/mounts';
is scalar(grep { kill 0, $_ } @pids), 0, 'every fastfs daemon has exited';
is scalar(grep { -e } @dirs), 0, 'mount points removed';

alarm 0;
done_testing;
