package BenchOut;

# Where the benchmarks write their tables. A plain `make bench` leaves the
# tracked copies in bench/ (the ones the README and the POD cite) alone and
# writes into bench-out/ at the top of the tree (untracked; make clean
# removes it), or into BENCH_OUT; BENCH_UPDATE=1 (`make bench-update`)
# replaces the tracked copies in bench/.
#
#   my $file = BenchOut::path('results.md');   # then write $file
#   BenchOut::wrote($file);                     # says where it went

use strict;
use warnings;
use File::Basename ();
use File::Path ();
use File::Spec ();

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

1;
