/*
 * floor.c - the least an XSUB can do for file_set_contents($file, $data):
 * bench/vsbare.pl's third contestant, between FastFile and bare C. It takes
 * the two arguments' strings (SvPV), builds "<file>.tmp.<pid>" with a
 * suffix made once, and makes the same four syscalls (open O_EXCL, write,
 * close, rename), croaking on an error. Nothing else: no snapshot of the
 * arguments, no signal handling, no cleanup of the temp on error, no
 * check of the pid after a fork, no NUL check of the name. What it costs
 * over bare C is perl's loop and call; what FastFile costs over it is
 * what FastFile does for its guarantees.
 *
 * vsbare.pl compiles it with perl's own cc and flags (-shared, -I CORE)
 * and loads it with DynaLoader: no xsubpp, no MakeMaker. One XSUB,
 * installed as FastFileFloor::set.
 */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* ".tmp.<pid>", made on the first call, as bare.c makes it once */
static char floor_suffix[32];
static size_t floor_suffix_len;

XS(ff_floor_set);
XS(ff_floor_set)
{
    dXSARGS;
    STRLEN flen, dlen;
    const char *f, *d;
    char tmp[4096 + 32];
    int fd;

    PERL_UNUSED_VAR(cv);
    if (items != 2)
        croak_xs_usage(cv, "file, data");
    if (!floor_suffix_len)
        floor_suffix_len = (size_t)snprintf(floor_suffix, sizeof floor_suffix, ".tmp.%ld",
                                            (long)getpid());
    f = SvPV(ST(0), flen);
    d = SvPV(ST(1), dlen);
    if (flen >= 4096)
        croak("floor: name too long");
    memcpy(tmp, f, flen);
    memcpy(tmp + flen, floor_suffix, floor_suffix_len + 1);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        croak("floor: open %s: %s", tmp, strerror(errno));
    while (dlen > 0) {
        ssize_t n = write(fd, d, dlen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            croak("floor: write %s: %s", tmp, strerror(errno));
        d += n;
        dlen -= (size_t)n;
    }
    if (close(fd) < 0)
        croak("floor: close %s: %s", tmp, strerror(errno));
    if (rename(tmp, f) < 0)
        croak("floor: rename %s: %s", f, strerror(errno));
    XSRETURN_YES;
}
