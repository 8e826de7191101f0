use strict;
use warnings;

# The perl-free core on its own, linked against each C library here: glibc
# (perl's cc, clang) and musl (musl-gcc), each as the Linux build and as the
# portable build (FF_PORTABLE: every Linux-only call's POSIX fallback).
# t/core/core-smoke.c runs atomic replace (plain, fsync, noclobber, mkdir),
# mkdir -p and a batch with fsync on a tmpfs (/dev/shm) and checks the files.
# Built as ISO C99 with t/01-core-build.t's flags, these builds are two of
# its modes ("ISO C99", "the portable build"): each file is reported here as
# t/01 reports the others.

use Test::More;
use lib 't/lib';
use FFTest qw(c_compilers core_cflags each_source_compiles front_end run_cmd);
use Config;
use File::Path ();
use File::Spec ();
use File::Temp ();

my @sources = sort glob('ff_*.c');
plan skip_all => 'no ff_*.c here (run from the distribution root)' unless @sources;
plan skip_all => 'not Linux: the Linux build cannot be built here' unless $^O eq 'linux';

# a tmpfs where a normal user may write: /dev/shm on Linux, else the temp dir
my $shm = '/dev/shm';
my $on_tmpfs = -d $shm && -w _ && do {
    open my $fh, '<', '/proc/mounts' or die "/proc/mounts: $!";
    grep { (split ' ')[1] eq $shm && (split ' ')[2] eq 'tmpfs' } <$fh>;
};
my $run_dir = File::Temp::tempdir('ffsmoke-XXXXXX', ($on_tmpfs ? (DIR => $shm) : (TMPDIR => 1)), CLEANUP => 1);
my $bin_dir = File::Temp::tempdir('ffsmokebin-XXXXXX', TMPDIR => 1, CLEANUP => 1);
note($on_tmpfs ? "files written on the tmpfs $shm" : "no writable tmpfs at $shm: files written in $run_dir");

my $CHECKS = 12;    # "ok" lines core-smoke.c prints

# ($status, $output) of building $bin from @src with @$cmd. With clang its
# front end compiles them all in one process (front_end), each object beside
# its source: the sources and headers are linked into a directory of this
# test's, in their places (core-smoke.c includes "../../ff_batch.h"), the
# objects made there, then linked.
sub build {
    my ($bin, $cmd, @src) = @_;
    my $tree = "$bin.d";
    for my $file (@src, glob('ff_*.h')) {
        (my $sub = "$tree/$file") =~ s{/[^/]+\z}{};
        File::Path::make_path($sub);
        symlink File::Spec->rel2abs($file), "$tree/$file" or die "symlink $tree/$file: $!";
    }
    my @in_tree = map { "$tree/$_" } @src;
    my @front = front_end(@$cmd, '-c', $in_tree[0]);
    return run_cmd(@$cmd, '-o', $bin, @src) unless @front;
    my ($status, $out) = run_cmd(@front, @in_tree);
    return ($status, $out) if $status;
    my ($link_status, $link_out) = run_cmd($cmd->[0], '-o', $bin, map { s/\.c\z/.o/r } @in_tree);
    return ($link_status, $out . $link_out);
}

my $n = 0;
for my $compiler (c_compilers()) {
    my ($cname, $cc, $why) = @$compiler;
    for my $portable (0, 1) {
        my $build = $portable ? 'portable build' : 'Linux build';
        SKIP: {
            skip "$cname: $why", 7 + 2 * @sources unless $cc;
            my $bin = "$bin_dir/smoke" . $n++;
            my @cmd = ($cc, '-std=c99', ($portable ? '-DFF_PORTABLE' : ()), core_cflags());
            my ($status, $out) = build($bin, \@cmd, 't/core/core-smoke.c', @sources);
            is($status, 0, "$cname, $build: builds") or diag($out);
            is($out, '', "$cname, $build: no diagnostics");
            # a file on its own (where the build is not clean): compiled, as in the build
            each_source_compiles($cname, $portable ? 'the portable build' : 'ISO C99', [ $status, $out ],
                                 [ @cmd, '-c', '-o', '/dev/null' ], @sources);
            skip "$cname, $build: did not build", 5 unless -x $bin;

            my @lines = `$bin $run_dir`;
            is($?, 0, "$cname, $build: exits 0") or diag(@lines);
            my @ok = grep { /^ok - / } @lines;
            is(scalar(@ok), $CHECKS, "$cname, $build: all $CHECKS checks pass") or diag(@lines);
            my ($features) = map { /^features(.*)$/ ? $1 : () } @lines;
            # the build's promise: the Linux calls on Linux, none of them when portable
            like($features // '', $portable ? qr/\A portable(?: fdatasync)?\z/
                                            : qr/\A renameat2 sync_file_range getrandom fdatasync O_PATH\z/,
                 "$cname, $build: uses what it should (features:" . ($features // '?') . ")");
            my ($libc) = map { /^libc (.*)$/ ? $1 : () } @lines;
            # musl-gcc links musl; the others the libc perl has
            is($libc, $cname ne 'musl-gcc' && $Config{gnulibc_version} ? 'glibc' : 'not glibc',
               "$cname, $build: linked with the libc meant");
            opendir my $dh, $run_dir or die "$run_dir: $!";
            is_deeply([ grep { !/\A\.\.?\z/ } readdir $dh ], [], "$cname, $build: leaves nothing behind");
        }
    }
}

done_testing;
