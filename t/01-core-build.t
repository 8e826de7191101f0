use strict;
use warnings;

# The perl-free C core (ff_*.c) must compile with only the feature macros it
# defines itself. perl's ccflags differ between builds (only threaded perls
# pass -D_GNU_SOURCE), so a core that leans on them compiles on one perl and
# not on another. Compiled here in strict ISO mode, where the libc declares
# nothing beyond ISO C unless the file asks for it, with implicit
# declarations as errors; also as on a libc without renameat2, and as the
# portable build (FF_PORTABLE: every Linux-only call's POSIX fallback). With
# every compiler here: perl's, clang, and musl-gcc (musl's headers: no
# __GLIBC_PREREQ, no renameat2 declared).
#
# Two modes are t/02-core-run.t's: ISO C99 as the Linux build and as the
# portable build. It builds the core with these flags (and with code
# generation: the same front end, and what a back end finds besides) and
# reports each file as this test would; compiling them here as well was the
# same check twice.

use Test::More;
use lib 't/lib';
use FFTest qw(c_compilers core_cflags each_source_compiles front_end run_cmd);

my @sources = sort glob('ff_*.c');
plan skip_all => 'no ff_*.c here (run from the distribution root)' unless @sources;

my @modes = (
    [ 'ISO C11'                                   => '-std=c11' ],
    [ "the compiler's default"                    => () ],
    [ 'libc without renameat2 (raw syscall)'      => qw(-std=c99 -DFF_NO_RENAMEAT2) ],
    [ 'libc and headers without renameat2'        => qw(-std=c99 -DFF_NO_RENAMEAT2 -DFF_NO_RENAMEAT2_SYSCALL) ],
    [ 'portable, libc without fdatasync'          => qw(-std=c99 -DFF_PORTABLE -DFF_NO_FDATASYNC) ],
);

# Every file of a mode in one compiler run: the driver (and musl-gcc's shell
# script) starts once, not once per file, and clang's front end checks them
# all in one process (front_end).
for my $compiler (c_compilers()) {
    my ($cname, $cc, $why) = @$compiler;
    SKIP: {
        skip "$cname: $why", 2 * @sources * @modes unless $cc;
        for my $mode (@modes) {
            my ($name, @flags) = @$mode;
            # -fsyntax-only: the diagnostics come from the front end; no object needed
            my @cmd = ($cc, @flags, core_cflags(), '-fsyntax-only');
            each_source_compiles($cname, $name, [ compile_all(\@cmd, @sources) ], \@cmd, @sources);
        }
    }
}

# ($status, $output) of @$cmd run on all of @src: with clang, its front end
# once for them all (front_end).
sub compile_all {
    my ($cmd, @src) = @_;
    my @front = front_end(@$cmd, $src[0]);
    return run_cmd(@front ? @front : @$cmd, @src);
}

done_testing;
