#!perl
# file_set_contents against bare C (bench/bare.c: open, write, close, rename
# in a C loop) on tmpfs, per size: both time the same number of calls
# replacing one file, in interleaved rounds (one FastFile batch, one bare C
# batch, order alternating), and the ratio is of the medians of the same
# run. A quick check of the "within 1.05x of bare C" target without the
# whole of make bench. Both make the same four syscalls a call (openat
# O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, write, close, rename: strace -c of
# either loop), and both build the temp's name from the file's each call
# (".tmp.<pid>" made once). The FastFile side's time includes perl's loop
# and call (entersub, the arguments pushed): what a script pays. One line
# a size: the medians, their ratio, the rounds, and the spread of the
# rounds' own ratios (each FastFile batch against the bare C batch of its
# round); the load average before and after, since the machine's other
# work moves both sides.
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

sub loadavg {
    open my $fh, '<', '/proc/loadavg' or return 'unknown';
    my @l = split ' ', scalar <$fh>;
    return "@l[0 .. 2]";
}

printf "load average %s; %s, perl %vd\n", loadavg(), $Config{archname}, $^V;
printf "%-8s %12s %12s %8s %7s  %s\n", 'size', 'FastFile ns', 'bare C ns', 'ratio', 'rounds',
    "rounds' ratios (min median max)";
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
    my @r = sort { $a <=> $b } map { $ff[$_] / $bc[$_] } 0 .. $#ff;
    printf "%-8s %12.0f %12.0f %8.3f %7d  %.3f %.3f %.3f\n", "$k KiB", $mf, $mb, $mf / $mb,
        $rounds, $r[0], median(@r), $r[-1];
}
printf "load average %s after\n", loadavg();
