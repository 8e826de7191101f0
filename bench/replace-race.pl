#!/usr/bin/perl
# Readers against a writer that replaces the file in a loop (temp + rename,
# file_set_contents) on t/fusefs in its pmxcfs mode (libfuse as pmxcfs runs
# it: a reader then gets pmxcfs' spurious ENOENT) and in its default mode
# (hard_remove: ESTALE): failed reads per 10,000, FastFile against the
# reference's reader (t/lib/Reference.pm) running beside it, for FastFile
# before (another build, --before: main's blib) and after (this tree's).
# Each reader kind is one run: the writer, FastFile's reader and the
# reference's, each a process (t/lib/ReplaceRace.pm), for --seconds.
#
#   perl bench/replace-race.pl --before /work/main/blib [--seconds 5]
#
# Needs root or fusermount and /dev/fuse (t/lib/FastFS.pm). Prints a
# markdown section and puts it into results.md (bench-out/, or bench/ with
# BENCH_UPDATE=1) between its markers.
use strict;
use warnings;
use FindBin;
use Getopt::Long;
use POSIX ();

use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

my %KIND = (get_contents => 'file_get_contents', firstline => 'file_read_firstline',
            last_line => 'file_read_last_line', copy => 'file_copy');
my @KINDS = qw(get_contents firstline last_line copy);
my @MODES = ([ pmxcfs => 'pmxcfs mode (ENOENT)' ], [ default => 'default mode (ESTALE)' ]);

# child: one run, what each reader got, one line each
if (@ARGV && $ARGV[0] eq '--child') {
    my (undef, $mode, $kind, $secs) = @ARGV;
    require FastFS;
    require ReplaceRace;
    require FFTest;
    my $fs = FastFS->mount($mode eq 'pmxcfs' ? (pmxcfs => 1) : ());
    my $local = FFTest::tempdir();
    my $r = ReplaceRace::run(file => $fs->dir . '/f', copy_dir => $local, seconds => $secs,
                             readers => [ $kind, "ref_$kind" ]);
    $fs->unmount;
    print "writes $r->{writes}\n";
    for my $name ($kind, "ref_$kind") {
        my $x = $r->{$name};
        print "$name $x->{reads} $x->{failed} $x->{torn} ",
            join(';', map { "$_=$x->{errors}{$_}" } sort keys %{ $x->{errors} }), "\n";
    }
    exit 0;
}

my ($before, $secs) = (undef, 5);
GetOptions('before=s' => \$before, 'seconds=f' => \$secs) or die "usage: $0 --before BLIB [--seconds N]\n";
die "usage: $0 --before BLIB [--seconds N] (BLIB: a build's blib, main's)\n" unless $before && -d "$before/arch";
require BenchOut;
my $after = "$FindBin::Bin/../blib";
die "build this tree first (perl Makefile.PL && make)\n" unless -d "$after/arch";
my %BUILD = (before => $before, after => $after);

sub run_child {
    my ($build, $mode, $kind) = @_;
    my $blib = $BUILD{$build};
    my @cmd = ($^X, "-I$blib/lib", "-I$blib/arch", $0, '--child', $mode, $kind, $secs);
    open my $ph, '-|', @cmd or die "$cmd[0]: $!\n";
    my %r;
    while (my $line = <$ph>) {
        chomp $line;
        if ($line =~ /\Awrites (\d+)\z/) { $r{writes} = $1; next }
        my ($name, $reads, $failed, $torn, $errors) = split / /, $line, 5;
        $r{$name} = { reads => $reads, failed => $failed, torn => $torn, errors => $errors // '' };
    }
    close $ph or die "child ($build $mode $kind) failed: $?\n";
    return \%r;
}

sub per10k { my ($x) = @_; return $x->{reads} ? sprintf('%.1f', 10000 * $x->{failed} / $x->{reads}) : '-' }
sub cell { my ($x) = @_; return per10k($x) . " ($x->{failed} / $x->{reads})" }

my $when = POSIX::strftime('%Y-%m-%d %H:%M UTC', gmtime);
my $kernel = (POSIX::uname())[2];
my $md = "## Reads against a replacing writer (bench/replace-race.pl)\n\n"
       . "Produced by `perl bench/replace-race.pl --before /work/main/blib --seconds $secs`, $when, "
       . "kernel $kernel, perl $^V, 2 cores shared with other work. On t/fusefs, one writer replaces the "
       . "file with file_set_contents in a loop (three versions: 1 KiB, 24 KiB, 300 KiB); beside it "
       . "FastFile's reader and the reference's (t/lib/Reference.pm: pve-common's open and 8 KiB "
       . "sysreads), each a process, for $secs s. Failed reads per 10,000 (failed / reads); "
       . "\"before\" is main's build, \"after\" this one's. Torn results (not one whole version): "
       . "counted, and listed when there are any. FastFile after retries a replace's ENOENT or ESTALE "
       . "(ff_io.c's reread: 10 retries, 51 ms of pauses at most; with 8, 12.7 ms, one file_copy of "
       . "1,002 still failed in a run like this).\n";
my @torn;
for my $m (@MODES) {
    my ($mode, $title) = @$m;
    $md .= "\n### t/fusefs, $title\n\n"
         . "| reader | reference (before's run) | FastFile before | reference (after's run) | FastFile after | writes before / after |\n"
         . "| :-- | --: | --: | --: | --: | --: |\n";
    for my $kind (@KINDS) {
        my %r = map { $_ => run_child($_, $mode, $kind) } qw(before after);
        $md .= "| $KIND{$kind} | " . join(' | ', cell($r{before}{"ref_$kind"}), cell($r{before}{$kind}),
                                             cell($r{after}{"ref_$kind"}), cell($r{after}{$kind}))
             . " | $r{before}{writes} / $r{after}{writes} |\n";
        for my $b (qw(before after)) {
            for my $name ($kind, "ref_$kind") {
                my $x = $r{$b}{$name};
                push @torn, "$mode, $b, $name: $x->{torn} of $x->{reads}" if $x->{torn};
                print STDERR "# $mode $b $name: $x->{errors}\n" if $x->{errors};
            }
        }
        print STDERR "# $mode $kind done\n";
    }
}
$md .= "\nTorn results: " . (@torn ? join('; ', @torn) : 'none, in every run') . ".\n";
print $md;
print STDERR BenchOut::wrote(BenchOut::put_section('results.md', 'replace-race', $md)), "\n";
