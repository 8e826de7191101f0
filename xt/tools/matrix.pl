#!/usr/bin/perl
# xt/tools/matrix.pl - build and test FastFile with every perl we claim
# (`make matrix`): the perl that ran Makefile.PL, and each relocatable perl in
# ../shared/perls (see its README). Each perl gets a fresh copy of the
# distribution (the files in MANIFEST, so a file missing there fails here
# too), runs Makefile.PL, make and the t/ suite, and is reported in one line:
# version, threads, DEBUGGING, tests passed/failed/skipped, seconds.
#
# Environment:
#   FASTFILE_PERLS       directory of the perls (default ../shared/perls)
#   FASTFILE_PERL_CACHE  where they are unpacked (default $TMPDIR/fastfile-perls)
#   FASTFILE_MATRIX      space-separated names to run instead of all
#                        ("system" is the perl that runs this script)
#   FASTFILE_MATRIX_KEEP=1  keep the build directories
#   FASTFILE_MATRIX_LOGS  where the whole log of a perl that failed is kept
#                        (default matrix-logs/ here): its build directory goes
#   HARNESS_OPTIONS      jN: test files run N at a time (default: one per CPU, at most 8)
# Exit status: 0 when every perl built and passed, else 1.
use strict;
use warnings;

use Cwd qw(abs_path getcwd);
use ExtUtils::Manifest qw(maniread manicopy);
$ExtUtils::Manifest::Quiet = 1;
use File::Spec;
use File::Temp qw(tempdir);
use Time::HiRes qw(time);

my $root = getcwd();
-f "$root/MANIFEST" or die "matrix: run from the distribution root\n";
my $tmp = $ENV{TMPDIR} || '/tmp';
my $perls_dir = $ENV{FASTFILE_PERLS} || File::Spec->catdir($root, File::Spec->updir, 'shared', 'perls');
my $cache = $ENV{FASTFILE_PERL_CACHE} || "$tmp/fastfile-perls";

my @perls = ([ system => $^X ]);
if (-x "$perls_dir/use-perl") {
    chomp(my @names = `"$perls_dir/use-perl" --list`);
    push @perls, map { [ $_ => undef ] } @names;
} else {
    print "matrix: no $perls_dir/use-perl: only the perl that runs this\n";
}
if (my $only = $ENV{FASTFILE_MATRIX}) {
    my %want = map { $_ => 1 } split ' ', $only;
    @perls = grep { $want{ $_->[0] } } @perls;
}

# The suite's own test runner, run by the perl under test: prints one
# "counts: ..." line that this script reads.
my $runner = <<'RUN';
use strict;
use TAP::Harness;
my $h = TAP::Harness->new({ lib => [ 'blib/lib', 'blib/arch' ], verbosity => -1, jobs => $ARGV[0] || 1 });
my $agg = $h->runtests(sort glob 't/*.t');
my @skipped_files = grep { my ($p) = $agg->parsers($_); $p->skip_all } $agg->descriptions;
for my $f (@skipped_files) {
    my ($p) = $agg->parsers($f);
    print "skipped-file: $f: ", $p->skip_all, "\n";
}
printf "counts: files=%d tests=%d passed=%d failed=%d skipped=%d skipped_files=%d errors=%d status=%s\n",
    scalar($agg->descriptions), $agg->total, scalar($agg->passed), scalar($agg->failed),
    scalar($agg->skipped), scalar(@skipped_files), scalar($agg->parse_errors), $agg->get_status;
RUN

