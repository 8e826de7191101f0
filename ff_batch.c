/* ff_batch.c - file_set_contents_many's syscalls, without perl.
 *
 * Per file without fsync: fstatat (is the target a directory? preserve and
 * if_changed need it anyway), openat, write, close, renameat, all relative
 * to an fd of its directory, so the kernel walks the path once per
 * directory, not twice per file. With fsync: sync_file_range starts each
 * temp's writeback as soon as it is written, fdatasync of each (from a few
 * threads, see barrier) then mostly
 * finds its data on disk already (one journal commit serves many), and
 * each directory is fsynced once after the renames. bench/barrier.c
 * measured the alternatives.
 *
 * Directories are grouped by name with one sort of the runs of files that
 * share one (a batch in one directory sorts nothing), told apart by device
 * and inode with one sort of the directories, and targets given twice are
 * found with a hash: nothing compares every pair.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* sync_file_range, O_PATH, statx (ff_compat.h) */
#endif
#include "ff_batch.h"
#include "ff_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#define FF_NONE FF_BATCH_NONE

/* A directory is opened only to look names up in it: O_PATH needs no read
 * permission (a 0300 directory works, as with file_set_contents; the
 * portable build's fallback needs it, see ff_compat.h). */
#define FF_DIR_FLAGS (FF_O_PATH | O_DIRECTORY | O_CLOEXEC)

/* "cannot do that here" answers of the sync calls: not errors */
#define FF_CANNOT_SYNC(err) ((err) == EINVAL || (err) == ENOSYS || (err) == EOPNOTSUPP)

#define LEAF(f) ((f)->a.target + (f)->leaf)
#define TEMP_LEAF(f) ((f)->a.temp + (f)->leaf)

int ff_batch_init(struct ff_batch *b, size_t n, const struct ff_options *opt,
                  const struct ff_eintr *intr)
{
    memset(b, 0, sizeof *b);
    b->opt = *opt;
    b->intr = intr;
    b->failed = b->failed_dir = b->dup_first = b->dup_second = FF_NONE;
    b->tail = "";
    b->sync_fd = -1;
    b->files = n ? calloc(n, sizeof *b->files) : NULL;
    b->cap = b->files ? n : 0;
    return n && !b->files ? ENOMEM : 0;
}

int ff_batch_add(struct ff_batch *b, const char *path, const char *buf, size_t len)
{
    struct ff_batch_file *f;
    struct ff_options opt = b->opt;
    int err;

    if (b->n == b->cap)
        return ENOMEM;
    f = &b->files[b->n];
    /* the batch looks at the old target itself (fstatat): the single-file
     * prepare only follows symlinks */
    opt.preserve = opt.if_changed = 0;
    err = ff_atomic_init(&f->a, path, &opt, b->intr);
    b->n++;             /* discard frees it even when init failed */
    f->buf = buf;
    f->len = len;
    return err;
}

/* ---- names ---- */

/* The temp's name: "<target>" + suffix (".tmp.<pid>", made once per
 * batch), room left for a random suffix; where the leaf starts, and the
 * length of the directory part as ff_dir_of cuts it (0: "."). */
static int name_temp(struct ff_batch_file *f, const char *suffix, size_t suffix_len)
{
    const char *t = f->a.target, *slash = strrchr(t, '/');
    size_t len = strlen(t);

    f->leaf = slash ? (size_t)(slash + 1 - t) : 0;
    if (slash) {
        while (slash > t && slash[-1] == '/')
            slash--;
        f->dir_len = slash == t ? 1 : (size_t)(slash - t);     /* "/x": "/" */
    }
    if (!(f->a.temp = malloc(len + suffix_len + FF_TEMP_SUFFIX_MAX)))
        return ENOMEM;
    memcpy(f->a.temp, t, len);
    memcpy(f->a.temp + len, suffix, suffix_len + 1);
    return 0;
}

static int same_dir_name(const struct ff_batch_file *x, const struct ff_batch_file *y)
{
    return x->dir_len == y->dir_len && memcmp(x->a.target, y->a.target, x->dir_len) == 0;
}

