/* ff_batch.c - file_set_contents_many's syscalls, without perl: its steps.
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
 * The names, grouping and duplicates are in ff_batch_group.c, the
 * directory cache in ff_batch_cache.c, the barrier's threads in
 * ff_batch_barrier.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* sync_file_range, O_PATH, statx (ff_compat.h) */
#endif
#include "ff_batch_int.h"
#include "ff_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Linux: a batch's renames in a process that has started a thread run in
 * a child process of their own (rename_apart). glibc says whether one was
 * ever started (__libc_single_threaded, 2.32); elsewhere (musl) assume so. */
#if defined(__linux__) && !defined(FF_PORTABLE)
#define FF_RENAME_APART 1
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
#include <sys/single_threaded.h>
#define FF_NO_THREAD_EVER() __libc_single_threaded
#else
#define FF_NO_THREAD_EVER() 0
#endif
#else
#define FF_RENAME_APART 0
#endif

/* ff_poll_signals with the count's address taken once (ff_batch_init):
 * a load and a branch a file in each loop */
#define POLL_SIGNALS(b, intr) \
    do { if (*(b)->pending) (void)interrupted(intr); } while (0)
static const int no_signals = 0;    /* (pending without a count to read) */

int ff_batch_init(struct ff_batch *b, size_t n, const struct ff_options *opt,
                  const struct ff_eintr *intr)
{
    struct ff_options file_opt;

    memset(b, 0, sizeof *b);
    b->opt = *opt;
    b->intr = intr;
    b->pending = intr && intr->pending ? intr->pending : &no_signals;
    b->failed = b->failed_dir = b->dup_first = b->dup_second = FF_NONE;
    b->tail = "";
    b->sync_fd = -1;
    b->cwd_fd = AT_FDCWD;
    /* more than the name tables' slots index (ff_batch_group.c), or than
     * malloc's size can count (calloc checked that itself) */
    if ((uint64_t)n >= UINT32_MAX || n > SIZE_MAX / sizeof *b->files)
        return ENOMEM;
    /* the batch looks at the old target itself (fstatat): the single-file
     * prepare only follows symlinks */
    file_opt = *opt;
    file_opt.preserve = file_opt.if_changed = 0;
    ff_atomic_init_lent(&b->file_template, "", 0, &file_opt, intr, NULL);
    /* not zeroed: ff_batch_add sets every field of files[0..n), and
     * nothing reads past n (a calloc zeroed it all once more, at a cost
     * that depended on where malloc found the memory) */
    b->files = n ? malloc(n * sizeof *b->files) : NULL;
    b->cap = b->files ? n : 0;
    return n && !b->files ? ENOMEM : 0;
}

int ff_batch_add_len(struct ff_batch *b, const char *path, size_t path_len, const char *buf,
                     size_t len)
{
    struct ff_batch_file *f;

    if (b->n == b->cap)
        return ENOMEM;
    f = &b->files[b->n];
    /* ff_atomic_init_lent(&f->a, path, ...) without its memset a file: the
     * template's fields (up to old, as init_lent sets them), then the path,
     * lent, not copied (one malloc and free a file less) */
    memcpy(&f->a, &b->file_template, offsetof(struct ff_atomic, old));
    f->a.target = (char *)path;    /* only read, never written through */
    f->a.target_len = path_len;
    b->names_len += path_len;
    b->n++;
    f->buf = buf;
    f->len = len;
    f->dir = f->leaf = f->dir_len = 0;
    f->unchanged = f->temp_is_target = f->existed = 0;
    return 0;
}

int ff_batch_add(struct ff_batch *b, const char *path, const char *buf, size_t len)
{
    return ff_batch_add_len(b, path, strlen(path), buf, len);
}