# test files run side by side as `make test` runs them: HARNESS_OPTIONS' jN,
# else one job per CPU, at most 8 (Makefile.PL's TEST_JOBS)
my ($jobs) = ($ENV{HARNESS_OPTIONS} // '') =~ /\bj(\d+)/;
if (!defined $jobs) {
    my $cpus = do { open my $fh, '<', '/proc/cpuinfo' or die "/proc/cpuinfo: $!\n"; grep { /^processor\s*:/ } <$fh> } || 1;
    $jobs = defined $ENV{HARNESS_OPTIONS} ? 1 : $cpus > 8 ? 8 : $cpus;
}

my $failures = 0;
my %total = (passed => 0, failed => 0, skipped => 0);
my @lines;
printf "%-26s %-8s %-7s %-9s %7s %6s %7s %10s %5s  %s\n",
    qw(perl version threads debugging passed failed skipped files-skip secs result);
for my $p (@perls) {
    my ($name, $perl) = @$p;
    my $start = time;
    my $line = eval { run_one($name, $perl) };
    if (!$line) {
        $failures++;
        chomp(my $why = $@ || 'unknown failure');
        $line = sprintf "%-26s %s", $name, "FAILED: $why";
    } elsif ($line =~ /FAIL\z/) {
        $failures++;
    }
    print "$line\n";
    push @lines, $line;
}
print "matrix: ", ($failures ? "$failures perl(s) FAILED" : "all " . scalar(@perls) . " perls passed"), "\n";
# the plain closing line CI reads: tests over all perls
print "matrix: $total{passed} passed, $total{failed} failed, $total{skipped} skipped\n";
exit($failures ? 1 : 0);

sub run_one {
    my ($name, $perl) = @_;
    if (!defined $perl) {
        $perl = `"$perls_dir/use-perl" "$name" "$cache"`;
        chomp $perl;
        die "use-perl $name failed\n" if $? || !-x $perl;
    }
    my ($version, $threads, $debugging) = split ' ', `"$perl" -MConfig -e 'print join " ", sprintf("%vd", \$^V), (\$Config{useithreads} ? "yes" : "no"), (\$Config{ccflags} =~ /-DDEBUGGING\\b/ ? "yes" : "no")'`;
    die "$perl does not run\n" unless $version;

    my $dir = tempdir("fastfile-matrix-$name-XXXXXX", TMPDIR => 1,
                      CLEANUP => !$ENV{FASTFILE_MATRIX_KEEP});
    manicopy(maniread("$root/MANIFEST"), $dir, 'cp');
    my $log = "$dir/matrix.log";
    my $t0 = time;
    my $ok = system("cd '$dir' && '$perl' Makefile.PL >'$log' 2>&1 && make >>'$log' 2>&1") == 0;
    my $counts = '';
    if ($ok) {
        open my $rh, '>', "$dir/matrix-run.pl" or die "matrix-run.pl: $!\n";
        print {$rh} $runner;
        close $rh or die "matrix-run.pl: $!\n";
        system("cd '$dir' && '$perl' matrix-run.pl $jobs >>'$log' 2>&1");
        open my $lh, '<', $log or die "$log: $!\n";
        my @out = <$lh>;
        ($counts) = grep { /^counts: / } @out;
        print map { s/^skipped-file: /    (skipped $name: /r =~ s/\n\z/)\n/r } grep { /^skipped-file: / } @out;
    }
    my $secs = time - $t0;
    my %c = ($counts // '') =~ /(\w+)=(\S+)/g;
    $total{$_} += $c{$_} // 0 for keys %total;
    my $pass = $ok && $counts && $c{status} eq 'PASS' && !$c{failed} && !$c{errors};
    $total{failed}++ if !$pass && !$c{failed};   # a build that failed counts as one failure
    if (!$pass) {
        open my $lh, '<', $log;
        my @all = $lh ? <$lh> : ();
        # every failure's lines (a tail alone once lost 21 of them), the tail,
        # and the whole log kept outside the build directory
        my @failed = grep { /^(?:not ok|#|t\/\S+\s+\(Wstat|\s+Failed tests|Dubious|\s+Parse errors)/ } @all;
        print "---- $name: the failures in $log\n", @failed[ 0 .. ($#failed > 399 ? 399 : $#failed) ],
              "---- $name: last lines\n", @all[ (@all > 60 ? -60 : 0) .. $#all ], "----\n";
        my $keep = $ENV{FASTFILE_MATRIX_LOGS} || "$root/matrix-logs";
        if ((-d $keep || mkdir $keep) && system('cp', $log, "$keep/$name.log") == 0) {
            print "(the whole log: $keep/$name.log)\n";
        } else {
            print "(could not keep the log in $keep)\n";
        }
        print "(build kept in $dir)\n" if $ENV{FASTFILE_MATRIX_KEEP};
    }
    return sprintf "%-26s %-8s %-7s %-9s %7s %6s %7s %10s %5.0f  %s",
        $name, $version, $threads, $debugging,
        $c{passed} // '-', $c{failed} // '-', $c{skipped} // '-', $c{skipped_files} // '-', $secs,
        $pass ? 'PASS' : 'FAIL';
}
