package BenchWriters;

# The writers and readers bench/compare.pl puts side by side, as plain subs
# so the benchmark process and its traced children run the same code.
#
# The two pure-Perl writers are our own reimplementations of Proxmox VE's
# file_set_contents as it was before and after the pve-devel patch "tools:
# file_set_contents: use syswrite instead of print" (v2, 2024); the reader is
# the reference's 8 KiB sysread loop (safe_read_from). Written from the facts
# of those versions (which calls, which buffer sizes), not from their code.

use strict;
use warnings;

use Fcntl qw(O_WRONLY O_CREAT);
use IO::File ();
use FastFile qw(file_set_contents file_get_contents);

# Optional competitors, used when installed (Debian: libpath-tiny-perl,
# libfile-slurp-perl).
our %VERSION_OF;
for my $mod (qw(Path::Tiny File::Slurp)) {
    (my $file = "$mod.pm") =~ s{::}{/}g;
    $VERSION_OF{$mod} = $mod->VERSION // 'unknown' if eval { require $file; 1 };
}

# The print era: IO::File (sysopen O_WRONLY|O_CREAT, no O_EXCL), one print
# through PerlIO's 8 KiB buffer, close, rename.
sub print_era {
    my ($filename, $data, $perm) = @_;
    $perm //= 0644;
    my $tmp = "$filename.tmp.$$";
    my $fh = IO::File->new($tmp, O_WRONLY | O_CREAT, $perm)
        or die "unable to open file '$tmp' - $!\n";
    print {$fh} $data   or die "unable to write '$tmp' - $!\n";
    close $fh           or die "closing file '$tmp' failed - $!\n";
    rename $tmp, $filename
        or die "close (rename) atomic file '$filename' failed: $!\n";
    return;
}

# The syswrite era (the v2 patch): the data is first printed into an
# in-memory handle (which encodes wide characters like print does, and makes
# a copy), then written with a syswrite loop on a sysopen'ed handle.
sub syswrite_era {
    my ($filename, $data, $perm) = @_;
    $perm //= 0644;
    my $tmp = "$filename.tmp.$$";
    sysopen my $fh, $tmp, O_WRONLY | O_CREAT, $perm
        or die "unable to open file '$tmp' - $!\n";
    my $bytes = '';
    open my $mem, '>', \$bytes or die "failed to open in-memory variable - $!\n";
    print {$mem} $data;
    close $mem;
    my ($off, $len) = (0, length $bytes);
    while ($off < $len) {
        my $n = syswrite $fh, $bytes, $len - $off, $off;
        die "unable to write '$tmp' - $!\n" unless $n;
        $off += $n;
    }
    close $fh or die "closing file '$tmp' failed - $!\n";
    rename $tmp, $filename
        or die "close (rename) atomic file '$filename' failed: $!\n";
    return;
}

# FastFile is called directly (no Perl sub around the XS call)
*fastfile = \&FastFile::file_set_contents;

sub path_tiny { Path::Tiny::path($_[0])->spew_raw($_[1]) }

# the usual call: data passed by value (File::Slurp joins @_ into a copy)
sub file_slurp {
    File::Slurp::write_file($_[0], { atomic => 1, binmode => ':raw' }, $_[1]);
}

# name => [label, sub]; bare C is driven by compare.pl itself
our @WRITERS = (
    [ fastfile     => 'FastFile',     \&fastfile ],
    [ syswrite_era => 'syswrite-era', \&syswrite_era ],
    [ print_era    => 'print-era',    \&print_era ],
    ($VERSION_OF{'Path::Tiny'}  ? [ path_tiny  => 'Path::Tiny spew_raw', \&path_tiny ]  : ()),
    ($VERSION_OF{'File::Slurp'} ? [ file_slurp => 'File::Slurp atomic',  \&file_slurp ] : ()),
);

sub writer { my ($name) = @_; ($_->[0] eq $name and return $_->[2]) for @WRITERS; die "no writer $name\n" }

# The reference reader: open, then sysread 8 KiB at a time, appending.
sub sysread_loop {
    my ($filename, $max) = @_;
    $max ||= 1048576;
    open my $fh, '<', $filename or die "can't open '$filename' - $!\n";
    my ($buf, $got, $n) = ('', 0);
    while ($n = sysread $fh, $buf, 8192, $got) {
        $got += $n;
        die "file '$filename' too long - aborting\n" if $got > $max;
    }
    die "unable to read file '$filename' - $!\n" unless defined $n;
    close $fh;
    return $buf;
}

*ff_reader = \&FastFile::file_get_contents;

our @READERS = (
    [ ff_reader    => 'FastFile file_get_contents', \&ff_reader ],
    [ sysread_loop => '8 KiB sysread loop',         \&sysread_loop ],
);

sub reader { my ($name) = @_; ($_->[0] eq $name and return $_->[2]) for @READERS; die "no reader $name\n" }

# $size bytes of config-like text ("line 000001: xxx...\n", 64 bytes a line).
my $BLOCK = join '', map { sprintf "line %06d: %s\n", $_, 'x' x 50 } 1 .. 16384;   # 1 MiB
sub payload {
    my ($size) = @_;
    my $s = $BLOCK x int($size / length $BLOCK);
    $s .= substr $BLOCK, 0, $size % length $BLOCK;
    return $s;
}

# Builds $size bytes in place in $$ref by appending 1 MiB blocks, so no
# temporary of the full size exists (for peak RSS measurements).
sub build_in_place {
    my ($ref, $size) = @_;
    $$ref = '';
    $$ref .= $BLOCK for 1 .. int($size / length $BLOCK);
    $$ref .= substr $BLOCK, 0, $size % length $BLOCK;
    return;
}

# Peak RSS of this process in KiB (Linux).
sub vm_hwm {
    open my $fh, '<', '/proc/self/status' or return;
    while (<$fh>) { return $1 if /^VmHWM:\s*(\d+)/ }
    return;
}

1;
