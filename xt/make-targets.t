use strict;
use warnings;

# The extra make targets must test the perl that configured the build, not
# whatever perl PATH finds first: from a 5.40 build, `make asan` once tested
# Debian's 5.36 and said "clean".

use Test::More;
use lib 't/lib';
use FFTest;
use File::Temp ();

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

# make bench leaves the tracked tables in bench/ alone unless asked
# (BENCH_UPDATE=1, make bench-update), and says where they went
{
    my $where = sub {
        my ($env) = @_;
        my $code = 'print BenchOut::wrote(BenchOut::path(q{results.md}))';
        return scalar `env -u BENCH_UPDATE -u BENCH_OUT $env $^X -Ibench/lib -MBenchOut -e '$code'`;
    };
    my $out = File::Temp::tempdir('benchout-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    like($where->(''), qr{^wrote bench-out/results\.md \(BENCH_UPDATE=1 }, 'make bench writes into bench-out/ and says so');
    rmdir 'bench-out';
    like($where->("BENCH_OUT=$out"), qr{^wrote \Q$out\E/results\.md }, '... or into BENCH_OUT');
    like($where->('BENCH_UPDATE=1'), qr{^wrote bench/results\.md \(the tracked copy\)}, 'BENCH_UPDATE=1 replaces the tracked copy');
    like(join('', `make -n bench-update 2>/dev/null`), qr/BENCH_UPDATE=1/, 'make bench-update sets BENCH_UPDATE=1');
}

# make bench names the filesystem where /proc/mounts has no entry above the
# directory (a chroot): from stat -f and the device, never '?'
{
    require lib;
    lib->import('bench/lib');
    require BenchOut;
    my $fs = BenchOut::fs_of('/tmp', '/dev/null');
    my $want = `stat -f -c %T /tmp`;
    chomp $want;
    like($fs->{type}, qr/^\Q$want\E \(stat -f/, "no mount table: the type from stat -f ($fs->{type})");
    like($fs->{dev}, qr/^device \d+:\d+\z/, "... and the device ($fs->{dev})");
    like(BenchOut::expect(), qr/BENCH_SCALE_N=0 skips/, 'make bench says first how to skip the scale runs');
    like(join('', `make -n bench 2>/dev/null`), qr/BenchOut::expect/, '... make bench prints it');
}

done_testing;