/* ---- looking: nothing is changed ---- */

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
    if (b->opt.preserve && a->have_old && (st.st_uid != geteuid() || st.st_nlink != 1)) {
        /* another user's file, or one with another name (a hard link
         * anyone may have made): kept only where ff_sticky_trusts says */
        a->step = FF_STEP_PRESERVE;
        FF_SYSCALL(err, b->intr, fstat(b->dirs[b->files[i].dir].fd, &st));
        if (err)
            return err;
        if (!ff_sticky_trusts(&st, &a->old))
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
        err = ff_batch_dir_fd(b, k, b->intr);
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
            POLL_SIGNALS(b, b->intr);
        }
        b->failed = FF_NONE;
    }
    b->failed_dir = FF_NONE;
    b->dir_step = FF_DIR_NONE;
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
        if ((err = ff_batch_dir_fd(b, b->files[i].dir, b->intr))) {
            b->failed = FF_NONE;
            b->failed_dir = b->files[i].dir;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
            return err;
        }
        if ((err = look_at_target(b, i)))
            return err;
        POLL_SIGNALS(b, b->intr);
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
        if ((err = ff_mkdir_p_at(b->cwd_fd, made->path, &made->levels, b->intr))) {
            b->failed_path = made->path;    /* cut at the level that failed */
            return err;
        }
        made->complete = 1;
        d->missing = 0;
        b->dir_step = FF_DIR_OPEN;
        if ((err = ff_batch_dir_fd(b, k, b->intr)))
            return err;
        any = 1;
        POLL_SIGNALS(b, b->intr);
    }
    b->failed_dir = FF_NONE;
    b->dir_step = FF_DIR_NONE;
    /* two names of one new directory could only be told apart now */
    if (any && ((err = ff_batch_merge_same_dirs(b)) || (err = ff_batch_find_duplicate(b)) || (err = look_again(b))))
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

/* The barrier over the temps of the window: fdatasync each (their
 * writeback was started as they were written), then close them. */
static int barrier(struct ff_batch *b)
{
    size_t w, nshares = b->window_n / FF_SYNC_PER_THREAD;
    int err;

    for (w = 0; w < b->window_n; w++)
        b->files[b->window[w]].a.step = FF_STEP_SYNC;
    if (nshares >= 2) {
        if ((err = ff_batch_sync_window_threaded(b, nshares > FF_SYNC_THREADS ? FF_SYNC_THREADS : nshares)))
            return err;
    } else {
        for (w = 0; w < b->window_n; w++) {
            FF_SYSCALL(err, b->intr, ff_fdatasync(b->files[b->window[w]].a.fd));
            if (err && !FF_CANNOT_SYNC(err)) {
                b->failed = b->window[w];
                return err;
            }
            POLL_SIGNALS(b, b->intr);
        }
    }
    /* (the threads' signals, held until they were done, are handled here) */
    for (w = 0; w < b->window_n; w++) {
        if ((err = close_temp(&b->files[b->window[w]].a))) {
            b->failed = b->window[w];
            return err;
        }
        POLL_SIGNALS(b, b->intr);
    }
    b->window_n = 0;
    return 0;
}

/* The plain temp name of files[i] exists: on a directory that folds case
 * (ext4 or tmpfs casefold, vfat, cifs) it may be the temp of another pair
 * whose target differs only in case ("A" and "a"), one file: the second
 * rename would silently replace the first. Then that pair's index, else
 * NONE. Only asked on EEXIST: nothing is added where names are free. */
static size_t folded_onto(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    int dirfd = b->dirs[f->dir].fd, err;
    struct stat st, other;
    size_t j;

    FF_SYSCALL(err, NULL, fstatat(dirfd, TEMP_LEAF(f), &st, AT_SYMLINK_NOFOLLOW));
    if (err)
        return FF_NONE;
    for (j = 0; j < b->n; j++) {
        struct ff_batch_file *g = &b->files[j];

        if (j == i || g->dir != f->dir || !g->a.created)
            continue;
        if (g->a.have_id) {     /* user code ran: its name may lead elsewhere */
            other.st_dev = g->a.id_dev;
            other.st_ino = g->a.id_ino;
        } else {
            FF_SYSCALL(err, NULL, fstatat(dirfd, TEMP_LEAF(g), &other, AT_SYMLINK_NOFOLLOW));
            if (err)
                continue;
        }
        if (other.st_dev == st.st_dev && other.st_ino == st.st_ino)
            return j;
    }
    return FF_NONE;
}

