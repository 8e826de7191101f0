package TestOrder;

# `make test`'s runner (Makefile.PL's test_via_harness): ExtUtils::Command::MM's
# test_harness, but the files that take longest start first. TAP::Harness
# starts the files in the order given, a new one as a job ends: by name,
# the signal and fault tests (t/80-t/86, t/96) came last, and a long one
# started late ran on alone while the other CPU had nothing left to run.
#
# The files not listed here follow in name order; a file listed but not
# given is not run. `prove -b t/NN-name.t` does not come here.

use strict;
use warnings;

use ExtUtils::Command ();
use File::Spec ();
use Test::Harness ();

# The longest files first, by wall time under `make test` (CPU time, the
# sleeps and waits of signal, FUSE and copy tests, the compilers' runs).
our @LONGEST_FIRST = map { "t/$_.t" } qw(
    01-core-build 80-faults 81-eintr 82-signals 83-usercode 02-core-run 16-copy
    15-read 03-makefile-pl 69-fuse-unmount 25-syscalls 86-helpers-faults
    87-signal-storm 96-attacker 84-snapshots 73-batch-scale 35-options 85-concurrency
    89-batch-signal-renames
);

# test_harness($verbose, @inc_dirs) with the files in @ARGV (globs expanded)
sub test_harness {
    my ($verbose, @inc) = @_;
    $Test::Harness::verbose = $verbose;
    my @files = ExtUtils::Command::expand_wildcards(@ARGV);
    local @INC = @INC;
    unshift @INC, map { File::Spec->rel2abs($_) } @inc;
    Test::Harness::runtests(longest_first(@files));
}

# @files with the ones of @LONGEST_FIRST first, in its order, then the
# others by name (case-insensitively, as test_harness sorts them)
sub longest_first {
    my (@files) = @_;
    my %rank;
    @rank{@LONGEST_FIRST} = 0 .. $#LONGEST_FIRST;
    my $last = @LONGEST_FIRST;
    my $rank_of = sub { my ($f) = @_; (my $canon = $f) =~ s{\A\./}{}; $rank{$canon} // $last };
    return sort { $rank_of->($a) <=> $rank_of->($b) || lc $a cmp lc $b } @files;
}

1;
