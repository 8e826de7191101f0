/* ff_batch_barrier.c - the threads of file_set_contents_many's fsync
 * barrier. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* fdatasync, O_PATH (ff_compat.h) */
#endif
#include "ff_batch_int.h"
#include "ff_syscall.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

/* Threads of the barrier: on ext4 the first fdatasync commits the journal
 * for all the temps, and each later one, finding its commit done, still
 * sends the disk a cache flush of its own (one per file). fdatasyncs that
 * wait together on one commit share its flush: a few threads, each
 * syncing its share of the window, send far fewer (bench/barrier.c:
 * sfr+8threads). Every temp is still fdatasynced before any rename. */

struct sync_share {
    struct ff_batch *b;
    size_t from, to;            /* window[from .. to) */
    size_t failed;              /* the window slot that failed */
    int err;
};

/* fdatasync window[from .. to); no intr callback (threads may be running:
 * no perl code may run), EINTR retried as in the renames */
static void *sync_share_run(void *p)
{
    struct sync_share *s = p;
    size_t w;
    int err;

    s->err = 0;
    for (w = s->from; w < s->to; w++) {
        FF_SYSCALL(err, NULL, ff_fdatasync(s->b->files[s->b->window[w]].a.fd));
        if (err && !FF_CANNOT_SYNC(err)) {
            s->err = err;
            s->failed = w;
            break;
        }
    }
    return NULL;
}

/* The window's fdatasyncs, split among threads (the calling one too).
 * Where a thread cannot be made, the calling thread does its share. The
 * first failure in window order is told. */
int ff_batch_sync_window_threaded(struct ff_batch *b, size_t nshares)
{
    struct sync_share share[FF_SYNC_THREADS];
    pthread_t tid[FF_SYNC_THREADS];
    int started[FF_SYNC_THREADS] = { 0 };
    pthread_attr_t attr;
    sigset_t all, old;
    size_t k;
    int have_attr;

    for (k = 0; k < nshares; k++) {
        share[k].b = b;
        share[k].from = b->window_n * k / nshares;
        share[k].to = b->window_n * (k + 1) / nshares;
        share[k].err = 0;
    }
    have_attr = pthread_attr_init(&attr) == 0;
    if (have_attr)
        pthread_attr_setstacksize(&attr, 64 * 1024);   /* fdatasync needs little */
    /* The threads take no signal: perl's handlers stay with this thread.
     * Nor does this thread until they are done: no handler may run while
     * they use the temps' fds, and perl dies once 120 signals caught wait
     * for their handlers. Blocked, each kind waits in the kernel, once;
     * the caller handles them after (barrier). */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (k = 1; k < nshares; k++)
        started[k] = pthread_create(&tid[k], have_attr ? &attr : NULL, sync_share_run, &share[k]) == 0;
    if (have_attr)
        pthread_attr_destroy(&attr);
    for (k = 0; k < nshares; k++)
        if (!started[k])
            sync_share_run(&share[k]);
    for (k = 1; k < nshares; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (k = 0; k < nshares; k++) {
        if (share[k].err) {
            b->failed = b->window[share[k].failed];
            return share[k].err;
        }
    }
    return 0;
}
