#!/usr/bin/perl
# PVE::File's helpers in FastFile against their pure-Perl models
# (t/lib/Reference.pm, what the tests compare with), in one run on one
# machine: file_copy against the reference's read-then-write
# (file_get_contents + file_set_contents), safe_read_from of a regular file
# against the reference's 8 KiB sysreads. Sizes 1 KiB, 64 KiB, 1 MiB and
# 4 MiB (OVMF vars), $max = the size. Measured: syscalls per call (strace,
# allocator calls and getpid left out), time per call (median of
# interleaved rounds) on a tmpfs and on the temp dir's filesystem.
#
#   perl -Mblib bench/helpers-copy.pl      (make bench runs it too)
#
# Prints a markdown section to stdout and puts it into results.md (in
# bench-out/, or bench/ with BENCH_UPDATE=1) between its markers,
# replacing that section only.
# BENCH_QUICK=1: fewer rounds.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(shuffle);
use POSIX qw(floor);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";
use BenchOut;
use FFTest ();    # strace_call; without import: no test-only warning hook
use Reference qw(ref_file_copy ref_safe_read_from);
use FastFile qw(file_copy safe_read_from);

$| = 1;
my $KiB = 1024;
my $MiB = 1024 * $KiB;
my @SIZES = (1 * $KiB, 64 * $KiB, 1 * $MiB, 4 * $MiB);
my $ROUNDS = $ENV{BENCH_QUICK} ? 5 : 15;
my $BATCH_SECS = $ENV{BENCH_QUICK} ? 0.01 : 0.05;

sub human { my ($n) = @_; return $n >= $MiB ? ($n / $MiB) . ' MiB' : ($n / $KiB) . ' KiB' }
sub median { my @v = sort { $a <=> $b } @_; return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2 }
sub fmt_time {
    my ($s) = @_;
    my $us = $s * 1e6;
    return $us < 100 ? sprintf('%.1f µs', $us) : $us < 10000 ? sprintf('%.0f µs', $us) : sprintf('%.1f ms', $us / 1000);
}
sub slurp { my ($f) = @_; open my $fh, '<', $f or return ''; local $/; return scalar <$fh> }
sub fs_type { return BenchOut::fs_of($_[0])->{type} }    # stat -f where /proc/mounts has no entry (a chroot)

# config-like bytes
sub payload { my ($n) = @_; my $line = join('', 'a' .. 'z', 'A' .. 'Z', 0 .. 9, "\n") x 1; return substr($line x ($n / length($line) + 1), 0, $n) }

