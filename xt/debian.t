# debian/ matches the distribution: the package version is the module's
# $VERSION, and the fields a Debian Perl XS package needs are there.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use FFTest qw(slurp);

my ($version) = slurp('lib/FastFile.pm') =~ /our \$VERSION = '([^']+)'/;
my ($pkg, $debver) = slurp('debian/changelog') =~ /\A(\S+) \(([^)]+)\)/;
is($pkg, 'libfastfile-perl', 'debian/changelog names libfastfile-perl');
like($debver, qr/\A\Q$version\E-\d+\z/,
     "debian/changelog's newest entry is upstream $version (add one with dch -v $version-1)");

my $control = slurp('debian/control');
like($control, qr/^Build-Depends:.*debhelper-compat \(= 13\)/m, 'debhelper compat 13');
like($control, qr/^Architecture: any$/m, 'Architecture any (XS)');
like($control, qr/\$\{$_\}/, "Depends on \${$_}") for qw(perl:Depends shlibs:Depends misc:Depends);
like(slurp('debian/rules'), qr/^\tdh \$\@$/m, 'debian/rules is dh $@');
like(slurp('debian/copyright'),
     qr{\AFormat: https://www\.debian\.org/doc/packaging-manuals/copyright-format/1\.0/}, 'DEP-5 copyright');
ok(-x 'debian/rules' && -x 'debian/tests/smoke' && -x 'debian/tests/suite', 'scripts are executable');
done_testing;
