#!/usr/bin/perl
# xt/tools/readme-figures.pl - the README's figures from the tracked tables
# (`make readme-figures`, after `make bench-update` or `make bench-instr`).
# A region of README.md
#   <!-- figures from bench/results.md | ### tmpfs: time per call -->
#   ...
#   <!-- /figures -->
# holds the table that follows that heading in that file; a selector that
# is not a heading is a regular expression, and the region holds the lines
# of the file it matches. Rewrites README.md; --check only says which
# regions differ (exit 1), as xt/readme.t does.
use strict;
use warnings;

sub region_text {
    my ($file, $selector) = @_;
    open my $fh, '<', $file or die "readme-figures: $file: $!\n";
    my @lines = map { s/\s+\z//r } <$fh>;
    close $fh;
    if ($selector =~ /^#+ /) {
        my ($at) = grep { $lines[$_] eq $selector } 0 .. $#lines;
        die "readme-figures: no heading '$selector' in $file\n" unless defined $at;
        my $i = $at + 1;
        $i++ while $i <= $#lines && $lines[$i] !~ /^\|/;
        my @table;
        push @table, $lines[$i++] while $i <= $#lines && $lines[$i] =~ /^\|/;
        die "readme-figures: no table after '$selector' in $file\n" unless @table;
        return join '', map { "$_\n" } @table;
    }
    my @hit = grep { /$selector/ } @lines;
    die "readme-figures: nothing in $file matches /$selector/\n" unless @hit;
    return join '', map { "$_\n" } @hit;
}

# (README text with every region refreshed, [regions that differed])
sub refresh {
    my ($readme) = @_;
    my @stale;
    $readme =~ s{^(<!-- figures from (\S+) \| (.+?) -->\n)(.*?)(^<!-- /figures -->$)}{
        my ($open, $file, $sel, $old, $close) = ($1, $2, $3, $4, $5);
        my $new = region_text($file, $sel);
        push @stale, "$file | $sel" if $new ne $old;
        "$open$new$close"
    }msge;
    return ($readme, \@stale);
}

return 1 if caller;

my $check = @ARGV && $ARGV[0] eq '--check';
open my $in, '<', 'README.md' or die "README.md: $!\n";
my $readme = do { local $/; <$in> };
close $in;
my ($new, $stale) = refresh($readme);
if ($check) {
    print "stale: $_\n" for @$stale;
    exit(@$stale ? 1 : 0);
}
if (@$stale) {
    open my $out, '>', 'README.md' or die "README.md: $!\n";
    print {$out} $new;
    close $out or die "README.md: $!\n";
}
print "readme-figures: ", (@$stale ? "refreshed: " . join(', ', @$stale) : 'all figures current'), "\n";
