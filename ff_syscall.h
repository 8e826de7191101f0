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

/* Run the pending signal handlers (short writes, the moment before the
 * rename). Returns what the callback returns: nonzero when a signal was
 * pending. */
static inline int interrupted(const struct ff_eintr *intr)
{
    return intr && intr->fn ? intr->fn(intr->ctx) : 0;
}

/* The one rule of every EINTR retry loop: run the pending signal handlers,
 * then 1 (retry) or 0 (give up: fail with EINTR). *spins counts the EINTRs
 * in a row that came with no signal: a misbehaving FUSE server or an NFS
 * "intr" mount may answer EINTR forever, and retrying that would spin at
 * full CPU. A signal handled starts the count again, so an alarm or a timer
 * firing often never makes a call fail. */
static inline int ff_retry_eintr(const struct ff_eintr *intr, unsigned *spins)
{
    if (interrupted(intr))
        *spins = 0;
    else if (++*spins >= FF_EINTR_SPINS_MAX)
        return 0;
    return 1;
}

/* err = errno of `expr` (0 on success), retried while it is EINTR, up to
 * ff_retry_eintr's bound */
#define FF_SYSCALL(err, intr, expr)                                     \
    do {                                                                \
        unsigned ff_spins_ = 0;                                         \
        do                                                              \
            (err) = (expr) < 0 ? errno : 0;                             \
        while ((err) == EINTR && ff_retry_eintr(intr, &ff_spins_));     \
    } while (0)

#endif
