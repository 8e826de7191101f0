# debian/ matches the distribution: the package version is the module's
# $VERSION, and the fields a Debian Perl XS package needs are there; the
# package ships the README; .gitignore covers what dpkg-buildpackage leaves;
# make deb-check names a copy of FastFile that would shadow the package's.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use FFTest qw(slurp);
use File::Temp ();

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

like(slurp('debian/libfastfile-perl.docs') // '', qr/^README\.md$/m, 'the package ships README.md');

# what `dpkg-buildpackage -us -uc -b` leaves in debian/ of a clone
SKIP: {
    my $gitignore = slurp('.gitignore');
    skip 'no .gitignore: not a git checkout (a tarball)', 5 unless defined $gitignore;
    my @ignored = grep { /\S/ && !/^#/ } split /\n/, $gitignore;
    for my $left (qw(debian/.debhelper/ debian/files debian/libfastfile-perl.substvars
                     debian/libfastfile-perl/ debian/debhelper-build-stamp)) {
        my $glob = "/$left";
        ok((grep { my $re = quotemeta $_; $re =~ s/\\\*/[^\/]*/g; $glob =~ /\A$re\z/ } @ignored),
           ".gitignore covers $left");
    }
}

SKIP: {
    skip 'make deb-check runs as root', 3 if $> != 0;
    my @missing = grep { system("command -v $_ >/dev/null 2>&1") } qw(dpkg-buildpackage dh lintian man);
    skip "make deb-check needs @missing (apt-get install dpkg-dev debhelper lintian man-db)", 3 if @missing;
    skip 'libfastfile-perl is installed: deb-check refuses before its shadow check', 3
        if `dpkg-query -W -f '\${Status}' libfastfile-perl 2>/dev/null` =~ /ok installed/;
    my $dir = File::Temp::tempdir('debshadow-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    mkdir "$dir/perl5" or die "$dir/perl5: $!";
    open my $fh, '>', "$dir/perl5/FastFile.pm" or die "$dir/perl5/FastFile.pm: $!";
    print $fh "package FastFile; our \$VERSION = '0.01'; 1;\n";
    close $fh or die "$dir/perl5/FastFile.pm: $!";
    local $ENV{PERL5LIB} = "$dir/perl5";
    my $out = `sh xt/tools/debcheck.sh 2>&1`;
    isnt($?, 0, 'deb-check refuses while another FastFile shadows the package');
    like($out, qr{^\Q$dir/perl5/FastFile.pm\E$}m, '... and names the copy');
    like($out, qr/cpanm --uninstall/, '... and says how to remove it');
}
done_testing;
