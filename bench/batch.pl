#!/usr/bin/perl
# Batch benchmark (`make bench-batch`, also run by `make bench`): the time
# per file of file_set_contents_many against a loop of file_set_contents,
# for N = 1, 16, 64 files of 1 KiB and 64 KiB, with and without fsync; the
# bare C loop (bench/bare.c: open, write, close, rename) as the floor; the
# fsync barrier candidates (bench/barrier.c); batch and loop on FUSE
# (t/fusefs, built here if it can be, with pmxcfs' caching); the syscalls
# a batch makes per file (strace); and the scale runs: up to 100,000 files in one
# directory and in 10,000 directories, with peak RSS, peak open fds and
# syscalls per file. Prints markdown to stdout and writes it to
# batch.md in bench-out/ (BENCH_OUT; bench/ with BENCH_UPDATE=1: bench/lib/BenchOut.pm);
# progress goes to stderr.
#
# Where: without fsync on a tmpfs (/dev/shm: the writer's own cost); with
# fsync on a journaled ext4, a 3 GiB loop image (sparse) made in the temp dir
# and mounted there when run as root (named before it is made; unmounted and
# deleted at the end), else BENCH_FSYNC_DIR if
# set, else the fsync rows are skipped with the reason. BENCH_QUICK=1 for a
# rough, fast run; BENCH_SCALE_N=1000,10000,100000 (the default) sets the
# sizes of the scale runs, BENCH_SCALE_N=0 skips them.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(min);
use POSIX qw(floor);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

use lib "$FindBin::Bin/lib", "$FindBin::Bin/../t/lib";
use BenchOut;
use FFTest ();    # without import: no test-only warning hook here
use FastFS;
use FastFile qw(file_set_contents file_set_contents_many);

