#!/usr/bin/perl
# Side-by-side benchmark of FastFile against the writers it replaces, in one
# run on one machine: `make bench` (which builds the module and the fastfs
# FUSE filesystem first). Prints markdown tables to stdout and writes them to
# results.md, with a plot in amplification.svg, in bench-out/ (BENCH_OUT;
# the tracked copies in bench/ with BENCH_UPDATE=1: bench/lib/BenchOut.pm);
# progress goes to stderr.
#
# Writers: FastFile::file_set_contents; our pure-Perl reimplementations of
# the print-era and syswrite-era (pve-devel v2 patch) file_set_contents; a
# tiny C program doing only open/write/close/rename (the floor, bench/bare.c,
# compiled here with cc -O2); Path::Tiny spew_raw and File::Slurp write_file
# (atomic) when installed. Readers: file_get_contents against an 8 KiB
# sysread loop.
#
# Measured: time per call (median of interleaved batches; ratios), syscalls
# and write(2) calls per call (strace), FUSE write requests and modeled bytes
# stored at max_write 4 KiB and 128 KiB (fastfs), peak RSS for 256 MiB.
#
# Environment: BENCH_DIR=dir to time on another filesystem (default: the
# temp dir), BENCH_QUICK=1 for a fast, rough run (fewer batches).
use strict;
use warnings;
use Config;
use Cwd qw(abs_path);
use File::Spec;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(max min shuffle sum);
use POSIX qw(ceil floor strftime);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use IPC::Open2 qw(open2);

use lib "$FindBin::Bin/lib", "$FindBin::Bin/../t/lib";
use BenchWriters;
use BenchSVG;
use BenchOut;
use FFTest ();    # without import: no test-only warning hook here
use FastFS;
use FastFile ();

$| = 1;
my $T_START = clock_gettime(CLOCK_MONOTONIC);
my $LOAD_START = (split ' ', slurp('/proc/loadavg'))[0] // '?';
my $QUICK   = $ENV{BENCH_QUICK};

my $KiB = 1024;
my $MiB = 1024 * 1024;
my @SIZES      = map { $_ * $KiB } 1, 4, 16, 64, 256, 1024;
my $BIG        = 64 * $MiB;            # throughput: fewer iterations
my @FUSE_SIZES = map { 2**$_ * $KiB } 0 .. 10;    # the seed's 1 .. 1024 KiB
my @MAX_WRITES = (4 * $KiB, 128 * $KiB);
my @READ_SIZES = (4 * $KiB, 64 * $KiB, $MiB);
my $RSS_SIZE   = 256 * $MiB;
my $BATCHES    = $QUICK ? 5 : 15;      # timed batches per size, median taken
my $BATCH_SECS = $QUICK ? 0.01 : 0.03; # target length of one batch (tmpfs)
my $DISK_BATCH_SECS = $QUICK ? 0.02 : 0.05;   # on a disk: longer, to average its hiccups
my $BIG_BATCHES = $QUICK ? 3 : 5;      # 64 MiB: rounds ...
my $BIG_CALLS   = $QUICK ? 1 : 2;      # ... of this many calls
my @ALLOC = qw(mmap munmap brk mremap);   # allocator noise, not counted

sub progress {
    my $t = clock_gettime(CLOCK_MONOTONIC) - $T_START;
    printf STDERR "[%5.1fs] %s\n", $t, join '', @_;
}

sub human {
    my ($n) = @_;
    return $n % $MiB == 0 ? ($n / $MiB) . ' MiB' : $n % $KiB == 0 ? ($n / $KiB) . ' KiB' : "$n B";
}

sub fmt_time {
    my ($s) = @_;
    return 'n/a' unless defined $s;
    my $us = $s * 1e6;
    return sprintf('%.2f µs', $us) if $us < 10;
    return sprintf('%.1f µs', $us) if $us < 100;
    return sprintf('%.0f µs', $us) if $us < 10000;
    return sprintf('%.1f ms', $us / 1000);
}

sub fmt_ratio { defined $_[0] ? sprintf('%.2fx', $_[0]) : 'n/a' }

sub fmt_kib {
    my ($b) = @_;
    my $k = $b / $KiB;
    my $s = $k == int($k) ? "$k" : sprintf('%.1f', $k);
    1 while $s =~ s/^(\d+)(\d{3})/$1,$2/;
    return "$s KiB";
}

sub median {
    my @v = sort { $a <=> $b } @_;
    return undef unless @v;
    return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}

