package BenchOut;

# Where the benchmarks write their tables. A plain `make bench` leaves the
# tracked copies in bench/ (the ones the README and the POD cite) alone and
# writes into bench-out/ at the top of the tree (untracked; make clean
# removes it), or into BENCH_OUT; BENCH_UPDATE=1 (`make bench-update`)
# replaces the tracked copies in bench/.
#
#   my $file = BenchOut::path('results.md');   # then write $file
#   BenchOut::wrote($file);                     # says where it went
#   BenchOut::put_section('results.md', 'instr', $markdown);   # one section

use strict;
use warnings;
use File::Basename ();
use File::Path ();
use File::Spec ();
use Cwd ();
use IO::Select ();
use POSIX ();

my $BENCH = File::Spec->rel2abs(File::Basename::dirname(File::Basename::dirname(__FILE__)));

sub dir {
    return $BENCH if $ENV{BENCH_UPDATE};
    my $dir = $ENV{BENCH_OUT} || File::Spec->catdir(File::Basename::dirname($BENCH), 'bench-out');
    File::Path::make_path($dir);
    return $dir;
}

sub path { return File::Spec->catfile(dir(), $_[0]) }

# The line to print once a table is written: where it is, relative to the
# working directory when below it.
sub wrote {
    my ($file) = @_;
    my $rel = File::Spec->abs2rel($file);
    return 'wrote ' . ($rel =~ m{^\.\./} ? $file : $rel)
         . ($ENV{BENCH_UPDATE} ? ' (the tracked copy)' : ' (BENCH_UPDATE=1 or make bench-update replaces the tracked copy in bench/)');
}

# put_section(FILE, NAME, TEXT): TEXT becomes FILE's section NAME, between
# <!-- NAME --> and <!-- /NAME --> (make bench keeps such sections when it
# writes the rest of results.md): replaced where it is, else appended. The
# rest is taken from the file being written, or the tracked copy when that
# one is not there yet. Returns the path written.
sub put_section {
    my ($name, $section, $text) = @_;
    my $file = path($name);
    my $old = '';
    for my $from ($file, File::Spec->catfile($BENCH, $name)) {
        next unless open my $in, '<', $from;
        $old = do { local $/; <$in> };
        last;
    }
    my $block = "<!-- $section -->\n$text" . ($text =~ /\n\z/ ? '' : "\n") . "<!-- /$section -->\n";
    $old =~ s/<!-- \Q$section\E -->\n.*?<!-- \/\Q$section\E -->\n/$block/s
        or $old = ($old eq '' ? '' : $old =~ s/\n*\z/\n\n/r) . $block;
    open my $out, '>', $file or die "$file: $!\n";
    print {$out} $old;
    close $out or die "$file: $!\n";
    return $file;
}

# fs_of($path): {type, mnt, dev, opts, path} of the filesystem holding
# $path, from /proc/mounts (the longest mount point above it). In a chroot
# /proc/mounts may list nothing above it (not even /): then the type comes
# from `stat -f` and the device from stat, so a report never names '?'.
# ($mounts: another mount table to read, for a test)
sub fs_of {
    my ($path, $mounts) = @_;
    $path = Cwd::abs_path($path) // $path;
    my ($type, $mnt, $dev, $opts) = ('', '', '', '');
    if (open my $fh, '<', $mounts // '/proc/mounts') {
        while (<$fh>) {
            my ($d, $m, $t, $o) = split ' ';
            $m =~ s/\\([0-7]{3})/chr oct $1/ge;
            ($type, $mnt, $dev, $opts) = ($t, $m, $d, $o)
                if index("$path/", $m eq '/' ? '/' : "$m/") == 0 && length $m >= length $mnt;
        }
    }
    if ($type eq '') {
        chomp(my $t = `stat -f -c %T '$path' 2>/dev/null` // '');
        my $rdev = (stat $path)[0];
        $type = ($t || 'unknown') . ' (stat -f: no entry in /proc/mounts)';
        $dev  = defined $rdev ? sprintf('device %d:%d', $rdev >> 8 & 0xfff, $rdev & 0xff | ($rdev >> 12 & 0xfff00)) : 'device unknown';
        $mnt  = '?';
    }
    return { type => $type, mnt => $mnt, dev => $dev, opts => $opts, path => $path };
}

# run_progress($label, $every, @cmd): runs @cmd (no shell), its stdout
# captured (stderr as it is), and says "$label: still running (N s)" on
# stderr every $every seconds until it ends: a long child is never silent.
# Returns ($?, its stdout).
sub run_progress {
    my ($label, $every, @cmd) = @_;
    my $t0 = time;
    my $pid = open(my $ph, '-|') // die "fork: $!\n";
    if (!$pid) { exec { $cmd[0] } @cmd or POSIX::_exit(127) }
    my ($out, $next) = ('', $every);
    my $sel = IO::Select->new($ph);
    while (1) {
        if ($sel->can_read(1)) {
            my $n = sysread $ph, $out, 65536, length $out;
            last unless $n;
        }
        my $took = time - $t0;
        if ($took >= $next) {
            printf STDERR "%s: still running (%d s)\n", $label, $took;
            $next += $every;
        }
    }
    close $ph;
    return ($?, $out);
}

# The line each script ends its table with: how long this run took
# (recorded_secs reads it back from the tracked copy, for the next run's
# estimate).
sub run_time_line {
    my ($what) = @_;
    return sprintf "Run time of %s: %d s.", $what, time - $^T;
}

# The run time the tracked copy of $name records for $what, or undef.
sub recorded_secs {
    my ($name, $what) = @_;
    open my $fh, '<', File::Spec->catfile($BENCH, $name) or return;
    my ($secs) = do { local $/; <$fh> } =~ /Run time of \Q$what\E: (\d+) s\b/;
    return $secs;
}

# What `make bench` says first: how long the last recorded run of each
# script took (the tracked tables in bench/), the total, and how to skip
# the scale runs.
my @BENCH_PARTS = ([ 'results.md', 'bench/compare.pl' ], [ 'batch.md', 'bench/batch.pl' ],
                   [ 'results.md', 'bench/helpers-copy.pl' ], [ 'results.md', 'bench/helpers-tempfile.pl' ]);
sub expect {
    my ($total, @parts, @unknown) = (0);
    for my $p (@BENCH_PARTS) {
        my $secs = recorded_secs(@$p);
        if (defined $secs) { $total += $secs; push @parts, "$p->[1] $secs s" }
        else               { push @unknown, $p->[1] }
    }
    my $scale = recorded_secs('batch.md', 'the scale runs');
    my $line = @parts ? sprintf('make bench: expect %s %d min (%s: the last recorded runs, in bench/*.md)',
                                @unknown ? 'more than' : 'about', ($total + 30) / 60, join(', ', @parts))
             : 'make bench: no run time recorded in bench/*.md yet';
    $line .= '; not recorded, and more: ' . join(', ', @unknown) if @parts && @unknown;
    $line .= sprintf '. The scale runs took %d s of it: BENCH_SCALE_N=0 skips them.', $scale if defined $scale;
    $line .= (defined $scale ? '' : '. BENCH_SCALE_N=0 skips the scale runs.')
           . ' Each step says what it does on stderr; a long one says it is still running every 10 s.';
    return "$line\n";
}

1;
