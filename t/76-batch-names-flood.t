#!perl
# file_set_contents_many's name tables (duplicates, temps that are other
# targets) stay linear whatever names a caller gives: names that differ
# only in case (one chain where the tables fold case), and names whose
# bytes share their low bits (a hash whose low bits see only the low bits
# of its input). Measured as the user CPU time of such a batch against a
# batch of as many ordinary names: quadratic work is many times slower at
# this size (before the fix, case variants: 3.1 s against 0.04 s).
use strict;
use warnings;

use Test::More;
use lib 't/lib';
use FFTest qw(tempdir);
use FastFile qw(:all);

my $dir = tempdir();
my $N = 30000;

# user CPU seconds of a batch of these leaves (in one directory, or spread
# over two), the first given again last: every name goes through the
# tables before that duplicate fails the batch, and nothing is made (the
# directories missing, mkdir would make them after the look)
sub batch_cpu {
    my ($label, $leaves, $ndirs) = @_;
    my $base = "$dir/$label";
    my $i = 0;
    my @pairs = map { ("$base/" . ($i++ % $ndirs) . "/$_" => "") } @$leaves;
    push @pairs, $pairs[0], "";
    my $t0 = (times)[0];
    my $w = eval { file_set_contents_many(\@pairs, { mkdir => 1 }) };
    my $cpu = (times)[0] - $t0;
    is($@, "file_set_contents_many: '$pairs[0]' is given twice\n", "$label: the duplicate found");
    ok(!-e $base, '... nothing made');
    return $cpu;
}

# $N leaves of 17 bytes: a counter in letters, in case bits, in bytes with
# their low four bits zero
my @plain = map { sprintf 'f%016x', $_ } 0 .. $N - 1;
my @case = map { my $i = $_; join '', map { ($i >> $_) & 1 ? 'A' : 'a' } 0 .. 16 } 0 .. $N - 1;
my @alpha = map { chr } 0x30, 0x40, 0x60, 0x70, 0x20, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0;
my @lowbits = map { my $i = $_; join '', map { my $c = $alpha[$i % @alpha]; $i = int($i / @alpha); $c } 1 .. 17 }
              0 .. $N - 1;

for my $ndirs (1, 2) {
    my $plain = batch_cpu("plain-$ndirs", \@plain, $ndirs);
    for my $kind ([ case => \@case ], [ lowbits => \@lowbits ]) {
        my ($label, $leaves) = @$kind;
        my $cpu = batch_cpu("$label-$ndirs", $leaves, $ndirs);
        cmp_ok($cpu, '<=', 3 * $plain + 0.3,
               "$N names by $label in $ndirs director" . ($ndirs > 1 ? 'ies' : 'y')
               . ": as fast as ordinary names (${cpu}s, ordinary ${plain}s)");
    }
}

done_testing;