$| = 1;
my $QUICK   = $ENV{BENCH_QUICK};
my @NS      = (1, 16, 64);
my @SIZES   = (1024, 65536);
my $ROUNDS  = $QUICK ? 5 : 11;      # samples per cell, median taken
my $SAMPLE  = $QUICK ? 0.01 : 0.03; # seconds a tmpfs sample lasts, about
my $FSYNC_ROUNDS = $QUICK ? 3 : 7;
my $T0 = clock_gettime(CLOCK_MONOTONIC);
sub load_now { open my $l, '<', '/proc/loadavg' or return '?'; return (split ' ', <$l> // '?')[0] }
my $LOAD_START = load_now();

sub progress { printf STDERR "[%5.1fs] %s\n", clock_gettime(CLOCK_MONOTONIC) - $T0, join '', @_ }
sub now { clock_gettime(CLOCK_MONOTONIC) }
sub median { my @v = sort { $a <=> $b } @_; return $v[ floor($#v / 2) ] }
sub human { $_[0] >= 1024 ? ($_[0] / 1024) . ' KiB' : "$_[0] B" }
sub us { my ($s) = @_; my $u = $s * 1e6; return $u < 10 ? sprintf('%.2f µs', $u) : sprintf('%.0f µs', $u) }
sub ratio { sprintf '%.2fx', $_[0] }
sub table {
    my ($head, @rows) = @_;
    return join '', map { '| ' . join(' | ', @$_) . " |\n" } $head,
        [ map { '---' } @$head ], @rows;
}
sub run {    # ($status, output)
    my $out = `@{[ join ' ', map { "'$_'" } @_ ]} 2>&1`;
    return ($? >> 8, $out);
}

{
    my $secs  = BenchOut::recorded_secs('batch.md', 'bench/batch.pl');
    my $scale = BenchOut::recorded_secs('batch.md', 'the scale runs');
    progress(defined $secs ? "the last recorded run took $secs s (bench/batch.md)" : 'no run time recorded in bench/batch.md yet',
             defined $scale ? ", the scale runs $scale s of it" : '', ': BENCH_SCALE_N=0 skips the scale runs');
}
my $work = tempdir('ffbatch-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my @notes;
my $out = '';
sub say_md { $out .= join '', @_; print @_ }

# ---- where ----
my $tmpfs = -d '/dev/shm' && -w _ ? tempdir('ffbatch-XXXXXX', DIR => '/dev/shm', CLEANUP => 1) : undef;
push @notes, 'no writable /dev/shm: the rows without fsync are timed in ' . File::Spec->tmpdir
    unless $tmpfs;
$tmpfs //= $work;

my ($ext4, $img, $mnt, $fsync_why);
if ($ENV{BENCH_FSYNC_DIR}) {
    $ext4 = tempdir('ffbatch-XXXXXX', DIR => $ENV{BENCH_FSYNC_DIR}, CLEANUP => 1);
} elsif ($> != 0) {
    $fsync_why = 'not root: no ext4 loop image (set BENCH_FSYNC_DIR to a journaled filesystem)';
} else {
    $img = "$work/ext4.img";
    $mnt = "$work/mnt";
    mkdir $mnt;
    progress("making a journaled ext4 image for the fsync rows: $img (3 GiB, sparse), loop-mounted on $mnt; "
             . 'unmounted and removed at the end (BENCH_FSYNC_DIR=dir uses a directory of yours instead)');
    # room for the scale runs: 100,000 temps and 10,000 directories at once
    my ($rc, $o) = run('truncate', '-s', '3G', $img);
    ($rc, $o) = run('mkfs.ext4', '-q', '-F', '-N', '400000', $img) unless $rc;
    ($rc, $o) = run('mount', '-o', 'loop', $img, $mnt) unless $rc;
    if ($rc) {
        ($fsync_why = "no ext4 loop image: $o") =~ s/\s+\z//;
        undef $mnt;
    } else {
        $ext4 = $mnt;
        progress("mounted a journaled ext4 image on $mnt");
    }
}
END {
    if ($mnt) {
        system('umount', $mnt) == 0 or system('umount', '-l', $mnt);
        unlink $img;
    }
}

# ---- the floor and the barrier candidates, built here ----
my %bin;
for my $prog (['bare', 'bare.c'], ['barrier', 'barrier.c', '-pthread']) {
    my ($name, $src, @extra) = @$prog;
    my ($rc, $o) = run('cc', '-O2', @extra, '-o', "$work/$name", "$FindBin::Bin/$src");
    if ($rc) { push @notes, "bench/$src not built: " . (split /\n/, $o)[0] }
    else     { $bin{$name} = "$work/$name" }
}

my %data = map { $_ => join('', map { chr(32 + $_ % 95) } 0 .. $_ - 1) } @SIZES;

# per-file seconds of one batch call / of a loop of single calls
sub batch_once {
    my ($dir, $n, $size, $opt) = @_;
    my @l = map { ("$dir/f$_" => $data{$size}) } 1 .. $n;
    my $t = now();
    file_set_contents_many(\@l, $opt);
    return (now() - $t) / $n;
}
sub loop_once {
    my ($dir, $n, $size, $opt) = @_;
    my @f = map { "$dir/f$_" } 1 .. $n;
    my $t = now();
    file_set_contents($_, $data{$size}, $opt) for @f;
    return (now() - $t) / $n;
}
# a sample: enough repetitions to last about $SAMPLE seconds (tmpfs)
sub sample {
    my ($how, $dir, $n, $size, $opt, $reps) = @_;
    my $t = 0;
    $t += $how->($dir, $n, $size, $opt) for 1 .. $reps;
    return $t / $reps;
}
sub bare_per_call {
    my ($dir, $size, $calls, @mode) = @_;
    my ($rc, $o) = run($bin{bare}, @mode ? $mode[0] : 'time', "$dir/bare", $size, $calls, @mode[1 .. $#mode]);
    return $rc || $o !~ /^(\d+)/ ? undef : $1 / 1e9 / $calls;
}

# ---- 1. batch vs loop ----
my @rows;
for my $fsync (0, 1) {
    my $dir = $fsync ? $ext4 : $tmpfs;
    next unless $dir;
    my $opt = { fsync => $fsync };
    for my $size (@SIZES) {
        for my $n (@NS) {
            progress(sprintf 'N=%d %s %s', $n, human($size), $fsync ? 'fsync (ext4)' : 'no fsync (tmpfs)');
            # the floor in C: the same N files written as a loop (spread)
            # and in the batch's order (staged: N temps, then N renames)
            my ($loop_c, $staged_c);
            if ($bin{bare} && !$fsync) {
                my $calls = $n * (int($SAMPLE / 5e-6 / $n) || 1);
                my (@s, @t);
                for (1 .. $ROUNDS) {
                    push @s, bare_per_call($dir, $size, $calls, 'spread', $n) // 0;
                    push @t, bare_per_call($dir, $size, $calls, 'staged', $n) // 0;
                }
                ($loop_c, $staged_c) = (median(@s), median(@t));
            }
            my $reps = 1;
            unless ($fsync) {    # calibrate on the batch
                my $one = sample(\&batch_once, $dir, $n, $size, $opt, 3) * $n;
                $reps = int($SAMPLE / ($one || 1e-6)) || 1;
            }
            my (@b, @l);
            for (1 .. ($fsync ? $FSYNC_ROUNDS : $ROUNDS)) {   # interleaved
                push @b, sample(\&batch_once, $dir, $n, $size, $opt, $reps);
                push @l, sample(\&loop_once, $dir, $n, $size, $opt, $reps);
            }
            my ($tb, $tl) = (median(@b), median(@l));
            push @rows, [ $n, human($size), $fsync ? 'yes (ext4)' : 'no (tmpfs)', us($tl), us($tb),
                          ratio($tb / $tl),
                          $loop_c && $staged_c ? (us($loop_c), us($staged_c), ratio($staged_c / $loop_c),
                                                  ratio($tb / $staged_c))
                                               : ('', '', '', '') ];
        }
    }
}
say_md("## file_set_contents_many: time per file\n\n",
       "Batch: one file_set_contents_many call for N files; loop: N file_set_contents calls. "
       . "C floor (bench/bare.c, no fsync): the same N files with open/write/close/rename, as a loop "
       . "and in a batch's order (all N temps written, then the N renames: no target replaced "
       . "before every temp is written); their ratio is what that promise alone costs the kernel "
       . "(more live inodes, pages and directory entries at once). Medians of interleaved "
       . "samples; ratios below 1 mean the batch is faster.\n\n",
       table([ 'N', 'size', 'fsync', 'loop of single calls', 'batch', 'batch / loop',
               'C loop', 'C, batch order', 'C batch order / C loop', 'batch / C batch order' ], @rows));
say_md("\nfsync rows skipped: $fsync_why\n") if $fsync_why;

# ---- 2. the barrier candidates ----
if ($bin{barrier} && $ext4) {
    my @brows;
    my @names;
    for my $size (@SIZES) {
        for my $n (16, 64) {
            progress("barrier candidates: N=$n ", human($size));
            my ($rc, $o) = run($bin{barrier}, $ext4, $size, $n, $FSYNC_ROUNDS + 2);
            next if $rc;
            my %t = map { split ' ' } split /\n/, $o;
            @names = grep { $_ ne 'single' } map { (split ' ')[0] } split /\n/, $o;
            push @brows, [ $n, human($size), sprintf('%.0f µs', $t{single}),
                           map { sprintf '%.0f µs (%.1fx)', $t{$_}, $t{single} / $t{$_} } @names ];
        }
    }
    say_md("\n## The fsync barrier: candidates (bench/barrier.c, ext4)\n\n",
           "Per file: write N temps, make them durable one way, rename them, fsync the directory once. "
           . "single: each file on its own (fdatasync, rename, directory fsync), as N fsync'd "
           . "file_set_contents calls do. In brackets: how many times faster than single. "
           . "file_set_contents_many uses sfr+threads; syncfs also flushes other processes' data.\n\n",
           table([ 'N', 'size', 'single', @names ], @brows)) if @brows;
}

# ---- 3. syscalls per file ----
if (`strace -V 2>/dev/null` =~ /strace/) {
    my $n = 64;
    my $log = "$work/strace.log";
    my $code = 'my @l = map { ("$ARGV[0]/s$_" => "x" x 1024) } 1 .. ' . $n . ';'
        . ' FastFile::file_set_contents_many(\@l); chdir "/ffbatch-mark-start";'
        . ' FastFile::file_set_contents_many(\@l); chdir "/ffbatch-mark-end";'
        . ' FastFile::file_set_contents_many(\@l, { fsync => 1 }); chdir "/ffbatch-mark-fsync";';
    system('strace', '-f', '-qq', '-o', $log, $^X, FFTest::inc_args(), '-MFastFile', '-e', $code, $ext4 // $tmpfs);
    my ($in, %count, %fcount) = (0);
    my $fsync_part = 0;
    open my $fh, '<', $log or die "strace log: $!";
    while (<$fh>) {
        s/^\d+\s+//;
        if (/ffbatch-mark-start/) { $in = 1; next }
        if (/ffbatch-mark-end/)   { $in = 0; $fsync_part = 1; next }
        if (/ffbatch-mark-fsync/) { $fsync_part = 0; next }
        next unless /^(\w+)\(/;
        next if $1 =~ /^(?:brk|mmap|munmap|mremap)\z/;
        $count{$1}++ if $in;
        $fcount{$1}++ if $fsync_part;
    }
    my $fmt = sub {
        my ($c) = @_;
        my $total = 0;
        $total += $_ for values %$c;
        return (sprintf('%.2f', $total / $n),
                join ', ', map { sprintf '%s %s', $_, $c->{$_} % $n ? $c->{$_} : ($c->{$_} / $n) . '/file' }
                           sort { $c->{$b} <=> $c->{$a} || $a cmp $b } keys %$c);
    };
    say_md("\n## Syscalls of a batch of $n files (strace)\n\n",
           table([ 'fsync', 'syscalls per file', 'calls (per file, or in all)' ],
                 [ 'no', $fmt->(\%count) ], [ 'yes', $fmt->(\%fcount) ]),
           "\nA single file_set_contents makes openat, write, close, rename (+ getpid at most).\n");
} else {
    push @notes, 'strace not found: no syscall counts';
}

# ---- 3b. on FUSE: fastfs with pmxcfs' caching (-o cache: libfuse's 1 s
# timeouts, which pmxcfs keeps), no fsync: time per file and requests per
# file of a batch and of the loop, for targets written a moment ago and
# for new ones (the requests of the second of two runs in a row) ----
if (my $why = FastFS::available()) {
    push @notes, "no FUSE rows: fastfs $why.";
} else {
    my $fs = FastFS->mount(cache => 1);
    my $m = $fs->dir;
    my $n = 64;
    my @l = map { ("$m/u$_" => $data{1024}) } 1 .. $n;
    my $run = sub {
        my ($how, $fresh) = @_;
        if ($fresh) { unlink "$m/u$_" for 1 .. $n }
        my $t = now();
        if ($how eq 'batch') { file_set_contents_many(\@l) }
        else { for (my $i = 0; $i < @l; $i += 2) { file_set_contents($l[$i], $l[$i + 1]) } }
        return (now() - $t) / $n;
    };
    my @frows;
    for my $fresh (0, 1) {
        progress("FUSE: $n files, ", $fresh ? 'new targets' : 'existing targets');
        my (%t, %asked);
        for my $how ('batch', 'loop') {    # requests: the second of two runs
            $run->($how, $fresh);
            $fs->control('reset');
            $run->($how, $fresh);
            $asked{$how} = $fs->counters->{requests} / $n;
        }
        for my $r (1 .. $ROUNDS * 2) {      # interleaved, alternating who goes first
            push @{ $t{$_} }, $run->($_, $fresh) for $r % 2 ? ('batch', 'loop') : ('loop', 'batch');
        }
        my ($tb, $tl) = (median(@{ $t{batch} }), median(@{ $t{loop} }));
        push @frows, [ $fresh ? 'new' : 'written a moment ago', us($tl), us($tb), ratio($tb / $tl),
                       sprintf('%.2f', $asked{loop}), sprintf('%.2f', $asked{batch}) ];
    }
    $fs->unmount;
    say_md("\n## On FUSE: $n files of 1 KiB without fsync (fastfs -o cache)\n\n",
           "fastfs (t/fusefs) with names and attributes cached for 1 s, as on pmxcfs; time per file, "
           . "medians of interleaved runs; requests: what fastfs answered per file. A target not looked "
           . "up for a second costs the batch one LOOKUP more than the loop: the kernel sends a lookup "
           . "for a rename's target anyway, and the batch's look at it comes first.\n\n",
           table([ 'targets', 'loop of single calls', 'batch', 'batch / loop', 'loop requests per file',
                   'batch requests per file' ], @frows));
}

# ---- 4. scale: up to 100,000 files, one directory and 10,000 ----
# Each cell is a fresh perl (so its peak RSS is its own) writing N files of
# 1 KiB into a fresh tree, as one batch or as a loop of single calls; the
# tree is made before and removed after the timing. Peak fds and syscalls
# come from one strace of the batch at the smallest N of the big ones.
my $SCALE_CHILD = <<'PERL';
use strict; use warnings;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use FastFile qw(file_set_contents file_set_contents_many);
my ($base, $n, $ndirs, $fsync, $how) = @ARGV;
sub hwm { open my $s, '<', '/proc/self/status' or return 0; while (<$s>) { return $1 if /^VmHWM:\s+(\d+)/ } 0 }
mkdir "$base/d$_" or die "mkdir: $!" for 0 .. $ndirs - 1;
my $data = 'x' x 1024;
my @l = map { ("$base/d" . ($_ % $ndirs) . "/f$_" => $data) } 1 .. $n;
my $before = hwm();
my $t = clock_gettime(CLOCK_MONOTONIC);
if ($how eq 'batch') { file_set_contents_many(\@l, { fsync => $fsync }) }
else { for (my $i = 0; $i < @l; $i += 2) { file_set_contents($l[$i], $l[$i + 1], { fsync => $fsync }) } }
$t = clock_gettime(CLOCK_MONOTONIC) - $t;
print "$t $before ", hwm(), "\n";
PERL
my @SCALE_N = grep { $_ } split /,/, ($ENV{BENCH_SCALE_N} // ($QUICK ? '1000,10000' : '1000,10000,100000'));
# the children run under Debian's default soft limit on fds (the batch
# takes half of it), whatever this shell's is
my $SCALE_NOFILE = $ENV{BENCH_SCALE_NOFILE} // 1024;
sub under_nofile { return ('sh', '-c', 'ulimit -n "$0" && exec "$@"', $SCALE_NOFILE, @_) }
my (@srows, @frows);
my $scale_t0 = now();
for my $fsync (@SCALE_N ? (0, 1) : ()) {
    my $root = $fsync ? $ext4 : $tmpfs;
    next unless $root;
    for my $layout ([ 'one directory', 1 ], [ '10,000 directories', 10_000 ]) {
        my ($where, $maxdirs) = @$layout;
        for my $n (@SCALE_N) {
            my $ndirs = $maxdirs < $n ? $maxdirs : $n;
            my %r;
            for my $how ('batch', 'loop') {
                my @samples;
                for (1 .. ($n <= 1000 ? 3 : 1)) {
                    my $base = "$root/scale";
                    system('rm', '-rf', $base);
                    mkdir $base or die "mkdir $base: $!";
                    my $what = "scale: $how of $n files in $ndirs directories, fsync $fsync";
                    progress($what);
                    my (undef, $o) = BenchOut::run_progress("[batch.pl] $what", 10,
                        under_nofile($^X, FFTest::inc_args(), '-e', $SCALE_CHILD, $base, $n, $ndirs, $fsync, $how));
                    my ($t, $before, $after) = split ' ', $o // '';
                    die "scale child failed: $o\n" unless defined $after;
                    push @samples, [ $t / $n, ($after - $before) * 1024 / $n, $after ];
                    system('rm', '-rf', $base);
                }
                my @sorted = sort { $a->[0] <=> $b->[0] } @samples;
                $r{$how} = $sorted[ floor($#sorted / 2) ];
            }
            push @srows, [ $where, $n, $ndirs, $fsync ? 'yes (ext4)' : 'no (tmpfs)', us($r{loop}[0]), us($r{batch}[0]),
                           ratio($r{batch}[0] / $r{loop}[0]), sprintf('%.0f B', $r{batch}[1]),
                           sprintf('%.0f MiB', $r{batch}[2] / 1024) ];
        }
        # peak fds and syscalls per file: one traced batch
        if (`strace -V 2>/dev/null` =~ /strace/) {
            my $n = (grep { $_ >= 10_000 } @SCALE_N)[0] // $SCALE_N[-1];
            my $ndirs = $maxdirs < $n ? $maxdirs : $n;
            my $base = "$root/scale";
            system('rm', '-rf', $base);
            mkdir $base;
            my $log = "$work/scale-strace.log";
            my $what = "scale: strace of a batch of $n files in $ndirs directories, fsync $fsync";
            progress($what);
            (my $code = $SCALE_CHILD) =~ s/^my \$before = hwm\(\);$/my \$before = hwm(); chdir "\/ffbatch-mark-start";/m;
            $code =~ s/^\$t = clock_gettime.*$/chdir "\/ffbatch-mark-end"; \$t = 0;/m;
            # its stdout (the child's timing line) captured: not a raw line in the report
            my ($st) = BenchOut::run_progress("[batch.pl] $what", 10, under_nofile('strace', '-f', '-qq', '-o', $log,
                $^X, FFTest::inc_args(), '-e', $code, $base, $n, $ndirs, $fsync, 'batch'));
            $st == 0 or die "traced scale child failed\n";
            my ($in, $calls, %open, $peak, %count) = (0, 0);
            $peak = 0;
            open my $fh, '<', $log or die "strace log: $!";
            my %unfinished;    # a thread's call that another thread's line split in two
            while (<$fh>) {
                my $pid = s/^(\d+)\s+// ? $1 : 0;
                if (/^(.*) <unfinished \.\.\.>$/) { $unfinished{$pid} = $1; next }
                $_ = ($unfinished{$pid} // '') . $1 if /^<\.\.\. \w+ resumed>(.*)$/s;
                delete $unfinished{$pid};
                if (/ffbatch-mark-start/) { $in = 1; next }
                if (/ffbatch-mark-end/)   { $in = 0; next }
                next unless $in && /^(\w+)\((.*)\)\s+=\s+(-?\d+)/;
                my ($name, $args, $ret) = ($1, $2, $3);
                next if $name =~ /^(?:brk|mmap|munmap|mremap)\z/;
                $calls++;
                $count{$name}++;
                if ($name =~ /^open/ && $ret >= 0) { $open{$ret} = 1 }
                elsif ($name eq 'close' && $args =~ /^(\d+)/) { delete $open{$1} }
                $peak = keys %open if keys %open > $peak;
            }
            push @frows, [ $where, $n, $ndirs, $fsync ? 'yes' : 'no', sprintf('%.2f', $calls / $n), $peak,
                           join ', ', map { sprintf '%s %.2f', $_, $count{$_} / $n }
                                      sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count ];
            system('rm', '-rf', $base);
        }
    }
}
my $scale_secs = @SCALE_N ? now() - $scale_t0 : undef;
if (@srows) {
    say_md("\n## Scale: N files of 1 KiB, one batch against a loop of single calls\n\n",
           "File i goes into directory i mod D. Time per file; RSS per file: the growth of the peak RSS "
           . "during the batch call, divided by N (the list of pairs itself is built before); peak RSS "
           . "of the whole perl at the end. One run per cell (the median of 3 at 1000 files), "
           . "each under `ulimit -n $SCALE_NOFILE`.\n\n",
           table([ 'layout', 'N', 'D', 'fsync', 'loop of single calls', 'batch', 'batch / loop',
                   'batch RSS per file', 'peak RSS' ], @srows));
    say_md("\n### Peak open fds and syscalls per file of one batch (strace, `ulimit -n` $SCALE_NOFILE)\n\n",
           "Open fds: the batch's own, counted from openat and close.\n\n",
           table([ 'layout', 'N', 'D', 'fsync', 'syscalls per file', 'peak open fds', 'calls per file' ], @frows))
        if @frows;
}

say_md("\nNotes: ", join(' ', @notes), "\n") if @notes;
say_md(sprintf "\n%s Run time of the scale runs: %d s.\n", BenchOut::run_time_line('bench/batch.pl'), $scale_secs)
    if defined $scale_secs;
say_md("\n" . BenchOut::run_time_line('bench/batch.pl') . " (no scale runs: BENCH_SCALE_N=0)\n") unless defined $scale_secs;
chomp(my $kernel = `uname -r`);
say_md(sprintf "\nperl %s, Linux %s, %s; %s; %s; load average (1 min) at start / end %s / %s.\n", $^V, $kernel,
       (`nproc` =~ /(\d+)/ ? "$1 CPUs" : '? CPUs'), $QUICK ? 'BENCH_QUICK' : 'full run',
       POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime), $LOAD_START, load_now());

my $batch_md = BenchOut::path('batch.md');
open my $md, '>', $batch_md or die "$batch_md: $!\n";
print {$md} "# FastFile batch benchmark (bench/batch.pl)\n\n", $out;
close $md or die "$batch_md: $!\n";
progress(BenchOut::wrote($batch_md));
