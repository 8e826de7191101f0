/* ff_batch.c - file_set_contents_many's syscalls, without perl.
 *
 * Per file without fsync: fstatat (is the target a directory? preserve and
 * if_changed need it anyway), openat, write, close, renameat, all relative
 * to one fd of its directory, so the kernel walks the path once per
 * directory, not twice per file. With fsync: sync_file_range starts each
 * temp's writeback as soon as it is written, fdatasync of each then mostly
 * finds its data on disk already (one journal commit serves many), and
 * each directory is fsynced once after the renames. bench/barrier.c
 * measured the alternatives.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* sync_file_range (ff_compat.h) */
#endif
#include "ff_batch.h"
#include "ff_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FF_NONE ((size_t)-1)

/* "cannot do that here" answers of the sync calls: not errors */
#define FF_CANNOT_SYNC(err) ((err) == EINVAL || (err) == ENOSYS || (err) == EOPNOTSUPP)

int ff_batch_init(struct ff_batch *b, size_t n, const struct ff_options *opt,
                  const struct ff_eintr *intr)
{
    memset(b, 0, sizeof *b);
    b->opt = *opt;
    b->intr = intr;
    b->failed = b->dup_first = b->dup_second = FF_NONE;
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

/* mkdir -p of dir for files[file], remembered with the levels it made so
 * that fsync makes them durable. The path is the batch's before a mkdir
 * runs: a handler that dies meanwhile leaks nothing. */
static int make_dirs(struct ff_batch *b, const char *dir, size_t file)
{
    struct ff_batch_made *made = realloc(b->made, (b->nmade + 1) * sizeof *made);

    if (!made)
        return ENOMEM;
    b->made = made;
    made += b->nmade;
    made->levels = 0;
    made->file = file;
    if (!(made->path = strdup(dir)))
        return ENOMEM;
    b->nmade++;
    return ff_mkdir_p(made->path, &made->levels, b->intr);
}

static size_t leaf_at(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash + 1 - path) : 0;
}

#define LEAF(f) ((f)->a.target + (f)->leaf)
#define TEMP_LEAF(f) ((f)->a.temp + (f)->leaf)

static int stat_dir(struct ff_batch_dir *d)
{
    struct stat st;

    if (d->statted)
        return 0;
    if (fstat(d->fd, &st) < 0)
        return errno;
    d->dev = st.st_dev;
    d->ino = st.st_ino;
    d->statted = 1;
    return 0;
}

/* The directory of files[i] as an index into b->dirs, opened once per
 * name; two names of one directory share the first one's fd. */