static int cmp_dir_name(const struct ff_batch_file *x, const struct ff_batch_file *y)
{
    size_t n = x->dir_len < y->dir_len ? x->dir_len : y->dir_len;
    int c = memcmp(x->a.target, y->a.target, n);
    return c ? c : (x->dir_len > y->dir_len) - (x->dir_len < y->dir_len);
}

/* files[start .. start + len): consecutive files in one directory (qsort has
 * no context argument: each run carries the files) */
struct ff_run { const struct ff_batch_file *files; size_t start, len; };

static int cmp_run(const void *x, const void *y)
{
    const struct ff_run *p = x, *q = y;
    int c = cmp_dir_name(&p->files[p->start], &q->files[q->start]);
    return c ? c : (p->start > q->start) - (p->start < q->start);
}

/* b->order: the files grouped by directory name; b->dirs: one per name,
 * in name order (a parent before its subdirectories: mkdir relies on it). */
static int group_by_dir(struct ff_batch *b)
{
    struct ff_run *runs;
    size_t nruns = 0, i, j, k;

    if (!(b->order = malloc(b->n * sizeof *b->order)) || !(runs = malloc(b->n * sizeof *runs)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        if (i == 0 || !same_dir_name(&b->files[i - 1], &b->files[i])) {
            runs[nruns].files = b->files;
            runs[nruns].start = i;
            runs[nruns++].len = 0;
        }
        runs[nruns - 1].len++;
    }
    if (nruns > 1)
        qsort(runs, nruns, sizeof *runs, cmp_run);
    if (!(b->dirs = calloc(nruns, sizeof *b->dirs))) {
        free(runs);
        return ENOMEM;
    }
    for (i = j = 0; i < nruns; i++) {
        const struct ff_batch_file *first = &b->files[runs[i].start];
        struct ff_batch_dir *d = &b->dirs[b->ndirs];

        if (i == 0 || !same_dir_name(&b->files[runs[i - 1].start], first)) {
            size_t len = first->dir_len ? first->dir_len : 1;
            d->fd = -1;
            d->same_as = b->ndirs;
            d->first = j;
            if (!(d->path = malloc(len + 1))) {
                free(runs);
                return ENOMEM;
            }
            memcpy(d->path, first->dir_len ? first->a.target : ".", len);
            d->path[len] = '\0';
            b->ndirs++;
        }
        d = &b->dirs[b->ndirs - 1];
        for (k = runs[i].start; k < runs[i].start + runs[i].len; k++) {
            b->order[j++] = k;
            b->files[k].dir = b->ndirs - 1;
            d->count++;
        }
    }
    free(runs);
    return 0;
}

/* ---- the directory cache: at most cache_cap O_PATH fds ---- */

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

static int make_cache(struct ff_batch *b)
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
static int evict_one(struct ff_batch *b, size_t keep)
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
static int dir_fd(struct ff_batch *b, size_t k, const struct ff_eintr *intr)
{
    struct ff_batch_dir *d = &b->dirs[k];
    size_t slot;
    struct stat st;
    int err;

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
        slot = b->cache_fill++;
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
        FF_SYSCALL(err, intr, d->fd = open(d->path, FF_DIR_FLAGS));
    while (err == EMFILE && evict_one(b, k));
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
    return 0;
}

/* ---- looking: nothing is changed ---- */

/* FNV-1a of a leaf, from the batch's random seed (and a directory index:
 * NONE for the leaf alone) */
static uint64_t leaf_hash(const struct ff_batch *b, size_t dir, const char *leaf)
{
    const unsigned char *p = (const unsigned char *)leaf;
    uint64_t h = (1469598103934665603ULL ^ b->seed) ^ (uint64_t)dir * 0x9e3779b97f4a7c15ULL;

    while (*p)
        h = (h ^ *p++) * 1099511628211ULL;
    return h;
}

/* The name hashes' seed, without a syscall (getrandom would be one more
 * per batch): the vDSO clock and the randomized stack address. Enough that
 * no list of names collides in every run. */
static uint64_t hash_seed(const struct ff_batch *b)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_nsec << 24) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts
           ^ (uint64_t)(uintptr_t)b->files;
}

