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

1;
