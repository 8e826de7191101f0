#!/usr/bin/perl
# What FastFile is for, in a few seconds (`make demo`): a 1 MiB config written
# by the print-era pure-Perl file_set_contents, the syswrite-era one and
# FastFile, first onto t/fusefs (an in-memory FUSE filesystem that models
# pmxcfs, Proxmox VE's /etc/pve) at max_write 128 KiB, counting FUSE write
# requests; then the same content rewritten with if_changed; then a no-op
# rewrite of a 1 KiB config there, counting the modifying requests (each one
# a stored transaction on pmxcfs) of the reference, FastFile and if_changed;
# then syscalls (strace) and time per call on tmpfs. The writers are
# bench/lib/BenchWriters.pm's (the same code `make bench` measures).
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/lib", "$FindBin::Bin/../t/lib";
use File::Temp ();
use Time::HiRes qw(time);
use FastFile qw(file_set_contents file_get_contents);
use BenchWriters ();
use FFTest ();    # without import: no test-only warning hook here
use FastFS ();
use Reference ();

# However it ends (`make demo | head`: SIGPIPE; kill; Ctrl-C) it exits through
# perl's END blocks, so that File::Temp removes its directory in /dev/shm and
# FastFS unmounts t/fusefs and removes its directory and log: a signal's
# default action skips them all.
$SIG{$_} = sub { exit 1 } for qw(PIPE TERM INT HUP);
$| = 1;    # each line as it comes, through a pipe too

my $SIZE      = 1 << 20;
my $MAX_WRITE = 128 << 10;    # pmxcfs with big_writes
my $data      = BenchWriters::payload($SIZE);
my @writers   = (
    [ print_era    => 'print-era (open, print, close)' ],
    [ syswrite_era => 'syswrite-era (syswrite loop)' ],
    [ fastfile     => 'FastFile file_set_contents' ],
);
my %label = map { @$_ } @writers;

sub commify { my $n = reverse shift; $n =~ s/(\d{3})(?=\d)/$1,/g; return scalar reverse $n }

printf "A %s-byte config (%d lines), written by each writer; perl %vd.\n\n",
    commify($SIZE), $data =~ tr/\n//, $^V;

# ---- FUSE: write requests, as pmxcfs would receive them ----
my $why = FastFS::available();
if ($why) {
    print "FUSE part skipped: t/fusefs cannot be mounted here ($why).\n\n";
} else {
    my $fs = FastFS->mount(max_write => $MAX_WRITE);
    my $file = $fs->dir . '/demo.cfg';
    print "On t/fusefs at max_write 128 KiB (pmxcfs with big_writes). pmxcfs stores the whole\n",
          "file again on each write request: amplification = bytes stored / file size.\n";
    printf "  %-36s %14s %14s %13s\n", 'writer', 'write requests', 'bytes stored', 'amplification';
    my @rows = map { my $name = $_->[0]; [ $label{$name}, sub { BenchWriters::writer($name)->($file, $data) } ] } @writers;
    push @rows, [ 'FastFile, if_changed, same content', sub {
        die "if_changed rewrote an unchanged file\n"
            if file_set_contents($file, $data, { if_changed => 1 });
    } ];
    for my $row (@rows) {
        my ($label, $write) = @$row;
        unlink $file unless $label =~ /if_changed/;
        $fs->reset;
        $write->();
        my $c = $fs->counters;
        die "$label: the file on fastfs differs\n" unless file_get_contents($file) eq $data;
        printf "  %-36s %14d %14s %12.1fx\n", $label, $c->{write_requests},
            commify($c->{bytes_stored}), $c->{bytes_stored} / $SIZE;
    }
    $fs->unmount;
    print "Measured on a real pmxcfs (pve-cluster 9.1.6, local mode, big_writes, FastFile 0.03, 2026-12-01),\n",
          "one changed write of a 1 MiB file: print-era 188,530 KiB written by pmxcfs; syswrite-era and\n",
          "FastFile 15,890 KiB each, 11.9x less (both at the FUSE limit of 8 requests of 128 KiB);\n",
          "if_changed on unchanged content 0.\n\n";
    noop_rewrite();
}

# ---- FUSE: a no-op rewrite of a 1 KiB config, the requests that modify ----
# What pmxcfs stores and replicates: every modifying request (fastfs's
# modify_requests) is one sqlite transaction there.
sub noop_rewrite {
    my $fs = FastFS->mount(cache => 1);    # names and attributes cached 1 s, as pmxcfs
    my $file = $fs->dir . '/vm.conf';
    my $old = join '', map { sprintf "option%02d: value %d\n", $_, $_ } 1 .. 52;
    $old = substr($old, 0, 1023) . "\n";    # 1 KiB
    my @cases = (
        [ 'the same bytes again' => $old ],
        [ 'one line more (its size differs: a change)' => "${old}onboot: 1\n" ],
    );
    my @writers = (
        [ 'reference (pure Perl)', sub { Reference::ref_file_set_contents($_[0], $_[1]); 1 } ],
        [ 'FastFile', sub { file_set_contents($_[0], $_[1]) } ],
        [ 'FastFile, if_changed', sub { file_set_contents($_[0], $_[1], { if_changed => 1 }) } ],
    );
    print "A rewrite of a 1 KiB config on t/fusefs (names and attributes cached for 1 s, as on\n",
          "pmxcfs): the FUSE requests that modify (on pmxcfs each one a corosync message and a\n",
          "sqlite transaction on every node), the READs of the old bytes, and all requests.\n";
    printf "  %-28s %-30s %5s %12s\n", 'writer', 'modifying requests', 'READs', 'all requests';
    for my $case (@cases) {
        my ($what, $new) = @$case;
        print "  $what:\n";
        for my $w (@writers) {
            my ($label, $write) = @$w;
            file_set_contents($file, $old);
            $fs->reset;
            my $wrote = $write->($file, $new);
            my $c = $fs->counters;
            die "$label: the file on fastfs differs\n" unless file_get_contents($file) eq $new;
            die "$label: if_changed rewrote an unchanged file\n" if !$wrote != ($new eq $old && $label =~ /if_changed/);
            printf "    %-26s %-30s %5d %12d\n", $label, which_requests($c),
                $c->{read_requests}, $c->{requests};
        }
    }
    $fs->unmount;
    print "Measured on pmxcfs (pve-cluster 9.1.6, FastFile 0.03, 2026-12-01): one no-op rewrite of a\n",
          "1 KiB config on a 3-node cluster costs 3 CPG messages, 9 sqlite transactions, 36 KiB of disk\n",
          "writes, ~111 packets and ~12 ms of cluster CPU, and a version bump every node re-parses for;\n",
          "with if_changed none of it. A size that differs is told by the lstat (one GETATTR more):\n",
          "no READ, and the writes any writer makes.\n\n";
}

