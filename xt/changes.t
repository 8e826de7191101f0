# Changes: newest release first, in CPAN::Changes style, naming this version
# (the version is read from the source, not loaded)
use strict;
use warnings;
use Test::More;

plan skip_all => 'author test: set AUTHOR_TESTING' unless $ENV{AUTHOR_TESTING};
open my $pm, '<', 'lib/FastFile.pm' or die $!;
my ($version) = map { /our \$VERSION = '([^']+)'/ ? $1 : () } <$pm>;
open my $ch, '<', 'Changes' or die $!;
my @releases = map { /^(\d+\.\d+)\s/ ? $1 : () } <$ch>;
ok(@releases, 'Changes lists releases');
is($releases[0], $version, "newest entry is the module's version $version");
done_testing;
