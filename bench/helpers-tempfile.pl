#!/usr/bin/perl
# PVE::File's helpers file_read_last_line, tempfile_contents, tempfile and
# create_owned_file_fh: FastFile against the reference models of
# t/lib/Reference.pm, in one run on one machine. Prints markdown to stdout
# and puts it in results.md (in bench-out/, or bench/ with BENCH_UPDATE=1)
# between its markers, replacing that section only.
#
#   perl Makefile.PL && make && make fusefs   (fusefs for the FUSE table)
#   perl -Mblib bench/helpers-tempfile.pl
#
# Measured: syscalls per call (strace, the allocator's left out) and the
# write(2)/read(2) among them; time per call (the median of interleaved
# batches, as a ratio); FUSE WRITE requests of tempfile_contents on
# t/fusefs (fastfs, max_write 128 KiB). BENCH_QUICK=1: fewer batches.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(sum);
use POSIX qw(strftime);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";
use BenchOut;
use Reference qw(ref_read_last_line ref_tempfile ref_tempfile_contents ref_create_owned_file_fh);
use FastFile qw(file_read_last_line tempfile tempfile_contents create_owned_file_fh);
use IO::File ();

$| = 1;
my $QUICK = $ENV{BENCH_QUICK};
my $BATCHES = $QUICK ? 5 : 15;
my $BATCH_SECS = $QUICK ? 0.01 : 0.04;
my $KiB = 1024;
my $MiB = $KiB * $KiB;
my @SIZES = (1 * $KiB, 64 * $KiB, 1 * $MiB, 4 * $MiB);
my $ALLOC = qr/\A(?:brk|mmap|munmap|mremap|mprotect|madvise)\z/;

my $dir = tempdir('ffbench-XXXXXX', TMPDIR => 1, CLEANUP => 1);
sub progress { print STDERR "helpers-tempfile: @_\n" }
sub human { my ($n) = @_; return $n >= $MiB ? ($n / $MiB) . ' MiB' : ($n / $KiB) . ' KiB' }

# a log of $size bytes: 80-byte lines, the last one "TASK OK"
sub make_log {
    my ($file, $size) = @_;
    my $line = ('l' x 79) . "\n";
    my $body = $line x int(($size - 8) / 80);
    open my $fh, '>', $file or die "$file: $!";
    print {$fh} $body, 'x' x ($size - 8 - length $body), "\nTASK OK\n";
    close $fh or die "$file: $!";
}

# What each helper runs: name => [ FastFile code, reference code ] (perl
# source, run in this process for the time and in a traced child for the
# syscalls; $F is the file, $D the data, $d the directory)
my %CODE = (
    last_line => [ 'file_read_last_line($F)', 'Reference::ref_read_last_line($F)' ],
    contents  => [ 'my ($p, $fh) = tempfile_contents($D, undef, dir => $d); close $fh',
                   'my ($p, $fh) = Reference::ref_tempfile_contents($D, undef, dir => $d); close $fh' ],
    tempfile  => [ 'my $fh = tempfile(undef, dir => $d); close $fh',
                   'my $fh = Reference::ref_tempfile(undef, dir => $d); close $fh' ],
    owned     => [ 'my $fh = create_owned_file_fh("$d/sub/owned", $<); close $fh; unlink "$d/sub/owned"',
                   'my $fh = Reference::ref_create_owned_file_fh("$d/sub/owned", $<); close $fh; unlink "$d/sub/owned"' ],
);