/* Create the temp relative to its directory's fd. As in a single call, an
 * existing temp name is never touched: a random suffix is tried instead
 * (unless it is another pair's temp by a name that folds to it: EINVAL,
 * the targets are one file).
 * Out of fds, the window's barrier runs early, or a directory leaves the
 * cache. */
static int create_temp(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    size_t base_len = a->target_len + b->suffix_len;    /* temp: target + suffix */
    int err, tries = 0, fit = 0;

    if (f->temp_is_target) {    /* see ff_batch_find_duplicate */
        if ((err = ff_temp_random_name(a->temp, a->target_len, base_len, &fit))) {
            a->fd = -1;
            return err;
        }
        tries = 1;
    }
    for (;;) {
        err = ff_open_excl(b->dirs[f->dir].fd, TEMP_LEAF(f), ff_temp_mode(a, b->opt.preserve),
                           &a->fd, b->intr);
        if (err == EEXIST && tries == 0 && (b->dup_first = folded_onto(b, i)) != FF_NONE) {
            b->dup_second = i;
            b->failed = FF_NONE;
            a->fd = -1;
            return EINVAL;
        }
        if ((err == EEXIST || (err == ENAMETOOLONG && tries && !fit)) && tries++ < FF_TEMP_TRIES) {
            if (err == ENAMETOOLONG)
                fit = 1;        /* as in a single call (ff_io.c) */
            if (!(err = ff_temp_random_name(a->temp, a->target_len, base_len, &fit)))
                continue;
        }
        if (err == EMFILE && b->window_n > 0) {
            if ((err = barrier(b)))
                return err;     /* b->failed names the temp that failed */
            b->failed = i;
            a->step = FF_STEP_OPEN;
            continue;
        }
        if (err == EMFILE && ff_batch_evict_one(b, f->dir))
            continue;
        break;
    }
    if (err) {
        a->fd = -1;
        return err;
    }
    a->created = 1;
    b->unnoted++;
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
    if ((err = ff_batch_dir_fd(b, f->dir, b->intr))) {
        b->failed_dir = f->dir;
        b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
        return err;
    }
    a->step = FF_STEP_OPEN;
    if ((err = create_temp(b, i)))
        return err;
    /* what the temp must hold when user code ran meanwhile (read back
     * before its rename: ff_atomic_temp_publishable) */
    ff_atomic_verify_data(a, f->buf, f->len, b->tail, b->tail_len, b->opt.preserve);
    a->step = FF_STEP_WRITE;
    if ((err = b->tail_len ? ff_write_tail_all(a->fd, f->buf, f->len, b->tail, b->tail_len, b->intr)
                           : ff_write_all(a->fd, f->buf, f->len, b->intr)))
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
        POLL_SIGNALS(b, b->intr);
    }
    b->failed = FF_NONE;
    if (b->window_n && (err = barrier(b)))
        return err;
    return 0;
}

/* ---- publishing: only temps still the files made; from the first rename
 * on, a handler's die is held until the end (b->renaming) ---- */

/* User code may chdir: from its first run on, relative names (directories
 * reopened after they left the cache, temps removed by full name, the
 * directories mkdir makes and removes again) are taken from the working
 * directory as it was, held open (O_PATH). None of that before: no
 * syscall where no user code runs, or every name is absolute. Where "."
 * cannot be opened, they go on from the working directory of the moment. */
static void pin_cwd(struct ff_batch *b)
{
    size_t i;
    int fd, err;

    if (b->cwd_fd != AT_FDCWD)
        return;
    for (i = 0; i < b->n && b->files[i].a.target && b->files[i].a.target[0] == '/'; i++)
        ;
    if (i == b->n)
        return;
    FF_SYSCALL(err, NULL, fd = open(".", FF_DIR_FLAGS));
    if (!err)
        b->cwd_fd = fd;
}