my @where;
if (-d '/dev/shm' && -w _ && fs_type('/dev/shm') eq 'tmpfs') {
    my $d = tempdir('fastfile-helpers-XXXXXX', DIR => '/dev/shm', CLEANUP => 1);
    push @where, [ 'tmpfs', $d ];
}
{
    my $d = tempdir('fastfile-helpers-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    push @where, [ fs_type($d), $d ] unless @where && fs_type($d) eq 'tmpfs';
}

# the contenders: name => sub($dir, $size) returning the code to time
my %fh_of;
my @helpers = (
    [ 'file_copy', sub { my ($d, $s) = @_; sub { file_copy("$d/src-$s", "$d/dst-ff-$s", $s) } },
                   sub { my ($d, $s) = @_; sub { ref_file_copy("$d/src-$s", "$d/dst-ref-$s", $s) } },
      'file_copy($src, $dst, $size)' ],
    [ 'safe_read_from', sub { my ($d, $s) = @_; my $fh = $fh_of{"$d/$s"}; sub { sysseek $fh, 0, 0; safe_read_from($fh, $s, 0, 'f') } },
                        sub { my ($d, $s) = @_; my $fh = $fh_of{"$d/$s"}; sub { sysseek $fh, 0, 0; ref_safe_read_from($fh, $s, 0, 'f') } },
      'sysseek($fh, 0, 0); safe_read_from($fh, $size, 0, $name)' ],
);

for my $w (@where) {
    for my $s (@SIZES) {
        open my $out, '>', "$w->[1]/src-$s" or die "$w->[1]/src-$s: $!\n";
        print {$out} payload($s);
        close $out or die;
        open $fh_of{"$w->[1]/$s"}, '<', "$w->[1]/src-$s" or die;
    }
}

# ------------------------------------------------------------ syscalls

my (%calls, %lists);
my $strace_why = FFTest::strace_why();
unless ($strace_why) {
    my $d = $where[0][1];
    for my $s (@SIZES) {
        for my $case ([ 'file_copy', 'FastFile', "file_copy('$d/src-$s', '$d/t-ff', $s)" ],
                      [ 'file_copy', 'reference', "Reference::ref_file_copy('$d/src-$s', '$d/t-ref', $s)" ],
                      [ 'safe_read_from', 'FastFile', "safe_read_from(\$fh, $s, 0, 'f')" ],
                      [ 'safe_read_from', 'reference', "Reference::ref_safe_read_from(\$fh, $s, 0, 'f')" ]) {
            my ($h, $who, $code) = @$case;
            # once before the markers: what perl loads on a first call is not the helper's
            my $r = FFTest::strace_call($code, setup => "use Reference; open my \$fh, '<', '$d/src-$s' or die; "
                                                        . "$code; sysseek \$fh, 0, 0",
                                        strace => [ '-e', 'trace=!getpid' ]);
            die "strace of $h ($who, $s): $r->{err}\n" unless $r->{ok};
            my @io = map { $_->{name} } FFTest::io_calls($r);
            $calls{$h}{$who}{$s} = scalar @io;
            $lists{$h}{$who}{$s} = \@io;
        }
        print STDERR "helpers-copy: syscalls at ", human($s), " done\n";
    }
}

# ------------------------------------------------------------- timing

# calls per batch, so that a batch of the reference takes about BATCH_SECS
sub calls_for {
    my ($code) = @_;
    my $t0 = clock_gettime(CLOCK_MONOTONIC);
    $code->() for 1 .. 3;
    my $per = (clock_gettime(CLOCK_MONOTONIC) - $t0) / 3;
    my $n = floor($BATCH_SECS / ($per || 1e-6));
    return $n < 1 ? 1 : $n > 2000 ? 2000 : $n;
}

my %time;    # {helper}{where}{size}{who}
for my $w (@where) {
    my ($fs, $d) = @$w;
    for my $h (@helpers) {
        my ($name, $ff, $ref) = @$h;
        for my $s (@SIZES) {
            my %code = (FastFile => $ff->($d, $s), reference => $ref->($d, $s));
            my $n = calls_for($code{reference});
            my %t;
            for (1 .. $ROUNDS) {
                for my $who (shuffle keys %code) {
                    my $c = $code{$who};
                    my $t0 = clock_gettime(CLOCK_MONOTONIC);
                    $c->() for 1 .. $n;
                    push @{ $t{$who} }, (clock_gettime(CLOCK_MONOTONIC) - $t0) / $n;
                }
            }
            $time{$name}{$fs}{$s}{$_} = median(@{ $t{$_} }) for keys %t;
            print STDERR "helpers-copy: $name on $fs at ", human($s), ": $n calls a batch\n";
        }
    }
}

# -------------------------------------------------------------- report

my $out = "## PVE::File helpers (file_copy, safe_read_from)\n\n";
$out .= "Produced by `perl -Mblib bench/helpers-copy.pl` in one run: each helper against its pure-Perl model "
      . "(t/lib/Reference.pm, what t/16-copy.t and t/17-safe-read.t compare with). Calls:\n\n";
$out .= "- **$_->[0]**: `$_->[3]`\n" for @helpers;
$out .= "\nThe reference file_copy reads the source with 8 KiB `sysread`s into a string, then writes "
      . "it (file_set_contents); safe_read_from's reads 8 KiB `sysread`s. Kernel "
      . (split ' ', slurp('/proc/version'))[2] . ", perl $^V, " . POSIX::strftime('%Y-%m-%d %H:%M UTC', gmtime) . ".\n\n";

if (%calls) {
    $out .= "### Syscalls per call (strace; getpid and allocator calls left out)\n\n";
    $out .= "| helper | " . join(' | ', map { human($_) } @SIZES) . " |\n| :-- |" . (' --: |' x @SIZES) . "\n";
    for my $h (map { $_->[0] } @helpers) {
        for my $who (qw(FastFile reference)) {
            $out .= "| $h, $who | " . join(' | ', map { $calls{$h}{$who}{$_} } @SIZES) . " |\n";
        }
    }
    $out .= "\nFastFile's calls at 4 MiB:\n\n";
    $out .= "- $_: " . join(' ', @{ $lists{$_}{FastFile}{ $SIZES[-1] } }) . "\n" for map { $_->[0] } @helpers;
    $out .= "\n";
} else {
    $out .= "(syscalls not counted: $strace_why)\n\n";
}

for my $w (@where) {
    my $fs = $w->[0];
    $out .= "### Time per call on $fs (median of $ROUNDS interleaved rounds; ratio = FastFile / reference)\n\n";
    $out .= "| helper | " . join(' | ', map { human($_) } @SIZES) . " |\n| :-- |" . (' --: |' x @SIZES) . "\n";
    for my $h (map { $_->[0] } @helpers) {
        my $t = $time{$h}{$fs};
        $out .= "| $h, FastFile | " . join(' | ', map { fmt_time($t->{$_}{FastFile}) } @SIZES) . " |\n";
        $out .= "| $h, reference | " . join(' | ', map { fmt_time($t->{$_}{reference}) } @SIZES) . " |\n";
        $out .= "| $h, ratio | " . join(' | ', map { sprintf '%.2fx', $t->{$_}{FastFile} / $t->{$_}{reference} } @SIZES) . " |\n";
    }
    $out .= "\n";
}

$out .= BenchOut::run_time_line('bench/helpers-copy.pl') . "\n";
print $out;

# results.md's section of these helpers (bench-out/, or bench/ with BENCH_UPDATE=1)
print STDERR 'helpers-copy: ', BenchOut::wrote(BenchOut::put_section('results.md', 'helpers-copy', $out)), "\n";
