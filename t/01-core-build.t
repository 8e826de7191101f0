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

use Test::More;
use lib 't/lib';
use FFTest qw(c_compilers);

my @sources = sort glob('ff_*.c');
plan skip_all => 'no ff_*.c here (run from the distribution root)' unless @sources;

my @strict = qw(-Werror=implicit-function-declaration -Werror=implicit-int
                -Werror=int-conversion -Wall -Wextra -U_GNU_SOURCE);

my @modes = (
    [ 'ISO C99'                                   => '-std=c99' ],
    [ 'ISO C11'                                   => '-std=c11' ],
    [ "the compiler's default"                    => () ],
    [ 'libc without renameat2 (raw syscall)'      => qw(-std=c99 -DFF_NO_RENAMEAT2) ],
    [ 'libc and headers without renameat2'        => qw(-std=c99 -DFF_NO_RENAMEAT2 -DFF_NO_RENAMEAT2_SYSCALL) ],
    [ 'the portable build'                        => qw(-std=c99 -DFF_PORTABLE) ],
    [ 'portable, libc without fdatasync'          => qw(-std=c99 -DFF_PORTABLE -DFF_NO_FDATASYNC) ],
);

for my $compiler (c_compilers()) {
    my ($cname, $cc, $why) = @$compiler;
    SKIP: {
        skip "$cname: $why", 2 * @sources * @modes unless $cc;
        for my $src (@sources) {
            for my $mode (@modes) {
                my ($name, @flags) = @$mode;
                # -fsyntax-only: the diagnostics come from the front end; no object needed
                my $out = `$cc @flags @strict -fsyntax-only $src 2>&1`;
                is($?, 0, "$cname: $src compiles: $name") or diag($out);
                is($out, '', "$cname: $src: no diagnostics: $name");
            }
        }
    }
}

done_testing;