void ff_batch_note_temps(struct ff_batch *b)
{
    size_t j;

    pin_cwd(b);
    b->user_code_runs++;
    /* temps are made in order[] (write_all): the ones before note_from
     * are noted already, or never made (a storm runs handlers after each
     * file: no scan from the first each time) */
    for (j = b->note_from; j < b->n && b->unnoted; j++) {
        struct ff_batch_file *f = &b->files[b->order[j]];
        int dirfd = b->dirs ? b->dirs[f->dir].fd : -1;

        if (!f->a.created || f->a.have_id)
            continue;
        /* no user code ran since it was made: its full name is still good
         * where its directory left the cache */
        if (dirfd >= 0)
            ff_atomic_note_temp(&f->a, dirfd, TEMP_LEAF(f));
        else
            ff_atomic_note_temp(&f->a, b->cwd_fd, f->a.temp);
        b->unnoted--;
    }
    b->note_from = j;
}

/* Every temp whose identity was noted (user code ran while it existed) is
 * still that file: checked before the first rename, so that a temp
 * replaced by a handler fails the batch with every target untouched. */
static int check_temps(struct ff_batch *b)
{
    size_t i;
    int err;

    if (!b->user_code_runs)
        return 0;
    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];

        if (!f->a.have_id || !f->a.created)
            continue;
        b->failed = i;
        if ((err = ff_batch_dir_fd(b, f->dir, NULL))) {
            b->failed = FF_NONE;
            b->failed_dir = f->dir;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
            return err;
        }
        if ((err = ff_atomic_temp_publishable(&f->a, b->dirs[f->dir].fd, TEMP_LEAF(f))))
            return err;
        /* a handler that runs here may replace a temp checked already:
         * rename_all checks each again (user_code_runs moved) */
        POLL_SIGNALS(b, b->intr);
    }
    b->failed = FF_NONE;
    return 0;
}

/* All signals blocked in this thread (the old mask in *old); false where
 * they could not be. */
static int block_signals(sigset_t *old)
{
    sigset_t all;

    sigfillset(&all);
    return pthread_sigmask(SIG_BLOCK, &all, old) == 0;
}

static void unblock_signals(int blocked, const sigset_t *old)
{
    if (blocked)
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* renameat of f's temp onto its target, EINTR retried with intr: a
 * handler that ran meanwhile may have replaced the temp, checked again
 * before the retry. Without a handler run: one renameat(2). */
static int rename_temp(struct ff_batch_file *f, int dirfd, const struct ff_eintr *intr)
{
    unsigned spins = 0;
    int err;

    for (;;) {
        err = renameat(dirfd, TEMP_LEAF(f), dirfd, LEAF(f)) < 0 ? errno : 0;
        if (err != EINTR || !ff_retry_eintr(intr, &spins))
            return err;
        if ((err = ff_atomic_temp_publishable(&f->a, dirfd, TEMP_LEAF(f))))
            return err;
        f->a.step = FF_STEP_RENAME;
    }
}

/* intr: b->renaming, or with signals blocked signal_waits (handlers
 * pending from before still wait: none may run) */
static int rename_each(struct ff_batch *b, unsigned long runs, const struct ff_eintr *intr)
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
        if ((err = ff_batch_dir_fd(b, f->dir, intr))) {
            b->failed_dir = f->dir;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_OPEN;
            return err;
        }
        a->step = FF_STEP_RENAME;
        /* a handler ran during the renames: check the temp is still ours */
        if (b->user_code_runs != runs && (err = ff_atomic_temp_publishable(a, d->fd, TEMP_LEAF(f)))) {
            b->failed = i;
            return err;
        }
        if (b->opt.noclobber) {
            err = ff_noclobber_renameat(a, d->fd, TEMP_LEAF(f), LEAF(f), &unsupported, intr);
            if (err && unsupported)
                a->step = FF_STEP_NOCLOBBER;
        } else {
            err = rename_temp(f, d->fd, intr);
        }
        if (err) {
            b->failed = i;
            return err;
        }
        a->created = 0;
        d->renamed_into = 1;
        b->written++;
        if (intr == b->renaming)
            POLL_SIGNALS(b, intr);      /* its die held until the end */
    }
    b->renamed = b->n;
    return 0;
}

