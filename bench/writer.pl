#!/usr/bin/perl
# FastFile::Writer vs IO::File print + close + rename: a 1 MiB file built from
# 16,000 print calls (lines of 65/66 bytes, the t/65-writer.t data).
# Usage: perl -Mblib bench/writer.pl [DIR [ROUNDS]]  (DIR defaults to a new temp dir)
use strict; use warnings;
use Time::HiRes qw(time);
use IO::File;
use FastFile::Writer;

my ($dir, $rounds) = @ARGV;
$rounds //= 200;
$dir //= do { require File::Temp; File::Temp::tempdir(CLEANUP => 1) };
my @lines = map { sprintf('%06d ', $_) . ('x' x ($_ < 8576 ? 58 : 57)) . "\n" } 0 .. 15999;
die unless length(join '', @lines) == 1048576;

my %impl = (
    'FastFile::Writer' => sub {
        my $w = FastFile::Writer->new("$dir/ff");
        $w->print($_) for @lines;
        $w->commit;
    },
    'IO::File + rename' => sub {
        my $tmp = "$dir/io.tmp.$$";
        my $fh = IO::File->new($tmp, O_WRONLY | O_CREAT | O_EXCL) or die "open: $!";
        $fh->print($_) or die "print: $!" for @lines;
        $fh->close or die "close: $!";
        rename $tmp, "$dir/io" or die "rename: $!";
    },
    'IO::File, builtin print' => sub {
        my $tmp = "$dir/bi.tmp.$$";
        my $fh = IO::File->new($tmp, O_WRONLY | O_CREAT | O_EXCL) or die "open: $!";
        print {$fh} $_ or die "print: $!" for @lines;
        close $fh or die "close: $!";
        rename $tmp, "$dir/bi" or die "rename: $!";
    },
);
my $mode = $ENV{ONLY};
if ($mode) { $impl{$mode}->() for 1 .. $rounds; exit }
my %best;
for my $round (1 .. $rounds) {
    for my $name (sort keys %impl) {
        my $t0 = time; $impl{$name}->(); my $dt = time - $t0;
        push @{ $best{$name} }, $dt;
    }
}
for my $name (sort keys %impl) {
    my @t = sort { $a <=> $b } @{ $best{$name} };
    printf "%-20s median %.3f ms  min %.3f ms  (%d rounds)\n", $name, 1000 * $t[@t / 2], 1000 * $t[0], $rounds;
}
my ($f, $i, $b) = map { my @t = sort { $a <=> $b } @$_; $t[@t / 2] } @best{'FastFile::Writer', 'IO::File + rename', 'IO::File, builtin print'};
printf "ratio IO::File->print / FastFile::Writer (median): %.2f\n", $i / $f;
printf "ratio builtin print to IO::File / FastFile::Writer (median): %.2f\n", $b / $f;
