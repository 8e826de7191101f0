#!perl
# file_set_contents against bare C (bench/bare.c: open, write, close, rename
# in a C loop) on tmpfs, per size: both time the same number of calls
# replacing one file, in interleaved rounds (one FastFile batch, one bare C
# batch, order alternating), and the ratio is of the medians of the same
# run. A quick check of the "within 1.05x of bare C" target without the
# whole of make bench.
#
#   perl -Mblib bench/vsbare.pl [rounds] [sizes in KiB...]    (default: 21 rounds, 1 4)
use strict;
use warnings;

use Config;
use File::Temp ();
use FindBin;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use FastFile qw(file_set_contents);

my ($rounds, @kib) = @ARGV;
$rounds ||= 21;
@kib = (1, 4) unless @kib;

my $base = -d '/dev/shm' && -w '/dev/shm' ? '/dev/shm' : die "no writable /dev/shm (tmpfs)\n";
my $dir = File::Temp::tempdir('ff-vsbare-XXXXXXXX', DIR => $base, CLEANUP => 1);
my $build = File::Temp::tempdir('ff-vsbare-XXXXXXXX', TMPDIR => 1, CLEANUP => 1);
my $bare = "$build/bare";
system($Config{cc}, '-O2', '-o', $bare, "$FindBin::Bin/bare.c") == 0 or die "cannot build bench/bare.c\n";

sub median { my @s = sort { $a <=> $b } @_; return $s[$#s / 2] }

printf "%-8s %12s %12s %8s\n", 'size', 'FastFile ns', 'bare C ns', 'ratio';
for my $k (@kib) {
    my $size = $k * 1024;
    my $data = ('x' x 63 . "\n") x ($size / 64);
    my $n = $size <= 16384 ? 20000 : 2000;
    my $f = "$dir/ff-$k";
    my $bf = "$dir/bare-$k";
    file_set_contents($f, $data) for 1 .. 100;      # warm
    my (@ff, @bc);
    for my $r (1 .. $rounds) {
        my @order = $r % 2 ? ('ff', 'bare') : ('bare', 'ff');
        for my $who (@order) {
            if ($who eq 'ff') {
                my $t0 = clock_gettime(CLOCK_MONOTONIC);
                file_set_contents($f, $data) for 1 .. $n;
                push @ff, (clock_gettime(CLOCK_MONOTONIC) - $t0) * 1e9 / $n;
            } else {
                my $ns = `$bare time $bf $size $n`;
                $ns =~ /^(\d+)/ or die "bare: $ns";
                push @bc, $1 / $n;
            }
        }
    }
    my ($mf, $mb) = (median(@ff), median(@bc));
    printf "%-8s %12.0f %12.0f %8.3f\n", "$k KiB", $mf, $mb, $mf / $mb;
}
