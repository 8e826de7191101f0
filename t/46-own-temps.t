#!perl
# Nothing is published but what the call itself created: a rename moves
# only a temp this call made. A batch whose pair's target is another
# pair's temp name (directly, through a symlink, through ".."); user code
# (signal handlers, code between atomic_writer and commit) that replaces a
# temp by name.
use strict;
use warnings;

BEGIN { $ENV{LC_ALL} = 'C'; delete $ENV{LANGUAGE} }

use Test::More;
use lib 't/lib';
use FFTest qw(slurp spew tempdir);

use FastFile qw(:all);
use FastFile::Writer;

my $dir = tempdir();
my $n = 0;

sub entries {
    my ($d) = @_;
    opendir my $dh, $d or die "$d: $!";
    return join ' ', sort grep { !/^\.\.?\z/ } readdir $dh;
}

# ---- a batch: one pair's target is another pair's temp name
for my $c (
    # label, the names as given (relative to a fresh directory: x and x.tmp.$$ in d)
    [ 'temp named as a target',          "d/x.tmp.$$", 'd/x' ],
    [ '... the other order',             'd/x', "d/x.tmp.$$" ],
    [ '... through a symlink',           "e/x.tmp.$$", 'd/x' ],
    [ '... through ..',                  "d/sub/../x.tmp.$$", 'd/x' ],
    [ '... through a symlink, reversed', 'd/x', "e/x.tmp.$$" ],
) {
    my ($label, $first, $second) = @$c;
    for my $opts ({}, { noclobber => 1 }, { fsync => 1 }) {
        my $what = "$label" . (%$opts ? ' (' . join(',', keys %$opts) . ')' : '');
        my $top = "$dir/" . ++$n;
        mkdir $top or die;
        mkdir "$top/d" or die;
        mkdir "$top/d/sub" or die;
        symlink 'd', "$top/e" or die;
        my $w = eval { file_set_contents_many([ "$top/$first" => "first\n", "$top/$second" => "second\n" ], $opts) };
        is($w, 2, "batch, $what: 2 written") or diag $@;
        is(slurp("$top/$first"), "first\n", "batch, $what: '$first' holds its own bytes");
        is(slurp("$top/$second"), "second\n", "batch, $what: '$second' holds its own bytes");
        is(entries("$top/d"), "sub x x.tmp.$$", "batch, $what: nothing else in the directory");
    }
}

done_testing();