# syscalls of one call in a child perl under strace: (all, writes, reads)
sub syscalls {
    my ($code, $file, $data_size) = @_;
    my $log = "$dir/strace.log";
    my @m = map { "/nonexistent-ffbench-$_-$$" } qw(a b);
    my $child = join ';', 'use FastFile qw(:all); use Reference (); use IO::File ()',
        'our ($F, $d) = @ARGV[0, 1]; our $D = "d" x $ARGV[2]', 'mkdir "$d/sub"',
        "chdir '$m[0]'", $code, "chdir '$m[1]'";
    system('strace', '-f', '-qq', '-o', $log, $^X, '-Mblib', "-I$FindBin::Bin/../t/lib", '-e', $child,
           $file // '', $dir, $data_size // 0) == 0 or die "strace: $?\n";
    open my $fh, '<', $log or die "$log: $!";
    my ($in, @calls) = (0);
    while (<$fh>) {
        if (/\Q$m[0]\E/) { $in = 1; next }
        if (/\Q$m[1]\E/) { $in = 0; next }
        push @calls, $1 if $in && /^\d+\s+(\w+)\(/;
    }
    @calls = grep { !/$ALLOC/ } @calls;
    unlink "$dir/sub/owned";
    return (scalar @calls, scalar(grep { /\A(?:write|writev|pwrite64)\z/ } @calls),
            scalar(grep { /\A(?:read|pread64)\z/ } @calls));
}

# median seconds per call of each code, in interleaved batches
sub per_call_times {
    my ($codes, $file, $data) = @_;
    our ($F, $D, $d) = ($file, $data, $dir);
    mkdir "$dir/sub";
    my @subs = map { eval "sub { $_ }" or die $@ } @$codes;
    my @n = map {
        my ($sub, $k, $t0) = ($_, 0, clock_gettime(CLOCK_MONOTONIC));
        $sub->(), $k++ while clock_gettime(CLOCK_MONOTONIC) - $t0 < $BATCH_SECS / 4;
        $k * 4 || 1
    } @subs;
    my @t = map { [] } @subs;
    for (1 .. $BATCHES) {
        for my $i (0 .. $#subs) {
            my $t0 = clock_gettime(CLOCK_MONOTONIC);
            $subs[$i]->() for 1 .. $n[$i];
            push @{ $t[$i] }, (clock_gettime(CLOCK_MONOTONIC) - $t0) / $n[$i];
        }
    }
    return map { my @s = sort { $a <=> $b } @$_; $s[$#s / 2] } @t;
}

sub us { return sprintf '%.1f', $_[0] * 1e6 }

my @rows;
sub row {
    my ($helper, $size_label, $name, $file, $data) = @_;
    progress("$helper $size_label");
    my @fast = syscalls($CODE{$name}[0], $file, defined $data ? length $data : 0);
    my @ref = syscalls($CODE{$name}[1], $file, defined $data ? length $data : 0);
    my ($tf, $tr) = per_call_times($CODE{$name}, $file, $data);
    push @rows, sprintf '| %s | %s | %d (%d w, %d r) | %d (%d w, %d r) | %s | %s | %.2fx |',
        $helper, $size_label, @fast, @ref, us($tf), us($tr), $tr / $tf;
}

for my $size (@SIZES) {
    row('tempfile_contents', human($size), 'contents', undef, 'd' x $size);
}
for my $size (@SIZES, 100 * $MiB) {
    my $file = "$dir/log-$size";
    if ($size > 4 * $MiB) {       # sparse, lines at the end: a long task log
        open my $fh, '>', $file or die;
        truncate $fh, $size;
        seek $fh, 0, 2;
        print {$fh} "line\nTASK OK\n";
        close $fh;
    } else {
        make_log($file, $size);
    }
    row('file_read_last_line', human($size), 'last_line', $file);
}
row('tempfile', '-', 'tempfile');
row('create_owned_file_fh', '-', 'owned');

my $md = "## PVE::File's helpers (tempfile_contents, file_read_last_line, tempfile, create_owned_file_fh)\n\n"
    . 'Generated by `perl -Mblib bench/helpers-tempfile.pl` on ' . strftime('%Y-%m-%d', gmtime)
    . ', load average at start ' . ((split ' ', do { open my $l, '<', '/proc/loadavg'; <$l> // '?' })[0]) . ".\n"
    . "FastFile against the reference models in t/lib/Reference.pm, same run. Syscalls per call\n"
    . "(strace, the allocator's left out; w: write(2)/writev, r: read/pread); time per call in\n"
    . "microseconds, the median of $BATCHES interleaved batches, on the temp dir's filesystem\n"
    . "(tempfile_contents and tempfile with `dir` set to it). Ratio: reference time / FastFile time.\n\n"
    . "| helper | size | FastFile syscalls | reference syscalls | FastFile us | reference us | ratio |\n"
    . "|---|---|---|---|---|---|---|\n"
    . join("\n", @rows) . "\n";

# FUSE: tempfile_contents into a fastfs mount (no O_TMPFILE there: both
# take the named file), WRITE requests at max_write 128 KiB
{
    require FastFS;
    my $why = FastFS::available();
    if ($why) {
        $md .= "\nFUSE table skipped: $why\n";
    } else {
        my $fs = FastFS->mount(max_write => 128 * $KiB);
        my @fuse;
        for my $size (@SIZES) {
            my $data = 'f' x $size;
            my @req;
            for my $fn (\&tempfile_contents, \&ref_tempfile_contents) {
                $fs->control('reset');
                my $ok = eval { my ($p, $fh) = $fn->($data, undef, dir => $fs->dir); close $fh; 1 };
                (my $err = $@) =~ s/\n\z//;
                push @req, $fs->counters->{write_requests} . ($ok ? '' : " (dies: $err)");
            }
            push @fuse, sprintf '| %s | %s | %s |', human($size), @req;
        }
        $fs->unmount;
        $md .= "\ntempfile_contents on FUSE (t/fusefs, max_write 128 KiB; O_TMPFILE unsupported there,\n"
            . "so both make the named file `<dir>/.tmpfile.<pid>` and unlink it at once): WRITE requests\n"
            . "per call. fastfs forgets an unlinked file (hard_remove: no .fuse_hidden rename), so the\n"
            . "returned /proc path is stale for both (ESTALE): a tempfile on FUSE is not a place either\n"
            . "works; the counts show what each sends.\n\n"
            . "| size | FastFile | reference |\n|---|---|---|\n" . join("\n", @fuse) . "\n";
    }
}

$md .= "\n" . BenchOut::run_time_line('bench/helpers-tempfile.pl') . "\n";
print $md;
progress(BenchOut::wrote(BenchOut::put_section('results.md', 'helpers-tempfile', $md)));
