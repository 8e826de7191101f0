/* ff_syscall.h - private to the perl-free core (ff_io.c, ff_batch.c): how a
 * syscall is made there. EINTR is retried after the caller's callback has
 * run perl's pending signal handlers (which may not return). */
#ifndef FF_SYSCALL_H
#define FF_SYSCALL_H

#include <errno.h>
#include <fcntl.h>

#include "ff_compat.h"
#include "ff_io.h"

/* A temp file: ours alone, never inherited by a child that execs. */
#define FF_TEMP_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC)

static inline void interrupted(const struct ff_eintr *intr)
{
    if (intr && intr->fn)
        intr->fn(intr->ctx);
}

/* err = errno of `expr` (0 on success), retried while it is EINTR */
#define FF_SYSCALL(err, intr, expr)                     \
    do {                                                \
        (err) = (expr) < 0 ? errno : 0;                 \
        if ((err) == EINTR)                             \
            interrupted(intr);                          \
    } while ((err) == EINTR)

#endif