/* The intr of the renames while signals are blocked: no perl code runs.
 * An EINTR that comes with a signal waiting in the kernel (one the caller
 * takes: a signal interrupted the rename) counts as a signal handled, as
 * ff_retry_eintr counts a handler run (its handler runs after the
 * renames); bounded, as a signal that keeps waiting says nothing new. */
struct held_signals {
    const sigset_t *old;    /* the caller's mask */
    unsigned waited;        /* EINTRs counted as a signal */
};

#define FF_HELD_EINTR_MAX 1000

static int signal_waits(void *ctx)
{
    struct held_signals *h = ctx;
    sigset_t waiting;
    int sig;

    if (h->waited >= FF_HELD_EINTR_MAX || sigpending(&waiting) != 0)
        return 0;
    for (sig = 1; sig < NSIG; sig++) {
        if (sigismember(&waiting, sig) == 1 && sigismember(h->old, sig) == 0) {
            h->waited++;
            return 1;
        }
    }
    return 0;
}

#if FF_RENAME_APART
/* rename_each's call, made in the child */
struct rename_job {
    struct ff_batch *b;
    unsigned long runs;
    const struct ff_eintr *intr;
    int err;
};

static int rename_job_run(void *arg)
{
    struct rename_job *j = (struct rename_job *)arg;

    j->err = rename_each(j->b, j->runs, j->intr);
    return 0;
}

/* The child's stack: a block of the heap (malloc: no syscall where the
 * heap has room; a mapping of its own cost ~35 us a batch more, munmap's
 * TLB shootdown), never the caller's stack: a thread made with a small
 * stack (threads' stack_size, 16 KiB at the least) has no room for it
 * there. rename_each and its calls take under 2 KiB (more under ASan). */
#define FF_RENAME_STACK (64 * 1024)

/* 1 when another thread may run now: one was ever started (glibc says so;
 * elsewhere assume it), and /proc/self/task counts more than this one (its
 * links: 2, and 1 a thread), or cannot be looked at. A batch with fsync
 * starts threads of its own (ff_batch_barrier.c), joined before this. */
static int other_threads(void)
{
    struct stat st;

    if (FF_NO_THREAD_EVER())
        return 0;
    return stat("/proc/self/task", &st) != 0 || st.st_nlink > 3;
}
#endif

#if FF_RENAME_APART
/* 1 when f's rename was made: its temp's name is gone, or (noclobber's
 * link) leads to the target's file. */
