/* ff_batch_cache.c - file_set_contents_many's directory cache: at most
 * cache_cap O_PATH fds of directories, a directory reopened by name proven
 * to be the one first opened. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* O_PATH (ff_compat.h) */
#endif
#include "ff_batch_int.h"
#include "ff_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static size_t fd_budget(void)
{
    struct rlimit rl;
    size_t limit = 1024;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)1 << 20 ? (size_t)1 << 20
                                                                             : (size_t)rl.rlim_cur;
    /* half for the batch, the rest for the process that calls it (and the
     * batch gives fds back when it runs out: EMFILE evicts a directory or
     * runs a window's barrier early) */
    return limit / 2 < 2 ? 2 : limit / 2;
}

int ff_batch_make_cache(struct ff_batch *b)
{
    /* a few files cannot hold many fds: no getrlimit for them */
    size_t budget = b->n <= 4 ? 2 * b->n : fd_budget(), i;

    if (b->opt.fsync) {
        b->window_cap = budget / 2 < 1 ? 1 : budget / 2 > FF_BATCH_OPEN_MAX ? FF_BATCH_OPEN_MAX : budget / 2;
        if (!(b->window = malloc(b->window_cap * sizeof *b->window)))
            return ENOMEM;
    }
    b->cache_cap = budget - b->window_cap;
    if (b->cache_cap < 1)
        b->cache_cap = 1;
    if (b->cache_cap > FF_BATCH_DIRS_MAX)
        b->cache_cap = FF_BATCH_DIRS_MAX;
    if (b->cache_cap > b->ndirs)
        b->cache_cap = b->ndirs;
    if (!(b->cache = malloc(b->cache_cap * sizeof *b->cache)))
        return ENOMEM;
    for (i = 0; i < b->cache_cap; i++)
        b->cache[i] = FF_NONE;
    return 0;
}

static void close_dir(struct ff_batch *b, size_t slot)
{
    struct ff_batch_dir *d = &b->dirs[b->cache[slot]];
    struct stat st;

    /* Whatever leaves the cache is reopened by name and must prove it is
     * the same directory: its identity is taken now, from the fd. (An
     * fstat that fails leaves an identity no directory has: the reopen
     * fails with ESTALE.) */
    if (!d->statted) {
        int ok = fstat(d->fd, &st) == 0;
        d->dev = ok ? st.st_dev : 0;
        d->ino = ok ? st.st_ino : 0;
        d->statted = 1;
    }
    ff_close_read(d->fd);
    d->fd = -1;
    b->cache[slot] = FF_NONE;
}

/* Out of fds (EMFILE): close a cached directory other than dirs[keep]. */
int ff_batch_evict_one(struct ff_batch *b, size_t keep)
{
    size_t i;

    for (i = 0; i < b->cache_cap; i++)
        if (b->cache[i] != FF_NONE && b->cache[i] != keep) {
            close_dir(b, i);
            return 1;
        }
    return 0;
}

/* dirs[k]'s fd, opened into the cache if it is not there. A directory seen
 * before must be the same one (it may have been moved meanwhile: then its
 * name leads elsewhere): ESTALE if not. */
int ff_batch_open_dir(struct ff_batch *b, size_t k, const struct ff_eintr *intr)
{
    struct ff_batch_dir *d = &b->dirs[k];
    size_t slot;
    struct stat st;
    int err, fresh = 0;

    if (d->fd >= 0)
        return 0;
    /* The phases scan the directories in order (look, write) and again in
     * the caller's order (rename): a plain FIFO smaller than the scan
     * misses on every directory. So most slots, once filled, stay (hits in
     * every scan); an eighth turns over, for the directories a phase
     * comes back to soon (the caller's order may alternate a few). At
     * least four (half of a smaller cache): one slot that turns over
     * reopened two alternating directories for every file. */
    if (b->cache_fill < b->cache_cap) {
        slot = b->cache_fill;   /* taken once the open succeeds: a missing
                                 * directory (mkdir makes it later) must not
                                 * keep a slot, or the cache turns over early
                                 * and a directory moved meanwhile cannot be
                                 * found again */
        fresh = 1;
    } else {
        size_t turn = b->cache_cap / 8;
        if (turn < 4)
            turn = b->cache_cap / 2 < 4 ? b->cache_cap / 2 : 4;
        if (turn < 1)
            turn = 1;
        slot = b->cache_cap - turn + b->cache_next;
        b->cache_next = (b->cache_next + 1) % turn;
    }
    if (b->cache[slot] != FF_NONE)
        close_dir(b, slot);
    do
        FF_SYSCALL(err, intr, d->fd = openat(b->cwd_fd, d->path, FF_DIR_FLAGS));
    while (err == EMFILE && ff_batch_evict_one(b, k));
    if (err) {
        d->fd = -1;
        return err;
    }
    if (d->statted || d->need_id) {
        FF_SYSCALL(err, intr, fstat(d->fd, &st));
        if (err) {
            ff_close_read(d->fd);
            d->fd = -1;
            return err;
        }
        if (d->statted && (st.st_dev != d->dev || st.st_ino != d->ino)) {
            ff_close_read(d->fd);
            d->fd = -1;
            return ESTALE;
        }
        d->dev = st.st_dev;
        d->ino = st.st_ino;
        d->statted = 1;
    }
    b->cache[slot] = k;
    b->cache_fill += fresh;
    return 0;
}
