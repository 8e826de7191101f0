# ppport.h has nothing to say about the XS
use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
my @xs = (glob('*.xs'), glob('*.xsh'), glob('xs_*.c'));   # the perl-aware C
my $out = `$^X ppport.h --quiet --nofilter --compat-version=5.20 @xs 2>&1`;
is($out, '', 'perl ppport.h --compat-version=5.20 reports nothing')
    or diag $out;
done_testing;