/* A slot table for n file indices (index + 1; 0: empty), its mask */
static size_t *make_slots(size_t n, size_t *mask)
{
    size_t size = 16;

    while (size < 2 * n)
        size *= 2;
    *mask = size - 1;
    return calloc(size, sizeof(size_t));
}

/* Which directories need their device and inode: only two names of one
 * directory holding the same leaf make a duplicate, so only directories
 * that share a leaf with another directory name are fstatted (with fsync,
 * all: one fsync per directory). A batch whose leaves differ, or in one
 * directory, costs no fstat. */
static int mark_need_id(struct ff_batch *b)
{
    size_t mask, i, s, *slots;

    if (b->ndirs < 2)
        return 0;
    if (b->opt.fsync) {
        for (i = 0; i < b->ndirs; i++)
            b->dirs[i].need_id = 1;
        return 0;
    }
    if (!(slots = make_slots(b->n, &mask)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];

        /* a leaf is stored once: many files of one leaf do not make a long
         * probe, each stops at the first */
        for (s = (size_t)leaf_hash(b, FF_NONE, LEAF(f)) & mask; slots[s]; s = (s + 1) & mask) {
            const struct ff_batch_file *g = &b->files[slots[s] - 1];
            if (strcmp(LEAF(g), LEAF(f)) == 0)
                break;
        }
        if (!slots[s]) {
            slots[s] = i + 1;
        } else if (b->files[slots[s] - 1].dir != f->dir) {
            b->dirs[b->files[slots[s] - 1].dir].need_id = 1;
            b->dirs[f->dir].need_id = 1;
        }
    }
    free(slots);
    return 0;
}

/* The old target: not a directory, absent under noclobber, its stat kept
 * for preserve and if_changed. Without those two only its type is needed,
 * which ff_lstat_type takes from the kernel's cache: on FUSE (pmxcfs) an
 * existing target then costs no request, as in a single call. */
static int look_at_target(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    int dirfd = b->dirs[f->dir].fd, need_stat = b->opt.preserve || b->opt.if_changed;
    struct stat st;
    mode_t type = 0;
    int err;

    a->step = FF_STEP_STAT;
    if (need_stat)
        FF_SYSCALL(err, b->intr, fstatat(dirfd, LEAF(f), &st, AT_SYMLINK_NOFOLLOW));
    else
        FF_SYSCALL(err, b->intr, ff_lstat_type(dirfd, LEAF(f), &type));
    if (err == ENOENT) {
        a->step = FF_STEP_NONE;
        return 0;
    }
    if (err)
        return err;
    if (need_stat)
        type = st.st_mode & S_IFMT;
    if (S_ISDIR(type)) {
        a->step = FF_STEP_NONE;     /* "unable to replace 'X' - Is a directory" */
        return EISDIR;
    }
    if (b->opt.noclobber) {
        a->step = FF_STEP_RENAME;   /* as a single call words it */
        return EEXIST;
    }
    f->existed = 1;
    if (!need_stat) {
        a->step = FF_STEP_NONE;
        return 0;
    }
    a->old = st;
    a->have_old = S_ISREG(st.st_mode);
    if (b->opt.preserve && a->have_old && st.st_uid != geteuid()) {
        /* another user's file: kept only where ff_sticky_trusts says */
        a->step = FF_STEP_PRESERVE;
        FF_SYSCALL(err, b->intr, fstat(b->dirs[b->files[i].dir].fd, &st));
        if (err)
            return err;
        if (!ff_sticky_trusts(&st, a->old.st_uid))
            return EACCES;
    }
    if (b->opt.preserve && a->have_old) {
        a->step = FF_STEP_PRESERVE;
        if ((err = ff_atomic_read_acl(a)))
            return err;
    }
    a->step = FF_STEP_NONE;
    return 0;
}

