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
use FFTest qw(c_compilers core_cflags each_source_compiles run_cmd);

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
# all in one process (compile_all).
for my $compiler (c_compilers()) {
    my ($cname, $cc, $why) = @$compiler;
    SKIP: {
        skip "$cname: $why", 2 * @sources * @modes unless $cc;
        for my $mode (@modes) {
            my ($name, @flags) = @$mode;
            my @cmd = ($cc, @flags, core_cflags());
            # -fsyntax-only: the diagnostics come from the front end; no object needed
            each_source_compiles($cname, $name, [ compile_all([ @cmd, '-fsyntax-only' ], @sources) ],
                                 \@cmd, @sources);
        }
    }
}

# ($status, $output) of @$cmd run on all of @src. clang's driver, given
# several files, starts its front end (clang -cc1: the large binary, a
# fifth of a second to start) once per file; the front end itself takes
# them all in one process, checking each as its own translation unit. So
# where the driver shows (-###) a front end for one file, and says nothing
# else, that command runs with every file in place of the one.
sub compile_all {
    my ($cmd, @src) = @_;
    my ($status, $plan) = run_cmd(@$cmd, '-###', $src[0]);
    my @lines = split /\n/, $plan;
    my @front = grep { /^\s*"[^"]*" "-cc1" / } @lines;
    return run_cmd(@$cmd, @src)
        if $status || @front != 1 || grep { /\b(?:warning|error):/i } @lines;
    my @args = map { s/\\(.)/$1/gsr } $front[0] =~ /"((?:[^"\\]|\\.)*)"/g;
    return run_cmd(@$cmd, @src) unless $args[-1] eq $src[0];
    return run_cmd(@args[0 .. $#args - 1], @src);
}

done_testing;