# "3 (create, write, rename)": a call's modifying requests and their kinds
sub which_requests {
    my ($c) = @_;
    my @kinds = map { [ $_, $c->{"${_}_requests"} ] } qw(create write truncate rename unlink);
    my $other = $c->{modify_requests};
    $other -= $_->[1] for @kinds;
    push @kinds, [ 'other', $other ];
    my @named = map { $_->[1] > 1 ? "$_->[0] x$_->[1]" : $_->[0] } grep { $_->[1] } @kinds;
    return $c->{modify_requests} . (@named ? ' (' . join(', ', @named) . ')' : '');
}

# ---- tmpfs: syscalls and time per call, the writer's own cost ----
my ($shm) = grep { (split ' ')[1] eq '/dev/shm' && (split ' ')[2] eq 'tmpfs' }
    do { open my $m, '<', '/proc/mounts' or die "/proc/mounts: $!\n"; <$m> };
my $dir = $shm && -w '/dev/shm'
    ? File::Temp::tempdir('fastfile-demo-XXXXXX', DIR => '/dev/shm', CLEANUP => 1)
    : File::Temp::tempdir('fastfile-demo-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $where = $dir =~ m{^/dev/shm/} ? 'tmpfs (/dev/shm)' : "$dir (no writable tmpfs at /dev/shm)";

my $strace = FFTest::which('strace');
my @INC_ARGS = FFTest::inc_args();    # this build and t/lib, for the traced children

# The syscalls of one call (after an untraced warm-up call in the same
# process), between two marker chdir()s perl never makes on its own; the
# allocator's mmap/munmap/brk/mremap are left out.
sub syscalls_of {
    my ($name) = @_;
    return 'strace not installed' unless $strace;
    my $log = "$dir/strace.log";
    my $code = 'my ($n, $f, $s) = @ARGV; my $w = BenchWriters::writer($n); my $d = BenchWriters::payload($s);'
             . ' $w->($f, $d); chdir "/demo-mark-start"; $w->($f, $d); chdir "/demo-mark-end";';
    my $st = system($strace, '-qq', '-o', $log, $^X, @INC_ARGS, '-MBenchWriters', '-e', $code,
                    $name, "$dir/trace.cfg", $SIZE);
    exit 1 if grep { ($st & 127) == $_ } 2, 15;    # system ignored the Ctrl-C that ended strace
    $st == 0 or return 'strace failed';
    open my $fh, '<', $log or return "no strace log: $!";
    my ($in, %n, $total) = (0);
    while (<$fh>) {
        if (/^chdir\("\/demo-mark-start"/) { $in = 1; next }
        last if /^chdir\("\/demo-mark-end"/;
        next unless $in && /^(\w+)\(/;
        next if $1 =~ /^(?:mmap|munmap|brk|mremap)$/;
        $n{$1}++;
        $total++;
    }
    return "$total: " . join ', ', map { $n{$_} > 1 ? "$_ x$n{$_}" : $_ }
        sort { $n{$b} <=> $n{$a} || $a cmp $b } keys %n;
}

# time per call: the best of 5 interleaved batches of 40 calls each (the
# machine's other load only ever adds time)
my %times;
my $file = "$dir/demo.cfg";
BenchWriters::writer($_->[0])->($file, $data) for @writers;    # warm up
for my $batch (1 .. 5) {
    for my $w (@writers) {
        my $code = BenchWriters::writer($w->[0]);
        my $t0 = time;
        $code->($file, $data) for 1 .. 40;
        push @{ $times{ $w->[0] } }, (time - $t0) / 40;
    }
}
die "the file on $where differs\n" unless file_get_contents($file) eq $data;
my %best = map { my @t = sort { $a <=> $b } @{ $times{$_} }; ($_ => $t[0]) } keys %times;

print "On $where: syscalls of one call (strace) and time per call (best of 5 batches of 40 calls).\n";
printf "  %-31s %10s %8s   %s\n", 'writer', 'time/call', 'vs FF', 'syscalls';
for my $w (@writers) {
    printf "  %-31s %7.3f ms %7.2fx   %s\n", $label{ $w->[0] }, $best{ $w->[0] } * 1000,
        $best{ $w->[0] } / $best{fastfile}, syscalls_of($w->[0]);
}
print "\nEvery writer stored identical bytes. Full tables: `make bench` writes them into bench-out/\n",
      "(results.md, batch.md, amplification.svg); the tracked copies are in bench/.\n";
