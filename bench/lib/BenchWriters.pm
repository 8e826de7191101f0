package BenchWriters;

# The writers and readers bench/compare.pl and bench/demo.pl put side by
# side, as plain subs so the benchmark process and its traced children run
# the same code. The pure-Perl print-era and syswrite-era writers and the 8
# KiB sysread reader are the tests' (t/lib/Reference.pm: the scripts put t/lib
# in @INC), so what is timed is what the tests compare with.

use strict;
use warnings;

use FastFile qw(file_set_contents file_get_contents);
use Reference qw(print_era syswrite_era ref_get_contents);

# Optional competitors, used when installed (Debian: libpath-tiny-perl,
# libfile-slurp-perl).
our %VERSION_OF;
for my $mod (qw(Path::Tiny File::Slurp)) {
    (my $file = "$mod.pm") =~ s{::}{/}g;
    $VERSION_OF{$mod} = $mod->VERSION // 'unknown' if eval { require $file; 1 };
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

*ff_reader = \&FastFile::file_get_contents;

our @READERS = (
    [ ff_reader    => 'FastFile file_get_contents', \&ff_reader ],
    [ sysread_loop => '8 KiB sysread loop',         \&ref_get_contents ],
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