sub quantile {
    my ($q, @v) = @_;
    @v = sort { $a <=> $b } @v;
    my $i = $q * $#v;
    my $f = floor($i);
    return $v[$f] + ($i - $f) * (($v[$f + 1] // $v[$f]) - $v[$f]);
}

sub md_table {
    my ($head, @rows) = @_;
    my @align = map { $_ == 0 ? ':--' : '--:' } 0 .. $#$head;
    return join('', map { '| ' . join(' | ', @$_) . " |\n" } $head, \@align, @rows);
}

sub md_table_left {
    my ($head, @rows) = @_;
    return join('', map { '| ' . join(' | ', @$_) . " |\n" } $head, [ map { ':--' } @$head ], @rows);
}

sub run_capture {
    my (@cmd) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!\n";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    my $out = do { local $/; <$fh> } // '';
    close $fh;
    return ($? >> 8, $out);
}

sub slurp {
    my ($f) = @_;
    open my $fh, '<', $f or return '';
    local $/;
    return scalar <$fh>;
}

# ---------------------------------------------------------------- setup ---

# filesystem type, device and mount point holding $path (BenchOut: from
# stat -f where /proc/mounts lists nothing above it, as in a chroot)
sub fs_of { return BenchOut::fs_of(@_) }

my $work = tempdir('fastfile-bench-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my @notes;

# Where writers are timed: a tmpfs first (the writer's own cost: CPU and
# syscalls, no device), then the temp dir's filesystem (what a disk adds).
my @where;    # {key, dir, fs}
if ($ENV{BENCH_DIR}) {
    my $d = tempdir('fastfile-bench-XXXXXX', DIR => $ENV{BENCH_DIR}, CLEANUP => 1);
    push @where, { dir => $d, fs => fs_of($d) };
} else {
    my $tfs = fs_of($work);
    if ($tfs->{type} ne 'tmpfs' && -d '/dev/shm' && -w _ && fs_of('/dev/shm')->{type} eq 'tmpfs') {
        my $d = tempdir('fastfile-bench-XXXXXX', DIR => '/dev/shm', CLEANUP => 1);
        push @where, { dir => $d, fs => fs_of($d) };
    } elsif ($tfs->{type} ne 'tmpfs') {
        push @notes, 'No writable tmpfs (/dev/shm): times are for the temp dir only.';
    }
    push @where, { dir => $work, fs => $tfs };
}
$_->{key} = $_->{fs}{type} for @where;
$_->{batch_secs} = $_->{fs}{type} eq 'tmpfs' ? $BATCH_SECS : $DISK_BATCH_SECS for @where;
$where[1]{key} .= ' (2)' if @where > 1 && $where[0]{key} eq $where[1]{key};
my $dir = $where[0]{dir};    # strace and RSS children write here

my @writers = @BenchWriters::WRITERS;    # [name, label, sub]
my %label   = map { $_->[0] => $_->[1] } @writers;
for my $mod (qw(Path::Tiny File::Slurp)) {
    push @notes, "$mod is not installed: its column is left out."
        unless $BenchWriters::VERSION_OF{$mod};
}

# the floor: bare.c, built here
my $bare = "$work/bare";
{
    my ($rc, $out) = run_capture('cc', '-O2', '-o', $bare, "$FindBin::Bin/bare.c");
    if ($rc) {
        push @notes, "bare C left out: cc -O2 bench/bare.c failed: " . (split /\n/, $out)[0];
        undef $bare;
    } else {
        $label{bare} = 'bare C';
        progress('built bench/bare.c with cc -O2');
    }
}
my @contenders = (($bare ? 'bare' : ()), map { $_->[0] } @writers);
my %code = map { $_->[0] => $_->[2] } @writers;

my %data = map { $_ => BenchWriters::payload($_) } @SIZES, @FUSE_SIZES, $BIG;

# ------------------------------------------------------------- timing -----

# bare C runs as one co-process per file size and directory, which makes
# $n calls whenever it reads the number $n, and answers with the time taken
my %server;    # "$in $size" => [pid, reader, writer]
sub bare_batch {
    my ($in, $size, $n) = @_;
    my $s = $server{"$in $size"} //= do {
        my ($rd, $wr);
        my $pid = open2($rd, $wr, $bare, 'serve', "$in/w-bare", $size, 0);
        [ $pid, $rd, $wr ];
    };
    my ($pid, $rd, $wr) = @$s;
    print {$wr} "$n\n";
    $wr->flush;
    my $ns = <$rd>;
    die "bare serve: no answer\n" unless defined $ns && $ns =~ /^(\d+)$/;
    return $1 / 1e9 / $n;
}
sub bare_done {
    for my $key (keys %server) {
        my ($pid, $rd, $wr) = @{ delete $server{$key} };
        close $wr;
        close $rd;
        waitpid $pid, 0;
    }
}

# Runs $n calls of contender $name with $size bytes in $in; returns seconds
# per call.
sub timed_calls {
    my ($in, $name, $size, $n) = @_;
    my $file = "$in/w-$name";
    return bare_batch($in, $size, $n) if $name eq 'bare';
    my ($w, $d) = ($code{$name}, $data{$size});
    my $t0 = clock_gettime(CLOCK_MONOTONIC);
    $w->($file, $d) for 1 .. $n;
    return (clock_gettime(CLOCK_MONOTONIC) - $t0) / $n;
}

# Interleaved batches: each round runs every contender once, in shuffled
# order; the result is the median of the per-call times of the batches.
sub time_side_by_side {
    my ($names, $run, $n, $batches) = @_;
    my %t;
    $run->($_, 1) for @$names;    # warm up (files exist, modules loaded)
    srand(42);
    for my $b (1 .. $batches) {
        push @{ $t{$_} }, $run->($_, $n) for shuffle @$names;
    }
    return { map {
        my @v = @{ $t{$_} };
        ($_ => { median => median(@v), min => min(@v),
                 iqr => (quantile(0.75, @v) - quantile(0.25, @v)) / median(@v) })
    } @$names };
}

# how many calls make a batch of about $BATCH_SECS, judged by FastFile
sub calibrate {
    my ($run, $secs) = @_;
    my ($n, $t) = (1, 0);
    while (1) {
        $t = $run->($n) * $n;
        last if $t >= $secs / 4 || $n >= 1e6;
        $n *= 4;
    }
    return max(1, min(1e6, int($n * $secs / ($t || 1e-9))));
}

my (%time, %iters);    # $time{$key}{$size}{$name} = {median, iqr}
for my $w (@where) {
    for my $size (@SIZES, $BIG) {
        my $big = $size == $BIG;
        my $n = $big ? $BIG_CALLS
              : calibrate(sub { timed_calls($w->{dir}, 'fastfile', $size, $_[0]) }, $w->{batch_secs});
        my $batches = $big ? $BIG_BATCHES : $BATCHES;
        progress("timing writers on $w->{key}, ", human($size), ": $batches rounds of $n call(s) each");
        $iters{ $w->{key} }{$size} = "$batches x $n";
        $time{ $w->{key} }{$size} = time_side_by_side(\@contenders,
            sub { timed_calls($w->{dir}, $_[0], $size, $_[1]) }, $n, $batches);
        bare_done();
        unlink glob "$w->{dir}/w-*";
    }
}

# readers: the same files read by both, from the page cache
my %rtime;    # $rtime{$key}{$size}{$reader}
for my $w (@where) {
    for my $size (@READ_SIZES) {
        my $file = "$w->{dir}/r-$size";
        FastFile::file_set_contents($file, $data{$size});
        for my $r (@BenchWriters::READERS) {
            die "reader $r->[0] read wrong bytes\n" unless $r->[2]->($file, $MiB) eq $data{$size};
        }
        my $run = sub {
            my ($name, $n) = @_;
            my $rd = BenchWriters::reader($name);
            my $t0 = clock_gettime(CLOCK_MONOTONIC);
            $rd->($file, $MiB) for 1 .. $n;
            return (clock_gettime(CLOCK_MONOTONIC) - $t0) / $n;
        };
        my $n = calibrate(sub { $run->('ff_reader', $_[0]) }, $BATCH_SECS);
        progress("timing readers on $w->{key}, ", human($size), ": $BATCHES rounds of $n call(s) each");
        $rtime{ $w->{key} }{$size} = time_side_by_side([ map { $_->[0] } @BenchWriters::READERS ],
            $run, $n, $BATCHES);
    }
}

# ------------------------------------------------------------- strace -----

my $strace = FFTest::which('strace');
push @notes, 'strace is not installed: the syscall tables are left out.' unless $strace;

my @INC_ARGS = FFTest::inc_args();    # this build and t/lib, for the traced children

# The syscalls of one call, after one untraced warm-up call: the names of
# every syscall between two marker chdir()s the program never makes.
sub trace_one {
    my (@cmd) = @_;
    my $log = "$work/strace.log";
    unlink $log;
    my ($rc, $out) = run_capture($strace, '-qq', '-o', $log, @cmd);
    die "strace @cmd[0..1] failed: $out" if $rc;
    my ($in, @calls) = (0);
    for (split /\n/, slurp($log)) {
        if (/^chdir\("\/(?:bench|bare)-mark-start"/) { $in = 1; next }
        last if /^chdir\("\/(?:bench|bare)-mark-end"/;
        push @calls, $1 if $in && /^(\w+)\(/;
    }
    return \@calls;
}

my $TRACE_WRITER = <<'PERL';
my ($name, $file, $size) = @ARGV;
my $w = BenchWriters::writer($name);
my $d = BenchWriters::payload($size);
$w->($file, $d);
chdir '/bench-mark-start';
$w->($file, $d);
chdir '/bench-mark-end';
PERL

my $TRACE_READER = <<'PERL';
my ($name, $file) = @ARGV;
my $r = BenchWriters::reader($name);
my $d = $r->($file, 1048576);
chdir '/bench-mark-start';
$d = $r->($file, 1048576);
chdir '/bench-mark-end';
PERL

sub summarize {
    my ($calls) = @_;
    my %alloc = map { $_ => 1 } @ALLOC;
    my @io = grep { !$alloc{$_} } @$calls;
    my %n;
    $n{$_}++ for @io;
    my $seen = {};
    my $mix = join ', ', map { $n{$_} > 1 ? "$_ x$n{$_}" : $_ } grep { !$seen->{$_}++ } @io;
    return { total => scalar @io, writes => scalar(grep { $_ eq 'write' } @io),
             reads => scalar(grep { $_ eq 'read' } @io),
             alloc => @$calls - @io, mix => $mix };
}

my (%sys, %rsys);
if ($strace) {
    for my $size (@SIZES) {
        progress("strace, ", human($size));
        for my $name (@contenders) {
            my $file = "$dir/s-$name";
            my $calls = $name eq 'bare'
                ? trace_one($bare, 'trace', $file, $size, 1)
                : trace_one($^X, @INC_ARGS, '-MBenchWriters', '-e', $TRACE_WRITER, $name, $file, $size);
            $sys{$size}{$name} = summarize($calls);
        }
    }
    for my $size (@READ_SIZES) {
        for my $r (@BenchWriters::READERS) {
            $rsys{$size}{$r->[0]} = summarize(
                trace_one($^X, @INC_ARGS, '-MBenchWriters', '-e', $TRACE_READER, $r->[0], "$dir/r-$size"));
        }
    }
    unlink glob "$dir/s-*";
}

# --------------------------------------------------------------- FUSE -----

my %fuse;    # $fuse{$max_write}{$size}{$name} = {requests, stored, bytes}
my $fuse_why = FastFS::available();
if ($fuse_why) {
    push @notes, "FUSE tables left out: fastfs is not available here ($fuse_why).";
} else {
    for my $mw (@MAX_WRITES) {
        progress("FUSE write requests at max_write ", human($mw));
        my $fs = FastFS->mount(max_write => $mw);
        for my $size (@FUSE_SIZES) {
            for my $name (@contenders) {
                my $file = $fs->dir . "/f-$name";
                $fs->reset;
                if ($name eq 'bare') {
                    my ($rc, $out) = run_capture($bare, 'rss', $file, $size, 1);
                    die "bare on fastfs: $out" if $rc;
                } else {
                    $code{$name}->($file, $data{$size});
                }
                my $c = $fs->counters;
                $fuse{$mw}{$size}{$name} = { requests => $c->{write_requests},
                    stored => $c->{bytes_stored}, bytes => $c->{write_bytes} };
            }
        }
        $fs->unmount;
    }
}

# ---------------------------------------------------------------- RSS -----

my %rss;    # name => {peak, delta} in KiB
{
    my $code = <<'PERL';
my ($name, $file, $size) = @ARGV;
my $d;
BenchWriters::build_in_place(\$d, $size);
BenchWriters::writer($name)->($file, $d) if $name ne 'baseline';
unlink $file;
print BenchWriters::vm_hwm(), "\n";
PERL
    for my $name ('baseline', map { $_->[0] } @writers) {
        progress("peak RSS writing ", human($RSS_SIZE), ": ", $label{$name} // $name);
        my ($rc, $out) = run_capture($^X, @INC_ARGS, '-MBenchWriters', '-e', $code,
                                     $name, "$dir/m-$name", $RSS_SIZE);
        die "RSS child $name failed: $out" if $rc || $out !~ /^(\d+)\s*\z/;
        $rss{$name} = { peak => $1 };
    }
    if ($bare) {
        for my $n (0, 1) {
            my ($rc, $out) = run_capture($bare, 'rss', "$dir/m-bare", $RSS_SIZE, $n);
            die "bare rss failed: $out" if $rc || $out !~ /^(\d+)\s*\z/;
            $rss{ $n ? 'bare' : 'bare-baseline' } = { peak => $1 };
        }
        unlink "$dir/m-bare";
        $rss{bare}{delta} = $rss{bare}{peak} - $rss{'bare-baseline'}{peak};
    }
    $rss{$_->[0]}{delta} = $rss{$_->[0]}{peak} - $rss{baseline}{peak} for @writers;
}

# ------------------------------------------------------------ machine -----

sub machine {
    my $cpu = (slurp('/proc/cpuinfo') =~ /^model name\s*:\s*(.+)$/m)[0] // 'unknown';
    my $ncpu = `nproc 2>/dev/null` || '?';
    chomp $ncpu;
    my $kernel = `uname -srm 2>/dev/null` || '?';
    chomp $kernel;
    my $mem = (slurp('/proc/meminfo') =~ /^MemTotal:\s*(\d+)/m)[0];
    my $cc = (split /\n/, `cc --version 2>/dev/null`)[0] // '?';
    my $st = $strace ? (split /\n/, `$strace -V 2>/dev/null`)[0] : 'not installed';
    my $tmp = fs_of($work);
    return (
        [ 'CPU', "$cpu (nproc: $ncpu)" ],
        [ 'memory', $mem ? sprintf('%.1f GiB', $mem / 1024 / 1024) : '?' ],
        [ 'kernel', $kernel ],
        [ 'temp dir', "$tmp->{path}: $tmp->{type} ($tmp->{dev} on $tmp->{mnt})" ],
        (map { [ "timed files, $_->{key}", "$_->{fs}{path} ($_->{fs}{dev} on $_->{fs}{mnt}: $_->{fs}{opts})" ] } @where),
        [ 'perl', sprintf('%vd, %s%s', $^V, $Config{archname},
                          $Config{useithreads} ? ', ithreads' : '') ],
        [ 'FastFile', $FastFile::VERSION ],
        [ 'Path::Tiny / File::Slurp', join(' / ', map { $BenchWriters::VERSION_OF{$_} // 'absent' }
                                           'Path::Tiny', 'File::Slurp') ],
        [ 'C compiler (bare C)', "$cc, -O2" ],
        [ 'strace', $st ],
        [ 'load average (1 min) at start / end', "$LOAD_START / " . ((split ' ', slurp('/proc/loadavg'))[0] // '?') ],
        [ 'date', strftime('%Y-%m-%d %H:%M:%S %Z', localtime) ],
    );
}

# ------------------------------------------------------------- report -----

my @md;
push @md, "# FastFile benchmark results\n",
    "Produced by `make bench` (bench/compare.pl) in one run on one machine; every ratio compares\n"
  . "numbers measured side by side in that run. Writers:\n\n"
  . "- **FastFile**: `FastFile::file_set_contents`.\n"
  . "- **syswrite-era**: pure-Perl reimplementation of Proxmox VE's `file_set_contents` after the\n"
  . "  v2 patch of the pve-devel thread: `print` into an in-memory handle (copies the data), then a\n"
  . "  `syswrite` loop on a `sysopen(O_WRONLY|O_CREAT)` handle, `close`, `rename`.\n"
  . "- **print-era**: the same before the patch: `IO::File` (sysopen) + `print` (PerlIO's 8 KiB\n"
  . "  buffer) + `close` + `rename`.\n"
  . ($bare ? "- **bare C**: bench/bare.c (cc -O2): `open(O_EXCL)`, `write`, `close`, `rename` in a C loop;\n"
           . "  the floor no library can go below.\n" : '')
  . ($BenchWriters::VERSION_OF{'Path::Tiny'} ? "- **Path::Tiny spew_raw**: `path(\$f)->spew_raw(\$data)` (`:unix` layer, flock, temp + rename).\n" : '')
  . ($BenchWriters::VERSION_OF{'File::Slurp'} ? "- **File::Slurp atomic**: `write_file(\$f, {atomic => 1, binmode => ':raw'}, \$data)`\n"
           . "  (data passed by value, as usually called).\n" : '')
  . "\nData: config-like text (64-byte lines). Sizes are KiB = 1024 bytes.\n";

push @md, "## Machine\n", md_table([ 'item', 'value' ], machine());

# time
my @cols = @contenders;
push @md, "## Time per call\n",
    "Median over interleaved rounds: each round runs every writer once, in shuffled order, for the\n"
  . "same number of calls (bare C runs as one process per size that times its own loop); each\n"
  . "call replaces the file the previous one wrote. `spread` is the largest interquartile range of\n"
  . "a writer in that row, relative to its median. "
  . (@where > 1 ? "Timed twice: on $where[0]{key} (the writer's own cost:\n"
                  . "CPU and syscalls, no device) and on $where[1]{key}, the temp dir's filesystem (what the disk adds).\n"
                : "Timed on $where[0]{key}.\n")
  . sprintf("Batches last about %g ms on tmpfs and %g ms elsewhere; 64 MiB: %d rounds of %d call(s).\n",
            1000 * $BATCH_SECS, 1000 * $DISK_BATCH_SECS, $BIG_BATCHES, $BIG_CALLS)
  . ($bare ? "bare C builds its temp name from the file's on every call (its `.tmp.<pid>` once), as FastFile\n"
           . "does (its pid kept without a `getpid(2)` a call); the Perl writers build `\"\$file.tmp.\$\$\"` on every\n"
           . "call, and their `\$\$` costs a `getpid(2)` (perl does not cache it).\n" : '');
for my $w (@where) {
    my $T = $time{ $w->{key} };
    my @rows;
    for my $size (@SIZES, $BIG) {
        my $t = $T->{$size};
        push @rows, [ human($size), (map { fmt_time($t->{$_}{median}) } @cols),
                      sprintf('%.0f%%', 100 * max(map { $t->{$_}{iqr} } @cols)), $iters{ $w->{key} }{$size} ];
    }
    push @md, "### $w->{key}: time per call\n",
        md_table([ 'size', (map { $label{$_} } @cols), 'spread', 'rounds x calls' ], @rows);
    my @r1 = map { my $s = $_; [ human($s), map { fmt_ratio($T->{$s}{$_}{median} / $T->{$s}{fastfile}{median}) } @cols ] }
        @SIZES, $BIG;
    push @md, "\n### $w->{key}: time ratio to FastFile (lower is faster; FastFile = 1.00x)\n",
        md_table([ 'size', map { $label{$_} } @cols ], @r1);
    if ($bare) {
        my @r2 = map { my $s = $_; [ human($s), (map { fmt_ratio($T->{$s}{$_}{median} / $T->{$s}{bare}{median}) } @cols),
                                     fmt_ratio($T->{$s}{fastfile}{min} / $T->{$s}{bare}{min}) ] }
            @SIZES, $BIG;
        push @md, "\n### $w->{key}: time ratio to bare C (bare C = 1.00x)\n",
            "The last column compares the fastest batch of each instead of the medians: less sensitive to\n"
          . "other load on the machine.\n\n",
            md_table([ 'size', (map { $label{$_} } @cols), 'FastFile, fastest batches' ], @r2);
    }
    my @r3 = map { [ $label{$_}, fmt_time($T->{$BIG}{$_}{median}),
                     sprintf('%.0f MiB/s', 64 / $T->{$BIG}{$_}{median}),
                     fmt_ratio($T->{$BIG}{$_}{median} / $T->{$BIG}{fastfile}{median}),
                     ($bare ? fmt_ratio($T->{$BIG}{$_}{median} / $T->{$BIG}{bare}{median}) : ()) ] } @cols;
    push @md, "\n### $w->{key}: throughput at 64 MiB per call\n",
        md_table([ 'writer', 'time per call', 'throughput', 'ratio to FastFile', ($bare ? 'ratio to bare C' : ()) ], @r3);
}

# syscalls
if ($strace) {
    push @md, "## Syscalls per call\n",
        "`strace` of a fresh process making two calls; counted are the syscalls of the second call (the\n"
      . "first loads modules and warms up), between two marker syscalls around it. `mmap`, `munmap`, `brk` and `mremap` are left out of the counts as\n"
      . "allocator noise (perl's and libc's memory management, not I/O); they are shown separately.\n",
        md_table([ 'size', map { $label{$_} } @cols ],
            map { my $s = $_; [ human($s), map { $sys{$s}{$_}{total} } @cols ] } @SIZES),
        "\n### write(2) calls per call\n",
        md_table([ 'size', map { $label{$_} } @cols ],
            map { my $s = $_; [ human($s), map { $sys{$s}{$_}{writes} } @cols ] } @SIZES),
        "\n### Allocator syscalls per call (mmap/munmap/brk/mremap, not counted above)\n",
        md_table([ 'size', map { $label{$_} } @cols ],
            map { my $s = $_; [ human($s), map { $sys{$s}{$_}{alloc} } @cols ] } @SIZES),
        "\n### The syscalls of one 1 MiB call\n",
        md_table_left([ 'writer', 'syscalls (in order of first use)' ],
            map { [ $label{$_}, $sys{$MiB}{$_}{mix} ] } @cols);
}

# FUSE
my @fuse_cols = @contenders;
if (!$fuse_why) {
    my $seedish = sub {
        my ($size, $name, $mw) = @_;
        my $f = $fuse{$mw}{$size}{$name};
        return (fmt_kib($f->{stored}), sprintf('%.1f', $f->{stored} / $size));
    };
    push @md, "## FUSE write requests and write amplification (fastfs, pmxcfs model)\n",
        "t/fusefs/fastfs is an in-memory FUSE filesystem (no writeback cache) that counts WRITE\n"
      . "requests and models pmxcfs, which stores the whole file again on every write request:\n"
      . "after each request, *written* grows by the file's current size. Amplification = written /\n"
      . "file size. max_write 4 KiB is libfuse2's default (pmxcfs before `big_writes`), 128 KiB is\n"
      . "pmxcfs with `big_writes`. One call per cell, counters reset before it.\n",
        "\n### FUSE write requests per call (max_write 4 KiB / 128 KiB)\n",
        md_table([ 'size', map { $label{$_} } @fuse_cols ],
            map { my $s = $_; [ human($s), map { "$fuse{4096}{$s}{$_}{requests} / $fuse{131072}{$s}{$_}{requests}" } @fuse_cols ] }
            @SIZES),
        "\n### Modeled bytes written and amplification, like the pve-devel tables\n",
        "Columns as in the pve-devel patch: *print* = print-era at max_write 4 KiB, *big_writes+print*\n"
      . "= print-era at 128 KiB, *big_writes+syswrite* = syswrite-era at 128 KiB; then FastFile.\n\n",
        md_table([ 'file size', 'print written', 'amplif.', 'big_writes+print written', 'amplif.',
                   'big_writes+syswrite written', 'amplif.', 'FastFile 4 KiB written', 'amplif.',
                   'FastFile 128 KiB written', 'amplif.' ],
            map { my $s = $_; [ human($s), $seedish->($s, 'print_era', 4096), $seedish->($s, 'print_era', 131072),
                                $seedish->($s, 'syswrite_era', 131072), $seedish->($s, 'fastfile', 4096),
                                $seedish->($s, 'fastfile', 131072) ] } @FUSE_SIZES),
        "\n### Amplification of every writer (max_write 4 KiB / 128 KiB)\n",
        md_table([ 'size', map { $label{$_} } @fuse_cols ],
            map { my $s = $_; [ human($s), map { sprintf '%.1f / %.1f', $fuse{4096}{$s}{$_}{stored} / $s,
                                                  $fuse{131072}{$s}{$_}{stored} / $s } @fuse_cols ] } @SIZES);
    my $p4 = $fuse{4096}{$MiB}{print_era}{stored} / $MiB;
    my $p128 = $fuse{131072}{$MiB}{print_era}{stored} / $MiB;
    my $s128 = $fuse{131072}{$MiB}{syswrite_era}{stored} / $MiB;
    push @md, sprintf "\nThe model gives lower bounds: at 1 MiB it predicts %.1fx / %.1fx / %.1fx where pmxcfs\n"
      . "measured 360.9x / 183.1x / 15.5x (print / big_writes+print / big_writes+syswrite in the pve-devel\n"
      . "patch), since real pmxcfs also pays for the rename, sqlite and cluster sync. The order of the\n"
      . "writers is the same, and the model is exact about the cause: the number of write requests.\n",
        $p4, $p128, $s128;
}

# RSS
{
    my @rows = map { [ $label{$_}, sprintf('%.0f MiB', $rss{$_}{peak} / 1024), sprintf('%+.1f MiB', $rss{$_}{delta} / 1024) ] }
        grep { $rss{$_} } @cols;
    push @md, "## Peak RSS writing a 256 MiB string\n",
        "Max RSS (VmHWM) of a fresh child process that builds a 256 MiB string by appending 1 MiB blocks\n"
      . "(no full-size temporary) and writes it once, to $where[0]{key}. The baseline builds the string and\n"
      . sprintf("writes nothing: %.0f MiB for perl (all writer modules loaded)%s. *extra* is the peak over\n",
          $rss{baseline}{peak} / 1024,
          $bare ? sprintf(', %.0f MiB for bare C', $rss{'bare-baseline'}{peak} / 1024) : '')
      . "that baseline, i.e. the copies of the data a writer makes.\n",
        md_table([ 'writer', 'peak RSS', 'extra over baseline' ], @rows),
        "\nWhere the copies come from: a pure-Perl writer's `my (\$file, \$data) = \@_` copies the string,\n"
      . "because perl's copy-on-write declines to share a buffer with much unused room, which a string\n"
      . "grown by appending has (a string made in one piece, e.g. by `x`, would be shared); the\n"
      . "syswrite-era writer then makes a second copy with its in-memory `print`; File::Slurp joins its\n"
      . "arguments into a new string. FastFile writes from the caller's buffer.\n";
}

# readers
{
    my @rn = map { $_->[0] } @BenchWriters::READERS;
    my %rl = map { $_->[0] => $_->[1] } @BenchWriters::READERS;
    my @rows = map {
        my $s = $_;
        [ human($s),
          (map { my $R = $rtime{ $_->{key} }{$s};
                 my ($f, $r) = map { $R->{$_}{median} } @rn;
                 (fmt_time($f), fmt_time($r), fmt_ratio($r / $f)) } @where),
          ($strace ? (map { "$rsys{$s}{$_}{total} ($rsys{$s}{$_}{reads} read)" } @rn) : ()) ]
    } @READ_SIZES;
    push @md, "## Readers\n",
        "`FastFile::file_get_contents` against the reference's way of reading (safe_read_from): open,\n"
      . "then `sysread` 8 KiB at a time, appending. The file is in the page cache. Times: median of\n"
      . "interleaved rounds as above; syscalls: strace as above (allocator calls left out).\n",
        md_table([ 'size',
                   (map { ("$_->{key}: file_get_contents", "$_->{key}: sysread loop", "$_->{key}: ratio") } @where),
                   ($strace ? ('file_get_contents syscalls', 'sysread loop syscalls') : ()) ], @rows);
    if ($strace) {
        push @md, "\nThe syscalls of one 1 MiB read:\n\n",
            md_table_left([ 'reader', 'syscalls (in order of first use)' ], map { [ $rl{$_}, $rsys{$MiB}{$_}{mix} ] } @rn);
    }
}

push @notes, BenchOut::run_time_line('bench/compare.pl');
push @md, "## Notes\n", join '', map { "- $_\n" } @notes;

my $md = join "\n", @md;
print $md;

# the sections other benchmarks keep in results.md (make bench-instr's, the
# PVE::File helpers'), each between <!-- NAME --> and <!-- /NAME -->
my $results = BenchOut::path('results.md');
for my $from (grep { -e } $results, "$FindBin::Bin/results.md") {
    open my $old, '<', $from or die "$from: $!\n";
    my $text = do { local $/; <$old> };
    $md .= "\n$1" while $text =~ /(<!-- ([\w-]+) -->\n.*?<!-- \/\2 -->\n)/sg;
    last;
}
open my $out, '>', $results or die "$results: $!\n";
print {$out} $md;
close $out or die "$results: $!\n";
progress(BenchOut::wrote($results));

# --------------------------------------------------------------- plot -----

my %style = (
    fastfile     => ['#1b6ac9', undef],
    syswrite_era => ['#e08a00', undef],
    print_era    => ['#c62828', undef],
    bare         => ['#222222', '2 3'],
    path_tiny    => ['#2e7d32', undef],
    file_slurp   => ['#7b1fa2', undef],
);
my @xticks = map { [ $_, human($_) ] } map { 4**$_ * $KiB } 0 .. 8;
my @panels;
if (!$fuse_why) {
    # identical curves are drawn as nested strokes: print-era widest and
    # faint, FastFile thinnest on top
    my %look = (print_era => [6, 0.35, 5], syswrite_era => [3.5, 0.7, 3.5], fastfile => [1.5, 1, 2]);
    my @series;
    for my $mw (4096, 131072) {
        for my $name (qw(print_era syswrite_era fastfile)) {
            my ($width, $opacity, $marker) = @{ $look{$name} };
            push @series, {
                label   => "$label{$name}, max_write " . human($mw),
                color   => $style{$name}[0],
                dash    => $mw == 4096 ? '7 4' : undef,
                width   => $width, opacity => $opacity, marker => $marker,
                points  => [ map { [ $_, $fuse{$mw}{$_}{$name}{stored} / $_ ] } @FUSE_SIZES ],
            };
        }
    }
    push @panels, { title => 'Modeled write amplification on FUSE (pmxcfs model)',
                    xlabel => 'file size', ylabel => 'bytes stored / file size',
                    note => "max_write 4 KiB (dashed): all three writers coincide\n"
                          . "max_write 128 KiB (solid): FastFile = syswrite-era",
                    legend_cols => 1, xticks => \@xticks, ymin => 1, series => \@series };
}
{
    my $T0 = $time{ $where[0]{key} };
    my @series = map {
        my $name = $_;
        { label => $label{$name}, color => $style{$name}[0], dash => $style{$name}[1],
          width => $name eq 'fastfile' ? 2.5 : 2,
          points => [ map { [ $_, $T0->{$_}{$name}{median} / $T0->{$_}{fastfile}{median} ] } @SIZES, $BIG ] }
    } @contenders;
    push @panels, { title => "Time per call on $where[0]{key}, ratio to FastFile",
                    xlabel => 'file size',
                    ylabel => 'time / FastFile time', xticks => \@xticks, hline => 1, series => \@series };
}
my $svg = BenchSVG::plot(
    panels => \@panels,
    footer => 'bench/compare.pl, ' . strftime('%Y-%m-%d', localtime) . ', '
              . ((slurp('/proc/cpuinfo') =~ /^model name\s*:\s*(.+)$/m)[0] // '?') . ', perl '
              . sprintf('%vd', $^V));
my $plot = BenchOut::path('amplification.svg');
open my $sv, '>', $plot or die "$plot: $!\n";
print {$sv} $svg;
close $sv or die "$plot: $!\n";
progress(BenchOut::wrote($plot) . '; done');