/* Each directory opened once (a missing one, with mkdir, noted for later)
 * and its targets looked at. */
static int look_at_dirs(struct ff_batch *b)
{
    size_t k, j;
    int err;

    for (k = 0; k < b->ndirs; k++) {
        struct ff_batch_dir *d = &b->dirs[k];

        b->failed_dir = k;
        b->dir_step = FF_DIR_OPEN;
        err = dir_fd(b, k, b->intr);
        if (err == ENOENT && b->opt.mkdir) {
            d->missing = 1;     /* made once every pair has passed */
            continue;
        }
        if (err)
            return err;
        b->failed_dir = FF_NONE;
        b->dir_step = FF_DIR_NONE;
        for (j = d->first; j < d->first + d->count; j++) {
            b->failed = b->order[j];
            if ((err = look_at_target(b, b->order[j])))
                return err;
        }
        b->failed = FF_NONE;
    }
    b->failed_dir = FF_NONE;
    b->dir_step = FF_DIR_NONE;
    return 0;
}

static int cmp_dev_ino(const void *x, const void *y)
{
    const struct ff_batch_dir *p = *(const struct ff_batch_dir *const *)x;
    const struct ff_batch_dir *q = *(const struct ff_batch_dir *const *)y;

    if (p->dev != q->dev)
        return p->dev < q->dev ? -1 : 1;
    if (p->ino != q->ino)
        return p->ino < q->ino ? -1 : 1;
    return (p > q) - (p < q);
}

/* Two names of one directory: one stands for both (one fd, one fsync, and
 * a target given under both names is found by find_duplicate). */
static int merge_same_dirs(struct ff_batch *b)
{
    struct ff_batch_dir **byid;
    size_t k, m = 0;

    if (b->ndirs < 2)
        return 0;
    if (!(byid = malloc(b->ndirs * sizeof *byid)))
        return ENOMEM;
    for (k = 0; k < b->ndirs; k++)
        if (b->dirs[k].statted)
            byid[m++] = &b->dirs[k];
    qsort(byid, m, sizeof *byid, cmp_dev_ino);
    for (k = 0; k < m; k++)
        byid[k]->same_as = k > 0 && byid[k]->dev == byid[k - 1]->dev && byid[k]->ino == byid[k - 1]->ino
                           ? byid[k - 1]->same_as : (size_t)(byid[k] - b->dirs);
    free(byid);
    for (k = 0; k < b->n; k++)
        b->files[k].dir = b->dirs[b->files[k].dir].same_as;
    return 0;
}

/* Two entries for one name in one directory: the second would silently
 * replace the first. A hash of (directory, leaf). */
static int find_duplicate(struct ff_batch *b)
{
    size_t mask, i, *slots;

    if (b->n < 2)
        return 0;
    if (!(slots = make_slots(b->n, &mask)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];
        size_t s;

        for (s = (size_t)leaf_hash(b, f->dir, LEAF(f)) & mask; slots[s]; s = (s + 1) & mask) {
            const struct ff_batch_file *g = &b->files[slots[s] - 1];
            if (g->dir == f->dir && strcmp(LEAF(g), LEAF(f)) == 0) {
                b->dup_first = slots[s] - 1;
                b->dup_second = i;
                free(slots);
                return EINVAL;
            }
        }
        slots[s] = i + 1;
    }
    free(slots);
    return 0;
}

/* ---- changing: directories made, temps written ---- */

/* After mkdir: a target that was absent may be a directory now, made for
 * another target ("n" => ..., "n/f" => ... in one batch). Its rename would
 * fail only after earlier targets were replaced: it fails here, and the
 * directories are removed again. */
static int look_again(struct ff_batch *b)
{
    size_t j, i;
    int err;

    for (j = 0; j < b->n; j++) {
        i = b->order[j];
        if (b->files[i].existed)
            continue;           /* it was there: no mkdir made it a directory */
        b->failed = i;
        if ((err = dir_fd(b, b->files[i].dir, b->intr))) {
            b->failed = FF_NONE;
            b->failed_dir = b->files[i].dir;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
            return err;
        }
        if ((err = look_at_target(b, i)))
            return err;
    }
    b->failed = FF_NONE;
    return 0;
}