static int open_dir(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    struct ff_batch_dir *d;
    char *path;
    size_t k;
    int err;

    if (i > 0 && f[-1].leaf == f->leaf && memcmp(f[-1].a.target, a->target, f->leaf) == 0) {
        f->dir = f[-1].dir;         /* the usual case: as the file before */
        return 0;
    }
    if (!(path = ff_dir_of(a->target)))
        return ENOMEM;
    for (k = 0; k < b->ndirs; k++)
        if (strcmp(b->dirs[k].path, path) == 0) {
            free(path);
            b->files[i].dir = b->dirs[k].same_as;
            return 0;
        }
    if (!(b->ndirs & (b->ndirs - 1))) {     /* 0, 1, 2, 4, ...: grow */
        struct ff_batch_dir *dirs = realloc(b->dirs, (b->ndirs ? 2 * b->ndirs : 1) * sizeof *dirs);
        if (!dirs) {
            free(path);
            return ENOMEM;
        }
        b->dirs = dirs;
    }
    d = &b->dirs[b->ndirs];
    memset(d, 0, sizeof *d);
    d->path = path;
    d->same_as = b->ndirs;
    b->ndirs++;

    a->step = FF_STEP_OPEN;     /* worded as the temp's open, as a single call would */
    FF_SYSCALL(err, b->intr, d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (err == ENOENT && b->opt.mkdir) {
        a->step = FF_STEP_MKDIR;
        if ((err = make_dirs(b, path, i)))
            return err;
        a->step = FF_STEP_OPEN;
        FF_SYSCALL(err, b->intr, d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
    if (err) {
        d->fd = -1;
        return err;
    }
    /* another name of a directory we have: one fd, one fsync. Only asked
     * when there are two names, so a batch in one directory pays nothing. */
    if (b->ndirs > 1) {
        a->step = FF_STEP_STAT;
        if ((err = stat_dir(&b->dirs[0])) || (err = stat_dir(d)))
            return err;
        for (k = 0; k + 1 < b->ndirs; k++)
            if (b->dirs[k].same_as == k && stat_dir(&b->dirs[k]) == 0
                && b->dirs[k].dev == d->dev && b->dirs[k].ino == d->ino) {
                close(d->fd);
                d->fd = -1;
                d->same_as = k;
                break;
            }
    }
    b->files[i].dir = d->same_as;
    a->step = FF_STEP_NONE;
    return 0;
}

/* The old target: not a directory, absent under noclobber, its stat kept
 * for preserve and if_changed. */
static int look_at_target(struct ff_batch *b, size_t i)
{
    struct ff_atomic *a = &b->files[i].a;
    const char *leaf = LEAF(&b->files[i]);
    struct stat st;
    int err;

    if (!*leaf)         /* "dir/": names a directory */
        return EISDIR;
    a->step = FF_STEP_STAT;
    FF_SYSCALL(err, b->intr, fstatat(b->dirs[b->files[i].dir].fd, leaf, &st, AT_SYMLINK_NOFOLLOW));
    if (err == ENOENT) {
        a->step = FF_STEP_NONE;
        return 0;
    }
    if (err)
        return err;
    if (S_ISDIR(st.st_mode)) {
        a->step = FF_STEP_NONE;     /* "unable to replace 'X' - Is a directory" */
        return EISDIR;
    }
    if (b->opt.noclobber) {
        a->step = FF_STEP_RENAME;   /* as a single call words it */
        return EEXIST;
    }
    a->old = st;
    a->have_old = S_ISREG(st.st_mode);
    a->step = FF_STEP_NONE;
    return 0;
}

/* qsort context: C has none, so the files go in with each index */
struct ff_key { const struct ff_batch_file *f; size_t i; };

static int cmp_key(const void *x, const void *y)
{
    const struct ff_key *p = x, *q = y;
    if (p->f->dir != q->f->dir)
        return p->f->dir < q->f->dir ? -1 : 1;
    int c = strcmp(LEAF(p->f), LEAF(q->f));
    return c ? c : p->i < q->i ? -1 : p->i > q->i;
}

/* Two entries for one name in one directory: the second would silently
 * replace the first. */
static int find_duplicate(struct ff_batch *b)
{
    struct ff_key *keys;
    size_t i;

    if (b->n < 2)
        return 0;
    if (!(keys = malloc(b->n * sizeof *keys)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        keys[i].f = &b->files[i];
        keys[i].i = i;
    }
    qsort(keys, b->n, sizeof *keys, cmp_key);
    for (i = 1; i < b->n; i++)
        if (keys[i].f->dir == keys[i - 1].f->dir
            && strcmp(LEAF(keys[i].f), LEAF(keys[i - 1].f)) == 0)
            break;
    if (i < b->n) {
        b->dup_first = keys[i - 1].i;
        b->dup_second = keys[i].i;
    }
    free(keys);
    return i < b->n ? EINVAL : 0;
}

/* The temp's name: "<target>" + suffix (".tmp.<pid>", made once per
 * batch), room left for a random suffix. */
static int name_temp(struct ff_batch_file *f, const char *suffix, size_t suffix_len)
{
    size_t len = strlen(f->a.target);

    f->leaf = leaf_at(f->a.target);
    if (!(f->a.temp = malloc(len + suffix_len + FF_TEMP_SUFFIX_MAX)))
        return ENOMEM;
    memcpy(f->a.temp, f->a.target, len);
    memcpy(f->a.temp + len, suffix, suffix_len + 1);
    return 0;
}

/* Create the temp relative to its directory's fd. As in a single call, an
 * existing temp name is never touched: a random suffix is tried instead. */
static int create_temp(struct ff_batch *b, size_t i)
{
    struct ff_atomic *a = &b->files[i].a;
    int dirfd = b->dirs[b->files[i].dir].fd;
    size_t base_len = strlen(a->temp);
    int err, tries;

    a->step = FF_STEP_OPEN;
    FF_SYSCALL(err, b->intr, a->fd = openat(dirfd, TEMP_LEAF(&b->files[i]), FF_TEMP_FLAGS, b->opt.perm));
    for (tries = 0; err == EEXIST && tries < FF_TEMP_TRIES; tries++) {
        snprintf(a->temp + base_len, FF_TEMP_SUFFIX_MAX, ".%016llx", ff_random_bits());
        FF_SYSCALL(err, b->intr, a->fd = openat(dirfd, TEMP_LEAF(&b->files[i]), FF_TEMP_FLAGS, b->opt.perm));
    }
    if (err) {
        a->fd = -1;
        return err;
    }
    a->created = 1;
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

/* The barrier over files[from..to): fdatasync each (their writeback was
 * started as they were written), then close them. */
static int barrier(struct ff_batch *b, size_t from, size_t to)
{
    size_t i;
    int err;

    for (i = from; i < to; i++) {
        struct ff_atomic *a = &b->files[i].a;

        if (a->fd < 0)
            continue;       /* unchanged */
        a->step = FF_STEP_SYNC;
        FF_SYSCALL(err, b->intr, ff_fdatasync(a->fd));
        if (err && !FF_CANNOT_SYNC(err)) {
            b->failed = i;
            return err;
        }
    }
    for (i = from; i < to; i++) {
        struct ff_atomic *a = &b->files[i].a;

        if (a->fd >= 0 && (err = close_temp(a))) {
            b->failed = i;
            return err;
        }
    }
    return 0;
}

/* Create and fill files[i]'s temp (or find it unchanged). With fsync the
 * temp stays open for the barrier, its writeback already started. */
static int write_temp(struct ff_batch *b, size_t i)
{
    struct ff_batch_file *f = &b->files[i];
    struct ff_atomic *a = &f->a;
    int err;

    if (b->opt.if_changed && ff_atomic_unchanged(a, f->buf, f->len, b->tail, b->tail_len)) {
        f->unchanged = 1;
        return 0;
    }
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
    return err && !FF_CANNOT_SYNC(err) && err != ESPIPE ? err : 0;
}

static int rename_all(struct ff_batch *b)
{
    size_t i;
    int err;

    for (i = 0; i < b->n; i++) {
        struct ff_batch_file *f = &b->files[i];
        struct ff_atomic *a = &f->a;
        struct ff_batch_dir *d = &b->dirs[f->dir];

        if (f->unchanged)
            continue;
        a->step = FF_STEP_RENAME;
        if (b->opt.noclobber)
            err = ff_atomic_rename_noreplace(a);
        else
            FF_SYSCALL(err, b->intr, renameat(d->fd, TEMP_LEAF(f), d->fd, LEAF(f)));
        if (err) {
            b->failed = i;
            b->renamed = i;
            return err;
        }
        a->created = 0;
        d->renamed_into = 1;
        d->last_file = i;
        b->written++;
    }
    b->renamed = b->n;
    return 0;
}

/* fsync each directory a file was renamed into, once, and the parent of
 * each directory the batch made. */
static int sync_dirs(struct ff_batch *b)
{
    size_t k;
    int err;

    for (k = 0; k < b->nmade; k++) {
        err = ff_sync_parents(b->made[k].path, b->made[k].levels, &b->sync_fd, b->intr);
        if (err && !FF_CANNOT_SYNC(err)) {
            b->failed = b->made[k].file;
            b->files[b->failed].a.step = FF_STEP_SYNC_DIR;
            return err;
        }
    }
    for (k = 0; k < b->ndirs; k++) {
        struct ff_batch_dir *d = &b->dirs[k];

        if (!d->renamed_into)
            continue;
        FF_SYSCALL(err, b->intr, fsync(d->fd));
        if (err && !FF_CANNOT_SYNC(err)) {
            b->failed = d->last_file;
            b->files[d->last_file].a.step = FF_STEP_SYNC_DIR;
            return err;
        }
    }
    return 0;
}

int ff_batch_commit(struct ff_batch *b, long pid)
{
    size_t i, group = 0;
    char suffix[sizeof ".tmp." + 3 * sizeof(long)];
    size_t suffix_len = (size_t)snprintf(suffix, sizeof suffix, ".tmp.%ld", pid);
    int err;

    b->pid = pid;
    /* 1. look: directories, targets, duplicates; name the temps */
    for (i = 0; i < b->n; i++) {
        struct ff_atomic *a = &b->files[i].a;

        b->failed = i;
        if ((err = ff_atomic_prepare(a)) || (err = name_temp(&b->files[i], suffix, suffix_len))
            || (err = open_dir(b, i)) || (err = look_at_target(b, i)))
            return err;
    }
    b->failed = FF_NONE;
    if ((err = find_duplicate(b)))
        return err;

    /* 2. every temp written in full; 3. with fsync, the barrier over them */
    for (i = 0; i < b->n; i++) {
        b->failed = i;
        if ((err = write_temp(b, i)))
            return err;
        if (b->opt.fsync && i + 1 - group == FF_BATCH_OPEN_MAX) {
            if ((err = barrier(b, group, i + 1)))
                return err;
            group = i + 1;
        }
    }
    if (b->opt.fsync && (err = barrier(b, group, b->n)))
        return err;
    b->failed = FF_NONE;

    /* 4. the renames, in order; 5. with fsync, each directory once. A
     * signal that came meanwhile (its handler only pending) is handled
     * first, while every target is still old: a handler that dies leaves
     * them all untouched. */
    interrupted(b->intr);
    err = rename_all(b);
    if (b->opt.fsync) {
        size_t failed = b->failed;
        int sync_err = sync_dirs(b);    /* after a failed rename too: what was
                                         * replaced should stay replaced */
        if (!err)
            return sync_err;
        b->failed = failed;
        b->files[failed].a.step = FF_STEP_RENAME;
    }
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
}

void ff_batch_discard(struct ff_batch *b)
{
    int saved = errno;
    size_t i;

    for (i = 0; i < b->n; i++)
        ff_atomic_discard(&b->files[i].a);
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
        free(b->made[i].path);
    free(b->files);
    free(b->dirs);
    free(b->made);
    b->files = NULL;
    b->dirs = NULL;
    b->made = NULL;
    b->n = b->cap = b->ndirs = b->nmade = 0;
    errno = saved;
}
