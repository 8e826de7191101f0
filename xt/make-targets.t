use strict;
use warnings;

# The extra make targets must test the perl that configured the build, not
# whatever perl PATH finds first: from a 5.40 build, `make asan` once tested
# Debian's 5.36 and said "clean".

use Test::More;
use lib 't/lib';
use FFTest;

plan skip_all => 'run from a configured build (Makefile missing)' unless -f 'Makefile';
my ($fullperl) = map { /^FULLPERL\s*=\s*(.*?)\s*$/ ? $1 : () } do {
    open my $fh, '<', 'Makefile' or die "Makefile: $!";
    <$fh>;
};
ok($fullperl, "Makefile names FULLPERL ($fullperl)");

for my $target (qw(asan leakcheck matrix tarball-check deb-check clang-check portable-check)) {
    my @cmds = grep { m{xt/tools/} } `make -n $target 2>/dev/null`;
    is(scalar(@cmds), 1, "make $target runs one xt/tools script");
    like($cmds[0] // '', qr/\Q$fullperl\E/, "make $target passes the configuring perl");
}

done_testing;