/* mkdir -p of each missing directory, parents first (dirs are in name
 * order), each remembered with the levels it made: fsync makes them
 * durable, a failure removes them. */
static int make_dirs(struct ff_batch *b)
{
    size_t k;
    int err, any = 0;

    for (k = 0; k < b->ndirs; k++) {
        struct ff_batch_dir *d = &b->dirs[k];
        struct ff_batch_made *made;

        if (!d->missing)
            continue;
        b->failed_dir = k;
        b->dir_step = FF_DIR_MKDIR;
        if (!b->made && !(b->made = calloc(b->ndirs, sizeof *b->made)))
            return ENOMEM;
        made = &b->made[b->nmade];
        if (!(made->path = strdup(d->path)))
            return ENOMEM;
        b->nmade++;
        /* the path is the batch's before a mkdir runs: a handler that dies
         * meanwhile leaks nothing, and discard removes what was made */
        made->dir = k;
        if ((err = ff_mkdir_p(made->path, &made->levels, b->intr))) {
            b->failed_path = made->path;    /* cut at the level that failed */
            return err;
        }
        made->complete = 1;
        d->missing = 0;
        b->dir_step = FF_DIR_OPEN;
        if ((err = dir_fd(b, k, b->intr)))
            return err;
        any = 1;
    }
    b->failed_dir = FF_NONE;
    b->dir_step = FF_DIR_NONE;
    /* two names of one new directory could only be told apart now */
    if (any && ((err = merge_same_dirs(b)) || (err = find_duplicate(b)) || (err = look_again(b))))
        return err;
    return 0;
}

/* close(2), error checked (NFS and FUSE report write errors here). EINTR
 * is not an error: Linux has released the fd already. */
static int close_temp(struct ff_atomic *a)
{
    int err;

    a->step = FF_STEP_CLOSE;
    err = close(a->fd) < 0 && errno != EINTR ? errno : 0;
    a->fd = -1;
    return err;
}

/* Threads of the barrier: on ext4 the first fdatasync commits the journal
 * for all the temps, and each later one, finding its commit done, still
 * sends the disk a cache flush of its own (one per file). fdatasyncs that
 * wait together on one commit share its flush: a few threads, each
 * syncing its share of the window, send far fewer (bench/barrier.c:
 * sfr+8threads). Every temp is still fdatasynced before any rename. */
#define FF_SYNC_THREADS 16
#define FF_SYNC_PER_THREAD 4    /* fewer temps a thread: not worth one */

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
static int sync_window_threaded(struct ff_batch *b, size_t nshares)
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
    /* the threads take no signal: perl's handlers stay with this thread */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (k = 1; k < nshares; k++)
        started[k] = pthread_create(&tid[k], have_attr ? &attr : NULL, sync_share_run, &share[k]) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (have_attr)
        pthread_attr_destroy(&attr);
    for (k = 0; k < nshares; k++)
        if (!started[k])
            sync_share_run(&share[k]);
    for (k = 1; k < nshares; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    for (k = 0; k < nshares; k++) {
        if (share[k].err) {
            b->failed = b->window[share[k].failed];
            return share[k].err;
        }
    }
    return 0;
}

/* The barrier over the temps of the window: fdatasync each (their
 * writeback was started as they were written), then close them. */