static int rename_made(struct ff_batch_file *f, int dirfd)
{
    struct stat temp, target;

    if (fstatat(dirfd, TEMP_LEAF(f), &temp, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT;
    return fstatat(dirfd, LEAF(f), &target, AT_SYMLINK_NOFOLLOW) == 0
           && target.st_dev == temp.st_dev && target.st_ino == temp.st_ino;
}

/* The child was killed (SIGKILL) at file b->renamed: when its rename was
 * made, that file is told as replaced and the next one to rename as failed
 * (EINTR), or, none left, the renames are done (0). (No handler runs in
 * the meantime: only the child touched these names.) */
static int killed_at(struct ff_batch *b)
{
    size_t i = b->renamed;

    if (i < b->n) {
        struct ff_batch_file *f = &b->files[i];
        struct ff_batch_dir *d = &b->dirs[f->dir];

        if (d->fd >= 0 && rename_made(f, d->fd)) {
            /* a link's temp name is still there: removed as a temp */
            f->a.created = faccessat(d->fd, TEMP_LEAF(f), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
            d->renamed_into = 1;
            b->written++;
            for (i++; i < b->n && b->files[i].unchanged; i++)
                continue;
        }
    }
    b->renamed = i;
    if (i >= b->n)
        return 0;
    b->failed = i;
    b->files[i].a.step = FF_STEP_RENAME;
    return EINTR;
}
#endif

/* With another thread in the process, blocking signals in this one does
 * not hold a signal sent to the process: the kernel gives it to a thread
 * that does not block it, whose handler (an exit) or default action
 * (SIGTERM's) ends the process between two renames. So there the renames
 * run in a child process that shares this one's memory, descriptors and
 * working directory (clone: CLONE_VM, CLONE_FILES, CLONE_FS; no
 * CLONE_THREAD, so a signal to this process is not its), on a stack of
 * its own, with this thread's mask (all blocked), while this thread waits
 * for it in waitpid: the renames end even if this process ends meanwhile.
 * The child runs as this thread would (its errno, its malloc cache), which
 * waits meanwhile in a syscall that touches neither. (No CLONE_VFORK:
 * valgrind runs no other clone of memory than a thread's flags.) 0 when
 * none is made (no thread was ever started, or clone failed: the caller
 * renames itself), else 1 with *err rename_each's. */
static int rename_apart(struct ff_batch *b, unsigned long runs, const struct ff_eintr *intr, int *err)
{
#if FF_RENAME_APART
    struct rename_job job;
    char *stack;
    pid_t pid, waited;
    int status = 0;

    if (!other_threads())
        return 0;
    stack = malloc(FF_RENAME_STACK);     /* (malloc's alignment: 16 bytes) */
    if (!stack)
        return 0;
    job.b = b;
    job.runs = runs;
    job.intr = intr;
    job.err = 0;
    /* exit signal 0: no SIGCHLD for the script's handler, and no
     * waitpid(-1) of its own (without __WALL) reaps this child */
    pid = clone(rename_job_run, stack + FF_RENAME_STACK, CLONE_VM | CLONE_FILES | CLONE_FS, &job);
    if (pid < 0) {
        free(stack);
        return 0;
    }
    do
        waited = waitpid(pid, &status, __WALL);
    while (waited < 0 && errno == EINTR);
    free(stack);                        /* the child has ended */
    if (waited == pid && !WIFEXITED(status))
        job.err = killed_at(b);
    *err = job.err;
    return 1;
#else
    (void)b;
    (void)runs;
    (void)intr;
    (void)err;
    return 0;
#endif
}

/* The renames of more than one file run with signals blocked, no
 * handler between them: a handler may exit (which no eval stops) and a
 * signal's default action may end the process, either leaving some
 * targets new and the others old. Blocked, each signal waits in the
 * kernel, and is handled once every target is renamed (sync_dirs, or the
 * end of ff_batch_commit); where another thread could take it, the renames
 * are made apart (rename_apart). One file's rename is all or nothing
 * alone: its handlers run as they come, a die held (b->renaming).
 * runs: user_code_runs when check_temps began */
static int rename_all(struct ff_batch *b, unsigned long runs)
{
    sigset_t old;
    struct held_signals held = { &old, 0 };
    const struct ff_eintr held_intr = { signal_waits, &held, NULL };
    int blocked = b->n > 1 && block_signals(&old);
    int err;

    if (!blocked || !rename_apart(b, runs, &held_intr, &err))
        err = rename_each(b, runs, blocked ? &held_intr : b->renaming);
    unblock_signals(blocked, &old);
    return err;
}

/* fsync the directory dirs[k] through a readable fd of it (the only place
 * that needs read permission), opened relative to its O_PATH fd. */
static int sync_dir(struct ff_batch *b, size_t k)
{
    int err;

    if ((err = ff_batch_dir_fd(b, k, b->renaming)))
        return err;
    do
        FF_SYSCALL(err, b->renaming, b->sync_fd = openat(b->dirs[k].fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    while (err == EMFILE && ff_batch_evict_one(b, k));
    if (err) {
        b->sync_fd = -1;
        return err;
    }
    FF_SYSCALL(err, b->renaming, fsync(b->sync_fd));
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
            err = ff_sync_parents(copy, m->levels, &b->sync_fd, b->renaming);
            if (err == EMFILE)
                free(copy);
        } while (err == EMFILE && ff_batch_evict_one(b, FF_NONE));
        if (err == EMFILE && !(copy = strdup(m->path)))
            return ENOMEM;
        if (err && !FF_CANNOT_SYNC(err)) {
            b->dir_step = FF_DIR_SYNC;
            b->failed_dir = m->dir;
            b->failed_path = copy;      /* the parent that failed */
            return err;
        }
        free(copy);
        POLL_SIGNALS(b, b->renaming);
    }
    for (k = 0; k < b->ndirs; k++) {
        if (!b->dirs[k].renamed_into)
            continue;
        if ((err = sync_dir(b, k))) {
            b->failed_dir = k;
            b->dir_step = err == ESTALE ? FF_DIR_CHANGED : FF_DIR_SYNC;
            return err;
        }
        POLL_SIGNALS(b, b->renaming);
    }
    return 0;
}

int ff_batch_commit(struct ff_batch *b, long pid)
{
    unsigned long runs;
    size_t i;
    char suffix[sizeof ".tmp." + 3 * sizeof(long)];
    size_t suffix_len = (size_t)snprintf(suffix, sizeof suffix, ".tmp.%ld", pid);
    size_t block_size;
    char *block, *block_end;
    int err;

    b->pid = pid;
    b->suffix_len = suffix_len;
    if (b->n == 0)
        return 0;
    if (!b->seed)
        b->seed = ff_batch_hash_seed(b);
    /* the temps' names in one block, as long as the names given need */
    block_size = b->names_len + b->n * (suffix_len + FF_TEMP_SUFFIX_MAX);
    block = b->temp_block = malloc(block_size);     /* NULL: one each */
    block_end = block ? block + block_size : NULL;
    /* 1. look: names, directories, targets, duplicates; nothing changes */
    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];

        b->failed = i;
        /* prepare only follows symlinks here (file_opt): nothing to do
         * without that option */
        if ((f->a.opt.follow_symlinks && (err = ff_atomic_prepare(&f->a)))
            || (err = ff_batch_name_temp(f, suffix, suffix_len, &block, block_end)))
            return err;
        if (!*LEAF(f))          /* "dir/" names a directory: no mkdir for it */
            return EISDIR;
        POLL_SIGNALS(b, b->intr);   /* (follow_symlinks: lstat, readlink) */
    }
    b->failed = FF_NONE;
    /* (each step a loop over the names, with no syscall: handlers between) */
    if ((err = ff_batch_group_by_dir(b)))
        return err;
    POLL_SIGNALS(b, b->intr);
    if ((err = ff_batch_make_cache(b)) || (err = ff_batch_mark_need_id(b)))
        return err;
    POLL_SIGNALS(b, b->intr);
    if ((err = look_at_dirs(b)) || (err = ff_batch_merge_same_dirs(b)))
        return err;
    POLL_SIGNALS(b, b->intr);
    if ((err = ff_batch_find_duplicate(b)))
        return err;

    /* 2. the missing directories; every temp written in full, with fsync
     * the barrier over each window of them */
    if ((err = make_dirs(b)) || (err = write_all(b)))
        return err;

    /* 3. the renames, in order; with fsync, each directory once. A signal
     * that came meanwhile (its handler only pending) is handled first,
     * while every target is still old: a handler that dies leaves them all
     * untouched; then every temp a handler could have replaced is
     * checked. From the first rename on, a handler that runs (EINTR) has
     * its die held until the end (b->renaming): the batch is never left
     * half renamed with only the handler's message; with signals blocked
     * while more than one file is renamed (rename_all), no handler runs
     * between two renames (an exit is held by nothing). */
    interrupted(b->intr);
    runs = b->user_code_runs;
    if ((err = check_temps(b)))
        return err;
    err = rename_all(b, runs);
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

int ff_batch_has_work(const struct ff_batch *b)
{
    size_t i;

    if (!b->done && b->nmade)
        return 1;
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
static void unmake(struct ff_batch_made *m, int cwd_fd)
{
    char *p = m->path;
    int levels = m->levels, err = 0;

    if (!m->complete && !cut_to_parent(p))
        return;
    while (levels-- > 0) {
        /* unwinding: no handler runs */
        FF_SYSCALL(err, NULL, cwd_fd == AT_FDCWD ? rmdir(p) : unlinkat(cwd_fd, p, AT_REMOVEDIR));
        if (err || !cut_to_parent(p))
            break;
    }
}

/* 1 when the name of dirs[k] still leads to the directory first opened */
static int dir_name_same(const struct ff_batch *b, size_t k)
{
    const struct ff_batch_dir *d = &b->dirs[k];
    struct stat st;
    int err;

    FF_SYSCALL(err, NULL, fstatat(b->cwd_fd, d->path, &st, 0));
    return !err && d->statted && st.st_dev == d->dev && st.st_ino == d->ino;
}

/* unlink f's temp if it is still the file made: relative to its
 * directory (a parent moved meanwhile does not leave it behind, nor remove
 * another file of that name); where the directory cannot be reopened (out
 * of fds), by its full name, once that name is shown to lead to the same
 * directory and (user code ran) to the same file. Unwinding: no handler
 * runs, EINTR (FUSE) retried, bounded. */
static void remove_temp(struct ff_batch *b, struct ff_batch_file *f)
{
    int dirfd = b->cwd_fd, err;
    const char *name = f->a.temp;

    if (b->cache_cap && ff_batch_dir_fd(b, f->dir, NULL) == 0) {
        dirfd = b->dirs[f->dir].fd;
        name = TEMP_LEAF(f);
    } else if (!b->cache_cap || !dir_name_same(b, f->dir)) {
        return;
    }
    if (ff_atomic_temp_ours(&f->a, dirfd, name) == 0)
        FF_SYSCALL(err, NULL, unlinkat(dirfd, name, 0));
}

/* The cleanup runs no handler (it unwinds a die, or precedes the croak)
 * and may remove thousands of temps: with more than a few syscalls to
 * make, signals are blocked meanwhile, so that each kind waits in the
 * kernel, once, and is handled after. Caught one by one instead, 120 not
 * yet handled make perl die inside its C signal handler, in the middle of
 * the cleanup. */
#define FF_QUIET_MAX 16     /* syscalls made without blocking */

void ff_batch_remove_temps(struct ff_batch *b)
{
    int saved = errno, blocked = 0;
    size_t i, work = 0;
    sigset_t old;

    for (i = 0; i < b->n; i++)
        work += (b->files[i].a.fd >= 0) + b->files[i].a.created;
    if (work == 0)
        return;
    if (work > FF_QUIET_MAX)
        blocked = block_signals(&old);
    /* the temps' fds first: out of fds, they are what reopens directories */
    for (i = 0; i < b->n; i++) {
        struct ff_atomic *a = &b->files[i].a;

        if (a->fd >= 0) {
            close(a->fd);
            a->fd = -1;
        }
    }
    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];

        if (f->a.created)
            remove_temp(b, f);
        f->a.created = 0;
    }
    unblock_signals(blocked, &old);
    errno = saved;
}

void ff_batch_discard(struct ff_batch *b)
{
    int saved = errno, blocked = 0;
    size_t i;
    sigset_t old;

    /* a batch that succeeded holds nothing a file: one look at each */
    for (i = 0; i < b->n && ff_atomic_holds_nothing(&b->files[i].a); i++)
        ;
    if ((i < b->n && b->n > FF_QUIET_MAX) || b->ndirs > FF_QUIET_MAX || b->nmade > FF_QUIET_MAX)
        blocked = block_signals(&old);
    if (i < b->n) {
        ff_batch_remove_temps(b);
        for (i = 0; i < b->n; i++)
            ff_atomic_discard(&b->files[i].a);
    }
    free(b->temp_block);
    b->temp_block = NULL;
    if (!b->done && !b->forgotten)
        for (i = b->nmade; i-- > 0;)
            unmake(&b->made[i], b->cwd_fd);
    for (i = 0; i < b->ndirs; i++) {
        if (b->dirs[i].fd >= 0)
            close(b->dirs[i].fd);
        free(b->dirs[i].path);
    }
    if (b->sync_fd >= 0) {
        close(b->sync_fd);
        b->sync_fd = -1;
    }
    if (b->cwd_fd >= 0) {
        close(b->cwd_fd);
        b->cwd_fd = AT_FDCWD;
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
    unblock_signals(blocked, &old);
    errno = saved;
}