static int barrier(struct ff_batch *b)
{
    size_t w, nshares = b->window_n / FF_SYNC_PER_THREAD;
    int err;

    for (w = 0; w < b->window_n; w++)
        b->files[b->window[w]].a.step = FF_STEP_SYNC;
    if (nshares >= 2) {
        if ((err = sync_window_threaded(b, nshares > FF_SYNC_THREADS ? FF_SYNC_THREADS : nshares)))
            return err;
    } else {
        for (w = 0; w < b->window_n; w++) {
            FF_SYSCALL(err, b->intr, ff_fdatasync(b->files[b->window[w]].a.fd));
            if (err && !FF_CANNOT_SYNC(err)) {
                b->failed = b->window[w];
                return err;
            }
        }
    }
    for (w = 0; w < b->window_n; w++) {
        if ((err = close_temp(&b->files[b->window[w]].a))) {
            b->failed = b->window[w];
            return err;
        }
    }
    b->window_n = 0;
    return 0;
}

/* Create the temp relative to its directory's fd. As in a single call, an
 * existing temp name is never touched: a random suffix is tried instead.
 * Out of fds, the window's barrier runs early, or a directory leaves the
 * cache. */
static int create_temp(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    size_t base_len = strlen(a->temp);
    int err, tries = 0, fit = 0;

    for (;;) {
        err = ff_open_excl(b->dirs[f->dir].fd, TEMP_LEAF(f), ff_temp_mode(a, b->opt.preserve),
                           &a->fd, b->intr);
        if ((err == EEXIST || (err == ENAMETOOLONG && tries && !fit)) && tries++ < FF_TEMP_TRIES) {
            if (err == ENAMETOOLONG)
                fit = 1;        /* as in a single call (ff_io.c) */
            if (!(err = ff_temp_random_name(a->temp, strlen(a->target), base_len, &fit)))
                continue;
        }
        if (err == EMFILE && b->window_n > 0) {
            if ((err = barrier(b)))
                return err;     /* b->failed names the temp that failed */
            b->failed = i;
            a->step = FF_STEP_OPEN;
            continue;
        }
        if (err == EMFILE && evict_one(b, f->dir))
            continue;
        break;
    }
    if (err) {
        a->fd = -1;
        return err;
    }
    a->created = 1;
    return 0;
}

/* Create and fill files[i]'s temp (or find it unchanged). With fsync the
 * temp stays open for the window's barrier, its writeback already started. */
static int write_temp(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    int err;

    if (b->opt.if_changed && ff_atomic_unchanged(a, f->buf, f->len, b->tail, b->tail_len)) {
        f->unchanged = 1;
        return 0;
    }
    if ((err = dir_fd(b, f->dir, b->intr))) {
        b->failed_dir = f->dir;
        b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
        return err;
    }
    a->step = FF_STEP_OPEN;
    if ((err = create_temp(b, i)))
        return err;
    a->step = FF_STEP_WRITE;
    if ((err = ff_write_tail_all(a->fd, f->buf, f->len, b->tail, b->tail_len, b->intr)))
        return err;
    if (b->opt.preserve && a->have_old && (err = ff_atomic_preserve(a)))
        return err;
    if (!b->opt.fsync)
        return close_temp(a);
    a->step = FF_STEP_SYNC;
    FF_SYSCALL(err, b->intr, ff_start_writeback(a->fd));
    if (err && !FF_CANNOT_SYNC(err) && err != ESPIPE)
        return err;
    b->window[b->window_n++] = i;
    return b->window_n == b->window_cap ? barrier(b) : 0;
}

static int write_all(struct ff_batch *b)
{
    size_t j;
    int err;

    for (j = 0; j < b->n; j++) {
        b->failed = b->order[j];
        if ((err = write_temp(b, b->order[j])))
            return err;
    }
    b->failed = FF_NONE;
    if (b->window_n && (err = barrier(b)))
        return err;
    return 0;
}

/* ---- publishing: no intr callback runs from here on ---- */

static int rename_all(struct ff_batch *b)
{
    size_t i;
    int err, unsupported;

    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];
        struct ff_atomic *a = &f->a;
        struct ff_batch_dir *d = &b->dirs[f->dir];

        if (f->unchanged)
            continue;
        b->renamed = i;
        if ((err = dir_fd(b, f->dir, NULL))) {
            b->failed_dir = f->dir;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
            return err;
        }
        a->step = FF_STEP_RENAME;
        if (b->opt.noclobber) {
            err = ff_noclobber_renameat(d->fd, TEMP_LEAF(f), LEAF(f), &unsupported, NULL);
            if (err && unsupported)
                a->step = FF_STEP_NOCLOBBER;
        } else {
            FF_SYSCALL(err, NULL, renameat(d->fd, TEMP_LEAF(f), d->fd, LEAF(f)));
        }
        if (err) {
            b->failed = i;
            return err;
        }
        a->created = 0;
        d->renamed_into = 1;
        b->written++;
    }
    b->renamed = b->n;
    return 0;
}

/* fsync the directory dirs[k] through a readable fd of it (the only place
 * that needs read permission), opened relative to its O_PATH fd. */
static int sync_dir(struct ff_batch *b, size_t k)
{
    int err;

    if ((err = dir_fd(b, k, NULL)))
        return err;
    do
        FF_SYSCALL(err, NULL, b->sync_fd = openat(b->dirs[k].fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    while (err == EMFILE && evict_one(b, k));
    if (err) {
        b->sync_fd = -1;
        return err;
    }
    FF_SYSCALL(err, NULL, fsync(b->sync_fd));
    ff_close_read(b->sync_fd);
    b->sync_fd = -1;
    return FF_CANNOT_SYNC(err) ? 0 : err;
}

/* fsync each directory a file was renamed into, once, and the parents of
 * the levels the batch made. */
static int sync_dirs(struct ff_batch *b)
{
    size_t k;
    int err;

    for (k = 0; k < b->nmade; k++) {
        struct ff_batch_made *m = &b->made[k];
        char *copy;

        if (!m->levels)
            continue;
        do {
            if (!(copy = strdup(m->path)))  /* cut in place: the path stays for discard */
                return ENOMEM;
            err = ff_sync_parents(copy, m->levels, &b->sync_fd, NULL);
            if (err == EMFILE)
                free(copy);
        } while (err == EMFILE && evict_one(b, FF_NONE));
        if (err == EMFILE && !(copy = strdup(m->path)))
            return ENOMEM;
        if (err && !FF_CANNOT_SYNC(err)) {
            b->dir_step = FF_DIR_SYNC;
            b->failed_dir = m->dir;
            b->failed_path = copy;      /* the parent that failed */
            return err;
        }
        free(copy);
    }
    for (k = 0; k < b->ndirs; k++) {
        if (!b->dirs[k].renamed_into)
            continue;
        if ((err = sync_dir(b, k))) {
            b->failed_dir = k;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_SYNC;
            return err;
        }
    }
    return 0;
}

int ff_batch_commit(struct ff_batch *b, long pid)
{
    size_t i;
    char suffix[sizeof ".tmp." + 3 * sizeof(long)];
    size_t suffix_len = (size_t)snprintf(suffix, sizeof suffix, ".tmp.%ld", pid);
    int err;

    b->pid = pid;
    if (b->n == 0)
        return 0;
    b->seed = hash_seed(b);
    /* 1. look: names, directories, targets, duplicates; nothing changes */
    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];

        b->failed = i;
        if ((err = ff_atomic_prepare(&f->a)) || (err = name_temp(f, suffix, suffix_len)))
            return err;
        if (!*LEAF(f))          /* "dir/" names a directory: no mkdir for it */
            return EISDIR;
    }
    b->failed = FF_NONE;
    if ((err = group_by_dir(b)) || (err = make_cache(b)) || (err = mark_need_id(b)) || (err = look_at_dirs(b))
        || (err = merge_same_dirs(b)) || (err = find_duplicate(b)))
        return err;

    /* 2. the missing directories; every temp written in full, with fsync
     * the barrier over each window of them */
    if ((err = make_dirs(b)) || (err = write_all(b)))
        return err;

    /* 3. the renames, in order; with fsync, each directory once. A signal
     * that came meanwhile (its handler only pending) is handled first,
     * while every target is still old: a handler that dies leaves them all
     * untouched. Then none until the end: a handler that dies cannot
     * leave the batch half renamed with only its own message. */
    interrupted(b->intr);
    err = rename_all(b);
    if (!err)
        b->done = 1;            /* the new directories stay */
    if (b->opt.fsync) {
        size_t failed = b->failed, failed_dir = b->failed_dir;
        enum ff_dir_step dir_step = b->dir_step;
        int sync_err = sync_dirs(b);    /* after a failed rename too: what was
                                         * replaced should stay replaced */
        if (err) {              /* the rename's failure is the one told */
            b->failed = failed;
            b->failed_dir = failed_dir;
            b->dir_step = dir_step;
            if (sync_err && b->failed_path) {
                free(b->failed_path);
                b->failed_path = NULL;
            }
        } else {
            err = sync_err;
        }
    }
    if (!err)
        interrupted(b->intr);   /* what became pending during the renames */
    return err;
}

int ff_batch_has_temps(const struct ff_batch *b)
{
    size_t i;

    for (i = 0; i < b->n; i++)
        if (b->files[i].a.created)
            return 1;
    return 0;
}

void ff_batch_forget(struct ff_batch *b)
{
    size_t i;

    for (i = 0; i < b->n; i++)
        ff_atomic_forget(&b->files[i].a);
    b->forgotten = 1;
}

/* path's parent, in place ("a/b" -> "a"); 0 when it has none in the name */
static int cut_to_parent(char *path)
{
    char *slash = strrchr(path, '/');

    while (slash && slash > path && slash[-1] == '/')
        slash--;
    if (!slash || slash == path)
        return 0;
    *slash = '\0';
    return 1;
}

/* rmdir the levels made for m, deepest first: only what is still empty
 * goes (a directory a target was renamed into stays, with its parents).
 * A path cut short (a mkdir failed, or a handler died in one) names the
 * level that was not made: the levels made are above it. */
static void unmake(struct ff_batch_made *m)
{
    char *p = m->path;
    int levels = m->levels, err = 0;

    if (!m->complete && !cut_to_parent(p))
        return;
    while (levels-- > 0) {
        FF_SYSCALL(err, NULL, rmdir(p));    /* unwinding: no handler runs */
        if (err || !cut_to_parent(p))
            break;
    }
}

void ff_batch_discard(struct ff_batch *b)
{
    int saved = errno, err;
    size_t i;

    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];
        struct ff_atomic *a = &f->a;

        if (a->fd >= 0) {
            close(a->fd);
            a->fd = -1;
        }
        /* relative to its directory: a parent moved meanwhile does not
         * leave it behind (nor remove another file of that name) */
        if (a->created && b->cache_cap && dir_fd(b, f->dir, NULL) == 0) {
            /* unwinding: no handler runs, EINTR (FUSE) retried, bounded */
            FF_SYSCALL(err, NULL, unlinkat(b->dirs[f->dir].fd, TEMP_LEAF(f), 0));
            a->created = 0;
        }
        a->created = 0;
        ff_atomic_discard(a);
    }
    if (!b->done && !b->forgotten)
        for (i = b->nmade; i-- > 0;)
            unmake(&b->made[i]);
    for (i = 0; i < b->ndirs; i++) {
        if (b->dirs[i].fd >= 0)
            close(b->dirs[i].fd);
        free(b->dirs[i].path);
    }
    if (b->sync_fd >= 0) {
        close(b->sync_fd);
        b->sync_fd = -1;
    }
    for (i = 0; i < b->nmade; i++)
        if (b->made[i].path != b->failed_path)
            free(b->made[i].path);
    free(b->failed_path);
    free(b->files);
    free(b->dirs);
    free(b->made);
    free(b->order);
    free(b->cache);
    free(b->window);
    b->files = NULL;
    b->dirs = NULL;
    b->made = NULL;
    b->order = b->cache = b->window = NULL;
    b->failed_path = NULL;
    b->n = b->cap = b->ndirs = b->nmade = b->cache_cap = b->window_cap = b->window_n = 0;
    errno = saved;
}
