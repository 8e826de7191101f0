/* ff_io.c - the syscalls of FastFile, in one place, without perl.
 *
 * The default write path is open + write + close + rename: nothing else is
 * needed to replace a file atomically, so nothing else is done (no fstat,
 * lseek, fcntl). Options add only the syscalls they need.
 */
/* Our own feature macros, whatever perl's ccflags hold (only threaded perls
 * pass -D_GNU_SOURCE): renameat2 and RENAME_NOREPLACE are GNU extensions.
 * The Linux-only calls and their fallbacks are in ff_compat.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ff_io.h"
#include "ff_syscall.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>

#ifndef CLOCK_REALTIME_COARSE
#define CLOCK_REALTIME_COARSE CLOCK_REALTIME    /* Linux's; elsewhere the exact clock */
#endif

/* The directory part of path, as a new string: "." when there is none. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len;
    char *dir;

    if (!slash)
        return strdup(".");
    while (slash > path && slash[-1] == '/')
        slash--;
    len = slash == path ? 1 : (size_t)(slash - path);
    dir = malloc(len + 1);
    if (dir) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

int ff_atomic_init(struct ff_atomic *a, const char *path, const struct ff_options *opt,
                   const struct ff_eintr *intr)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->step_fd = -1;
    a->dirfd = AT_FDCWD;
    a->opt = *opt;
    a->intr = intr;
    a->target = strdup(path);
    a->target_len = strlen(path);
    return a->target ? 0 : ENOMEM;
}

/* Sticky and writable by others than its owner: world-writable (/tmp), or
 * group-writable (01770, shared by a group), where fs.protected_regular=2
 * draws the line: every member of the group can plant a file there. */
#define FF_STICKY_SHARED(mode) (((mode) & S_ISVTX) && ((mode) & (S_IWOTH | S_IWGRP)))

FF_HOT void ff_atomic_init_lent(struct ff_atomic *a, const char *path, size_t path_len,
                         const struct ff_options *opt, const struct ff_eintr *intr,
                         char *temp_buf)
{
    memset(a, 0, offsetof(struct ff_atomic, old));     /* old on: see struct ff_atomic */
    a->fd = -1;
    a->step_fd = -1;
    a->dirfd = AT_FDCWD;
    a->opt = *opt;
    a->intr = intr;
    a->target = (char *)path;      /* only read, never written through */
    a->target_len = path_len;
    a->target_lent = 1;
    a->temp_buf = temp_buf;
}

/* The target's string gives way to a new one (next, ours). */
static void replace_target(struct ff_atomic *a, char *next)
{
    if (!a->target_lent)
        free(a->target);
    a->target = next;
    a->target_len = strlen(next);
    a->target_lent = 0;
}

int ff_sticky_trusts(const struct stat *dir, const struct stat *file)
{
    return !FF_STICKY_SHARED(dir->st_mode)
           || (file->st_nlink == 1 && (file->st_uid == geteuid() || file->st_uid == dir->st_uid));
}

static void release_step_mem(struct ff_atomic *a)
{
    free(a->step_mem);
    a->step_mem = NULL;
}

/* stat of the directory that holds path. Its name is held in step_mem
 * while the stat may run signal handlers, so a handler that dies leaves
 * discard something to free, not a leak. */
static int stat_dir_of(struct ff_atomic *a, const char *path, struct stat *dir)
{
    int err = ENOMEM;

    a->step_mem = dir_of(path);
    if (a->step_mem)
        FF_SYSCALL(err, a->intr, fstatat(a->dirfd, a->step_mem, dir, 0));
    release_step_mem(a);
    return err;
}

/* readlink relative to dirfd (AT_FDCWD: readlink itself, as before) */
static ssize_t readlink_in(int dirfd, const char *path, char *buf, size_t size)
{
    return dirfd == AT_FDCWD ? readlink(path, buf, size) : readlinkat(dirfd, path, buf, size);
}

/* fs.protected_symlinks, applied whatever the sysctl says: a symlink in a
 * sticky directory others may write is followed only when its owner is the
 * follower (our euid) or the directory's owner; else EACCES, as the kernel
 * answers. The kernel's rule for links stops at world-writable ones; ours
 * is ff_sticky_trusts' everywhere: in a sticky group-writable one (01770)
 * any member may plant a link, and following it would replace whatever
 * file it names with the follower's rights (root's: any file).
 * Asked only once readlink has found a link (text[0..n)), so a plain
 * target costs nothing. EAGAIN: the link changed meanwhile, read it again. */
static int may_follow(struct ff_atomic *a, const char *text, ssize_t n)
{
    const char *link_path = a->target;
    const struct ff_eintr *intr = a->intr;
    char again[PATH_MAX];
    struct stat dir, link;
    ssize_t m;
    int err = stat_dir_of(a, link_path, &dir);

    if (err)
        return err;
    if (!FF_STICKY_SHARED(dir.st_mode))
        return 0;
    FF_SYSCALL(err, intr, fstatat(a->dirfd, link_path, &link, AT_SYMLINK_NOFOLLOW));
    if (err)
        return err == ENOENT ? EAGAIN : err;
    if (!S_ISLNK(link.st_mode))
        return EAGAIN;
    if (!ff_sticky_trusts(&dir, &link))
        return EACCES;
    /* the owner seen must be the owner of the text read: in a sticky
     * directory only the link's owner can replace it, and the same text
     * read after the lstat proves it was not swapped in between */
    FF_SYSCALL(err, intr, m = readlink_in(a->dirfd, link_path, again, sizeof again));
    if (err)
        return err == EINVAL || err == ENOENT ? EAGAIN : err;
    if (m != n || memcmp(again, text, (size_t)n) != 0)
        return EAGAIN;
    return 0;
}

/* Replace a->target by the path its symlink chain finally names. */
static int resolve_symlinks(struct ff_atomic *a)
{
    char link[PATH_MAX];
    int hops;

    for (hops = 0;; hops++) {
        ssize_t n;
        char *next, *dir;
        int err;

        FF_SYSCALL(err, a->intr, n = readlink_in(a->dirfd, a->target, link, sizeof link));
        if (err) /* not a symlink, or nothing there yet: this is the file */
            return err == EINVAL || err == ENOENT || err == ENOTDIR ? 0 : err;
        if ((size_t)n == sizeof link)
            return ENAMETOOLONG;
        if (hops == FF_MAX_SYMLINKS)
            return ELOOP;
        err = may_follow(a, link, n);
        if (err == EAGAIN)
            continue;       /* swapped: counts as a hop, so it ends */
        if (err)
            return err;
        link[n] = '\0';
        if (link[0] == '/') {
            next = strdup(link);
        } else {    /* relative to the directory that holds the link */
            dir = dir_of(a->target);
            next = dir ? malloc(strlen(dir) + 1 + (size_t)n + 1) : NULL;
            if (next)
                sprintf(next, "%s/%s", dir, link);
            free(dir);
        }
        if (!next)
            return ENOMEM;
        replace_target(a, next);
    }
}

FF_HOT int ff_atomic_prepare(struct ff_atomic *a)
{
    int err;

    if (a->opt.follow_symlinks) {
        a->step = FF_STEP_RESOLVE;
        err = resolve_symlinks(a);
        if (err)
            return err;
    }
    if (a->opt.preserve || a->opt.if_changed) {
        a->step = FF_STEP_STAT;
        FF_SYSCALL(err, a->intr, fstatat(a->dirfd, a->target, &a->old, AT_SYMLINK_NOFOLLOW));
        if (err && err != ENOENT)
            return err;
        a->have_old = !err && S_ISREG(a->old.st_mode);
    }
    a->step = FF_STEP_NONE;
    return 0;
}

/* Close and free what the current step holds; keeps errno. */
static void release_step(struct ff_atomic *a)
{
    if (a->step_fd >= 0) {
        ff_close_read(a->step_fd);
        a->step_fd = -1;
    }
    release_step_mem(a);
}

/* *trusted: 1 when the file (its stat) at the target may be taken as it is
 * (preserve keeps its owner and mode, if_changed leaves it): ours with one
 * link, or not in a sticky directory others may write, or there ours or
 * the directory owner's with one link (ff_sticky_trusts). Anyone can plant
 * a file in /tmp, any member of the group in a 01770 one, a hard link to
 * our file too. Uses step_mem. */
static int owner_trusted(struct ff_atomic *a, const struct stat *file, int *trusted)
{
    struct stat dir;
    int err;

    *trusted = file->st_uid == geteuid() && file->st_nlink == 1;
    if (*trusted)
        return 0;
    err = stat_dir_of(a, a->target, &dir);
    if (!err)
        *trusted = ff_sticky_trusts(&dir, file);
    return err;
}

/* malloc(len) for reads of fd (*on_fuse set when fstatfs was asked), on a
 * page where that makes a read of len bytes one FUSE request instead of
 * two and fd is on FUSE (glibc maps an aligned block afresh each time, a
 * page fault for each page read: only there) */
static char *read_mem(size_t len, int fd, int *on_fuse)
{
    void *mem;

    if (ff_one_request_anywhere(len) || len > FF_FUSE_REQUEST)
        return malloc(len);
    if (!(*on_fuse = ff_on_fuse(fd)))
        return malloc(len);
    return posix_memalign(&mem, FF_PAGE, len) ? NULL : mem;
}

int ff_atomic_unchanged(struct ff_atomic *a, const char *buf, size_t len, const char *tail,
                        size_t tail_len)
{
    int trusted = 0, on_fuse = 0;
    struct stat st;
    size_t got, total = len + tail_len;
    unsigned reads = 0, rereads = 0;
    int err, same;

    if (!a->have_old || (size_t)a->old.st_size != total)
        return 0;
    /* Whatever is there now, not what lstat saw: O_NONBLOCK so that a FIFO
     * swapped in cannot block the open, O_NOFOLLOW so that a symlink cannot
     * lead elsewhere (follow_symlinks resolved the target already); only a
     * regular file is compared. */
    FF_SYSCALL(err, a->intr,
               a->step_fd = openat(a->dirfd, a->target, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    if (err)
        return 0;
    /* total + 1: a file that grew since fstat is not the same */
    FF_SYSCALL(err, a->intr, fstat(a->step_fd, &st));
    /* the owner of what is compared (fstat): another user's file planted
     * in /tmp is replaced by ours, not left to them */
    same = !err && S_ISREG(st.st_mode) && (size_t)st.st_size == total
           && !owner_trusted(a, &st, &trusted) && trusted
           && (a->step_mem = read_mem(total + 1, a->step_fd, &on_fuse)) != NULL
           && !ff_read_full(a->step_fd, a->step_mem, total + 1, total, &got, &reads, a->intr)
           && got == total
           && memcmp(a->step_mem, buf, len) == 0
           && memcmp(a->step_mem + len, tail, tail_len) == 0;
    /* "the same" from a read of more than one FUSE request may be torn (on
     * pmxcfs another node's version can answer the later requests), and
     * leaving a file that is not data would be wrong: a second read must
     * agree (a "changed" is never wrong: it writes). So must the bytes of
     * more than one read (a short read, then another version's rest) */
    if (same && (reads > 1 || ff_more_than_one_request(a->step_mem, total + 1))
        && (on_fuse
            || ((reads > 1 || total + 1 > FF_FUSE_REQUEST) && ff_on_fuse(a->step_fd))))
        same = !ff_pread_full(a->step_fd, a->step_mem, total + 1, 0, total, &got, &rereads,
                              a->intr)
               && got == total && memcmp(a->step_mem, buf, len) == 0
               && memcmp(a->step_mem + len, tail, tail_len) == 0;
    release_step(a);
    return same;
}

FF_HOT mode_t ff_temp_mode(const struct ff_atomic *a, int preserve)
{
    /* preserve: the final mode is only set at commit, after the data is
     * written; until then only the owner's bits that both the old file and
     * perm grant. Group and others get nothing: the temp's owner and group
     * are still ours, not the old file's, until the commit's fchown. */
    if (preserve && a->have_old)
        return a->opt.perm & a->old.st_mode & 0700;
    return a->opt.perm;
}

/* Is dirfd/name plausibly the temp our own interrupted open created (the
 * server made it, then EINTR came back)? We never had an fd for it, so we
 * cannot know its inode; we only ever unlink it (never open it: it may be
 * someone else's), and only if it looks exactly like what that open makes:
 * a regular file with one link, owned by our euid, empty, no mode bit
 * beyond `mode`, changed no earlier than a second before we started
 * (timestamps may be whole seconds). Nobody else can make a file owned by
 * us; the one left risk is another writer of ours with the same name (same
 * PID in another PID namespace or on another node, or another thread of
 * this process) that has just created it and written nothing yet: its
 * rename then fails with ENOENT, its target untouched. That is why the
 * name is never created again after the removal (see ff_open_excl). */
static int own_orphan(int dirfd, const char *name, mode_t mode, const struct timespec *started,
                      const struct ff_eintr *intr)
{
    struct stat st;
    int err;

    FF_SYSCALL(err, intr, fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW));
    return !err && S_ISREG(st.st_mode)
           && st.st_nlink == 1 && st.st_uid == geteuid() && st.st_size == 0
           && (st.st_mode & 07777 & ~mode) == 0 && st.st_ctime + 1 >= started->tv_sec;
}

/* The directory is read at each try (*dir): a signal handler that runs
 * between two may have had the working directory held (ff_atomic_pin_cwd). */
FF_HOT static int open_excl_in(const int *dir, const char *name, mode_t mode, int *fd,
                        const struct ff_eintr *intr)
{
    struct timespec started;
    unsigned spins = 0;
    int err, gone, after_eintr = 0;

    /* the vDSO's coarse clock: no syscall, ~10 ns */
    clock_gettime(CLOCK_REALTIME_COARSE, &started);
    for (;;) {
        int dirfd = *dir;

        *fd = openat(dirfd, name, FF_TEMP_FLAGS, mode);
        if (*fd >= 0)
            return 0;
        err = errno;
        if (err == EEXIST && after_eintr && own_orphan(dirfd, name, mode, &started, intr)) {
            /* NFS or FUSE created it, then answered EINTR: ours, removed.
             * But the name is not created again: if the file was another
             * writer's after all, that writer renames by this name, and
             * would publish our half-written temp as the target. EEXIST:
             * the caller goes on with a random name, as for any taken
             * name; the other writer's rename fails, its target intact. */
            FF_SYSCALL(gone, intr, unlinkat(*dir, name, 0));
            return EEXIST;
        }
        if (err != EINTR)
            return err;
        after_eintr = 1;
        if (!ff_retry_eintr(intr, &spins)) {
            if (own_orphan(*dir, name, mode, &started, NULL))
                FF_SYSCALL(gone, NULL, unlinkat(*dir, name, 0));
            return EINTR;
        }
    }
}

int ff_open_excl(int dirfd, const char *name, mode_t mode, int *fd,
                 const struct ff_eintr *intr)
{
    return open_excl_in(&dirfd, name, mode, fd, intr);
}

FF_HOT static int open_temp(struct ff_atomic *a, int *fd)
{
    return open_excl_in(&a->dirfd, a->temp, ff_temp_mode(a, a->opt.preserve), fd, a->intr);
}

/* The target's and the temp's names made absolute: the working
 * directory's name (getcwd) before them. For a directory a build without
 * O_PATH cannot hold (open needs read permission). */
static int absolute_names(struct ff_atomic *a)
{
    size_t size = 256, cwd_len, temp_len = strlen(a->temp);
    char *cwd = NULL, *target, *temp;

    for (;;) {
        char *bigger = realloc(cwd, size);

        if (!bigger) {
            free(cwd);
            return ENOMEM;
        }
        cwd = bigger;
        if (getcwd(cwd, size))
            break;
        if (errno != ERANGE) {
            int err = errno;

            free(cwd);
            return err;
        }
        size *= 2;
    }
    cwd_len = strcmp(cwd, "/") == 0 ? 0 : strlen(cwd);      /* "/x", not "//x" */
    target = malloc(cwd_len + 1 + a->target_len + 1);
    /* the room the temp had for a random suffix (ff_temp_random_name) */
    temp = malloc(cwd_len + 1 + a->target_len + FF_TEMP_EXTRA);
    if (!target || !temp) {
        free(cwd);
        free(target);
        free(temp);
        return ENOMEM;
    }
    memcpy(target, cwd, cwd_len);
    target[cwd_len] = '/';
    memcpy(target + cwd_len + 1, a->target, a->target_len);
    target[cwd_len + 1 + a->target_len] = '\0';
    memcpy(temp, cwd, cwd_len);
    temp[cwd_len] = '/';
    memcpy(temp + cwd_len + 1, a->temp, temp_len + 1);
    free(cwd);
    if (a->temp != a->temp_buf)
        free(a->temp);
    a->temp = temp;
    replace_target(a, target);
    return 0;
}

/* opt.hold_cwd, a relative target: the working directory held (O_PATH) in
 * a->dirfd before the temp is made in it, so the temp, its rename and its
 * removal are in one directory whatever chdir comes (another thread's, or
 * user code's between the writer's calls). A build without O_PATH that may
 * not read the directory (EACCES) makes the names absolute instead (a
 * chdir cannot move them; a rename of the directory can). */
int ff_open_cwd(int *fd)
{
    int err;

    /* no callback: no handler may move it while it is taken */
    FF_SYSCALL(err, NULL, *fd = open(".", FF_O_PATH | O_DIRECTORY | O_CLOEXEC));
    return err;
}

/* The working directory held in a->dirfd: every step from now on in it */
static int take_cwd(struct ff_atomic *a)
{
    int fd, err = ff_open_cwd(&fd);

    if (!err) {
        a->dirfd = fd;
        a->opt.cwd_held = 1;
    }
    return err;
}

void ff_atomic_adopt_cwd(struct ff_atomic *a, int *fd)
{
    if (a->opt.cwd_held || a->target[0] == '/')
        return;
    a->dirfd = *fd;
    a->opt.cwd_held = 1;
    *fd = -1;
}

static int hold_cwd(struct ff_atomic *a)
{
    int err;

    if (a->opt.cwd_held || a->target[0] == '/')
        return 0;
    err = take_cwd(a);
    return !FF_HAVE_O_PATH && err == EACCES ? absolute_names(a) : err;
}

/* 64 random bits for a temp suffix; only needed after a name collision, so
 * the extra syscall is off the normal path. */
static unsigned long long random_bits(void)
{
    unsigned long long r;
    struct timespec ts;

    if (ff_getrandom(&r, sizeof r) == (ssize_t)sizeof r)
        return r;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec
           ^ (unsigned long long)(size_t)&r;
}

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

int ff_temp_random_name(char *temp, size_t target_len, size_t base_len, int *fit)
{
    const size_t add = FF_TEMP_SUFFIX_MAX - 1;      /* ".<16 hex digits>" */
    size_t leaf = target_len;           /* where the target's last name starts */
    char suffix[FF_TEMP_SUFFIX_MAX];

    while (leaf > 0 && temp[leaf - 1] != '/')
        leaf--;
    snprintf(suffix, sizeof suffix, ".%016llx", random_bits());
    if (!*fit && base_len - leaf + add <= NAME_MAX) {
        memcpy(temp + base_len, suffix, FF_TEMP_SUFFIX_MAX);  /* "<target>.tmp.<pid>.<random>" */
        return 0;
    }
    /* As long as the plain name, which the kernel took (a name near
     * NAME_MAX, or a filesystem with a shorter limit): the random part
     * takes the place of the target name's last bytes,
     * "<target less 17 bytes>.tmp.<pid>.<random>". Never the target's own
     * name: that is shorter. */
    if (*fit == 2) {                    /* shortened already: a new random part only */
        memcpy(temp + base_len - add, suffix, FF_TEMP_SUFFIX_MAX);
        return 0;
    }
    *fit = 1;
    if (target_len - leaf <= add)
        return ENAMETOOLONG;            /* a leaf that short: no fallback that fits */
    memmove(temp + target_len - add, temp + target_len, base_len - target_len);
    memcpy(temp + base_len - add, suffix, FF_TEMP_SUFFIX_MAX);
    *fit = 2;
    return 0;
}

/* base_len: strlen(a->temp) */
FF_HOT static int create_temp(struct ff_atomic *a, size_t base_len)
{
    int err = open_temp(a, &a->fd);
    int tries, fit = 0;

    /* The plain name may belong to another live writer (same PID on another
     * cluster node): never touch it, pick a fresh name instead, one that
     * fits wherever the plain name does. */
    for (tries = 0; (err == EEXIST || (err == ENAMETOOLONG && tries && !fit))
                    && tries < FF_TEMP_TRIES; tries++) {
        if (err == ENAMETOOLONG)
            fit = 1;
        err = ff_temp_random_name(a->temp, a->target_len, base_len, &fit);
        if (!err)
            err = open_temp(a, &a->fd);
    }
    if (!err)
        a->created = 1;
    return err;
}

/* mkdir relative to *at (or the working directory), read at each try
 * (see open_excl_in) */
#define FF_MKDIR_AT(at, dir) (*(at) == AT_FDCWD ? mkdir(dir, 0777) : mkdirat(*(at), dir, 0777))

static int mkdir_p_in(const int *at, char *dir, int *made, const struct ff_eintr *intr)
{
    size_t len = strlen(dir);
    int err;

    *made = 0;
    /* up: cut off the last component until a mkdir finds its parent */
    for (;;) {
        char *slash;

        FF_SYSCALL(err, intr, FF_MKDIR_AT(at, dir));
        if (err != ENOENT)
            break;
        slash = strrchr(dir, '/');
        while (slash && slash > dir && slash[-1] == '/')
            slash--;
        if (!slash || slash == dir)     /* no parent left to create it in */
            return ENOENT;
        *slash = '\0';
    }
    if (err && err != EEXIST)
        return err;
    *made = !err;
    /* down: put each cut back, creating that level */
    while (strlen(dir) < len) {
        dir[strlen(dir)] = '/';
        ff_poll_signals(intr);  /* dir names the level not made yet, as on EINTR */
        FF_SYSCALL(err, intr, FF_MKDIR_AT(at, dir));
        if (err && err != EEXIST)
            return err;
        ++*made;            /* made here or by a racing creator: ours to sync */
    }
    return 0;
}

int ff_mkdir_p(char *dir, int *made, const struct ff_eintr *intr)
{
    return ff_mkdir_p_at(AT_FDCWD, dir, made, intr);
}

int ff_mkdir_p_at(int dirfd, char *dir, int *made, const struct ff_eintr *intr)
{
    return mkdir_p_in(&dirfd, dir, made, intr);
}

/* n in decimal at out, NUL-terminated (a long needs at most 3 digits a byte). */
static void put_decimal(char *out, long n)
{
    char digits[3 * sizeof(long) + 1];
    unsigned long u = n < 0 ? 0UL - (unsigned long)n : (unsigned long)n;
    size_t k = 0;

    do
        digits[k++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (n < 0)
        *out++ = '-';
    while (k)
        *out++ = digits[--k];
    *out = '\0';
}

/* preserve: another user's old file is kept only where ff_sticky_trusts
 * says (asked here, not in prepare: if_changed may find nothing to do). */
FF_HOT static int may_preserve(struct ff_atomic *a)
{
    int err, trusted;

    if (!a->opt.preserve || !a->have_old)
        return 0;
    a->step = FF_STEP_PRESERVE;
    err = owner_trusted(a, &a->old, &trusted);
    return err ? err : trusted ? ff_atomic_read_acl(a) : EACCES;
}

/* The POSIX access ACL, as the kernel stores it (ff_compat.h): with one,
 * the mode's group bits are the ACL's mask, not the owning group's
 * permission. */

/* ff_acl_read of the target, relative to a->dirfd: no *at call reads an
 * xattr, so a held directory is named through /proc/self/fd (no open of
 * the file, no read permission needed). Where that name leads nowhere (no
 * /proc: a chroot, a container), the file itself is opened there and its
 * fd read (a name that is not there fails the same way). */
static ssize_t acl_read(const struct ff_atomic *a, void *buf, size_t size)
{
    char path[PATH_MAX];
    ssize_t n;
    int fd, err;

    if (a->dirfd == AT_FDCWD || a->target[0] == '/')
        return ff_acl_read(a->target, buf, size);
    if ((size_t)snprintf(path, sizeof path, "/proc/self/fd/%d/%s", a->dirfd, a->target) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    n = ff_acl_read(path, buf, size);
    if (n >= 0 || errno != ENOENT)
        return n;
    /* O_NONBLOCK: a FIFO swapped in since the lstat does not block */
    fd = openat(a->dirfd, a->target, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = ff_acl_read_fd(fd, buf, size);
    err = errno;
    ff_close_read(fd);
    errno = err;
    return n;
}

int ff_atomic_read_acl(struct ff_atomic *a)
{
    ssize_t n, got;
    int err;

    /* the size alone first: no ACL (ENODATA), or none possible here, is
     * the usual answer, one syscall */
    FF_SYSCALL(err, a->intr, n = acl_read(a, NULL, 0));
    a->acl_none = err == FF_ENOATTR && FF_HAVE_ACL;   /* ACLs here, but none on the old file */
    if (err == FF_ENOATTR || err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS)
        return 0;
    if (err)
        return err;
    a->acl = malloc(n > 0 ? (size_t)n : 1);
    if (!a->acl)
        return ENOMEM;
    FF_SYSCALL(err, a->intr, got = acl_read(a, a->acl, (size_t)n));
    if (err)
        return err;     /* ERANGE: it grew meanwhile; a->acl is freed by discard */
    a->acl_len = (size_t)got;
    return 0;
}

size_t ff_temp_suffix(char *out, long pid)
{
    memcpy(out, ".tmp.", sizeof ".tmp." - 1);
    put_decimal(out + sizeof ".tmp." - 1, pid);
    return strlen(out);
}

int ff_atomic_create(struct ff_atomic *a, long pid)
{
    char suffix[FF_PID_SUFFIX_MAX];
    size_t suffix_len = ff_temp_suffix(suffix, pid);

    return ff_atomic_create_named(a, pid, suffix, suffix_len);
}

FF_HOT int ff_atomic_create_named(struct ff_atomic *a, long pid, const char *suffix, size_t suffix_len)
{
    size_t len = a->target_len;
    int err = may_preserve(a);

    if (err)
        return err;

    a->temp = a->temp_buf && len + FF_TEMP_EXTRA <= FF_TEMP_BUF ? a->temp_buf
              : malloc(len + FF_TEMP_EXTRA);
    if (!a->temp)
        return ENOMEM;
    /* "<target>.tmp.<pid>" by hand: sprintf costs more than the rest of
     * the user-space work of a call */
    memcpy(a->temp, a->target, len);
    memcpy(a->temp + len, suffix, suffix_len + 1);
    a->pid = pid;

    a->step = FF_STEP_OPEN;     /* (a hold that fails EMFILE: as the temp's open) */
    if (a->opt.hold_cwd) {
        if ((err = hold_cwd(a)))
            return err;
        len = a->target_len;    /* (absolute now, where it could not be held) */
    }
    err = create_temp(a, len + suffix_len);
    /* costs nothing while the directory exists; a target that ends in "/"
     * (a symlink to "x/") names a directory, never the file: no directory
     * is made for a write that must fail */
    if (err == ENOENT && a->opt.mkdir && a->target[len - 1] != '/') {
        a->step = FF_STEP_MKDIR;
        a->step_mem = dir_of(a->target);
        err = a->step_mem ? mkdir_p_in(&a->dirfd, a->step_mem, &a->dirs_made, a->intr) : ENOMEM;
        release_step(a);
        if (err)
            return err;
        a->step = FF_STEP_OPEN;
        err = create_temp(a, len + suffix_len);
    }
    if (err)
        return err;
    a->step = FF_STEP_NONE;
    return 0;
}

/* Where the old group cannot be kept (a writer who is not root and not in
 * the old file's group) the group's rights would go to another group (the
 * writer's): it gets only what the old file gave both its group and
 * everyone else, and no setgid (that would run the file as the writer's
 * group). Without an ACL, in the mode: group & others (02660 -> 0600,
 * 0664 -> 0644). */
static mode_t mode_for_other_group(mode_t mode)
{
    mode_t others_as_group = (mode & S_IRWXO) << 3;

    return (mode & ~(mode_t)(S_ISGID | S_IRWXG)) | (mode & S_IRWXG & others_as_group);
}

/* With an ACL that has a mask, the mode's group bits are the mask (the
 * most any named user or group gets, kept as they were), and the owning
 * group's right is the ACL's group entry: that one is limited to the
 * other entry's. The ACL is the kernel's xattr: a 4-byte version, then
 * 8-byte entries (16-bit tag, 16-bit permission, 32-bit id, little-endian).
 * 0 when it has no mask (then chmod sets the group entry: the mode's rule). */
#define FF_ACL_GROUP_OBJ 0x04
#define FF_ACL_MASK 0x10
#define FF_ACL_OTHER 0x20
static int acl_group_as_others(char *acl, size_t len)
{
    unsigned char *entry, *group = NULL, *other = NULL, *mask = NULL;
    size_t i;

    if (len < 4 || (len - 4) % 8 != 0)
        return 0;
    for (i = 4; i < len; i += 8) {
        entry = (unsigned char *)acl + i;
        switch (entry[0] | entry[1] << 8) {
        case FF_ACL_GROUP_OBJ: group = entry; break;
        case FF_ACL_MASK:      mask = entry; break;
        case FF_ACL_OTHER:     other = entry; break;
        }
    }
    if (!group || !mask || !other)
        return 0;
    group[2] &= other[2];   /* r, w, x: the low byte */
    group[3] &= other[3];
    return 1;
}

/* preserve: the old file's owner, its ACL, then its mode. Where the owner
 * or the group cannot be kept, their set-id bit is not given to the one
 * the file has instead (nor, for the group, the old group's bits). After the data
 * is written: a write by a user without CAP_FSETID clears set-id bits, and
 * chown may clear them too; chmod last restores them. The ACL before the
 * mode: the old mode's group bits are the ACL's mask, and set without the
 * ACL they would open the file to the owning group, which the ACL may deny
 * (with it, chmod sets the mask, as the old file has it). */
static int preserve_old(struct ff_atomic *a)
{
    mode_t mode = a->old.st_mode & 07777;
    int err;

    a->step = FF_STEP_OWNER;
    FF_SYSCALL(err, a->intr, fchown(a->fd, a->old.st_uid, a->old.st_gid));
    if (err == EPERM) {     /* not root: the owner stays the writer */
        /* set-user-ID would run the file as the writer, not as its old
         * owner: kept only when the old owner is the writer */
        if (a->old.st_uid != geteuid())
            mode &= ~(mode_t)S_ISUID;
        /* a member of the file's group may still set the group */
        FF_SYSCALL(err, a->intr, fchown(a->fd, (uid_t)-1, a->old.st_gid));
    }
    if (err == EPERM) {     /* the group is the writer's, not the old one */
        if (a->acl && acl_group_as_others(a->acl, a->acl_len))
            mode &= ~(mode_t)S_ISGID;
        else
            mode = mode_for_other_group(mode);
    } else if (err) {
        return err;
    }
    a->step = FF_STEP_MODE;
    err = 0;
    /* the old file's ACL, or none: not the one the temp may have inherited
     * from a default ACL of the directory, which the old file did not have */
    if (a->acl)
        FF_SYSCALL(err, a->intr, ff_acl_write(a->fd, a->acl, a->acl_len));
    else if (a->acl_none)
        FF_SYSCALL(err, a->intr, ff_acl_remove(a->fd));
    if (err && err != FF_ENOATTR)
        return err;
    FF_SYSCALL(err, a->intr, fchmod(a->fd, mode));
    return err;
}

FF_HOT int ff_write_all(int fd, const char *buf, size_t len, const struct ff_eintr *intr)
{
    unsigned spins = 0;     /* EINTRs in a row without a signal */

    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            spins = 0;
            /* a signal that arrives mid-write makes it short, not EINTR:
             * its handler (an alarm timeout) must still run before the rest */
            if (len > 0)
                interrupted(intr);
        } else if (n == 0) {
            return ENOSPC;
        } else if (errno != EINTR) {
            return errno;
        } else if (!ff_retry_eintr(intr, &spins)) {
            return EINTR;
        }
    }
    return 0;
}

FF_HOT int ff_write_tail_all(int fd, const char *buf, size_t len, const char *tail, size_t tail_len,
                      const struct ff_eintr *intr)
{
    struct iovec iov[2];
    unsigned spins = 0;
    ssize_t n;
    int err;

    if (len == 0 || tail_len == 0)
        return len ? ff_write_all(fd, buf, len, intr) : ff_write_all(fd, tail, tail_len, intr);
    iov[0].iov_base = (void *)buf;
    iov[0].iov_len = len;
    iov[1].iov_base = (void *)tail;
    iov[1].iov_len = tail_len;
    while ((n = writev(fd, iov, 2)) < 0) {
        if (errno != EINTR)
            return errno;
        if (!ff_retry_eintr(intr, &spins))
            return EINTR;
    }
    if (n == 0)
        return ENOSPC;
    if ((size_t)n >= len) {         /* the data is out, the tail maybe in part */
        n -= (ssize_t)len;
        tail += n;
        tail_len -= (size_t)n;
        len = 0;
    } else {
        buf += n;
        len -= (size_t)n;
    }
    if (len + tail_len == 0)
        return 0;
    interrupted(intr);              /* short: as in ff_write_all */
    err = ff_write_all(fd, buf, len, intr);
    return err ? err : ff_write_all(fd, tail, tail_len, intr);
}

void ff_wbuf_init(struct ff_wbuf *b, size_t size, char *first, size_t first_cap)
{
    b->buf = b->first = first;
    b->len = 0;
    b->cap = first ? first_cap : 0;
    b->size = size;
}

int ff_wbuf_fills(const struct ff_wbuf *b, size_t n)
{
    return n >= b->size - b->len;   /* len < size: the buffer is never left full */
}

/* Room for need bytes (need <= size). */
static int wbuf_reserve(struct ff_wbuf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : FF_WBUF_FIRST_CAP;
    char *buf;

    if (need <= b->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    if (cap > b->size)
        cap = b->size;
    if (b->buf && b->buf == b->first) {     /* out of the lent memory: to the heap */
        buf = malloc(cap);
        if (buf)
            memcpy(buf, b->buf, b->len);
    } else {
        buf = realloc(b->buf, cap);
    }
    if (!buf)
        return ENOMEM;
    b->buf = buf;
    b->cap = cap;
    return 0;
}

int ff_wbuf_append(struct ff_wbuf *b, int fd, const char *buf, size_t n,
                   const struct ff_eintr *intr)
{
    while (n > 0) {
        size_t take = b->size - b->len;
        int err;

        if (b->len == 0 && n >= b->size)    /* a whole buffer or more: no copy */
            return ff_write_all(fd, buf, n, intr);
        if (take > n)
            take = n;
        err = wbuf_reserve(b, b->len + take);
        if (err)
            return err;
        memcpy(b->buf + b->len, buf, take);
        b->len += take;
        buf += take;
        n -= take;
        if (b->len == b->size) {
            err = ff_wbuf_flush(b, fd, intr);
            if (err)
                return err;
        }
    }
    return 0;
}

int ff_wbuf_flush(struct ff_wbuf *b, int fd, const struct ff_eintr *intr)
{
    int err = b->len ? ff_write_all(fd, b->buf, b->len, intr) : 0;

    if (!err)
        b->len = 0;
    return err;
}

void ff_wbuf_free(struct ff_wbuf *b)
{
    if (b->buf != b->first)
        free(b->buf);
    b->buf = b->first = NULL;
    b->len = b->cap = 0;
}

/* rename without replacing, relative to dirfd (the batch's directory, or
 * AT_FDCWD): renameat2 where the build and the filesystem have it, else a
 * hard link, which never replaces either. */

/* Where a's relative names are looked up after a callback ran: dirfd,
 * unless that is the working directory and the handlers that ran had it
 * held first (ff_atomic_pin_cwd: a chdir of theirs moves nothing). */
static inline int dir_now(const struct ff_atomic *a, int dirfd)
{
    return dirfd == AT_FDCWD ? a->dirfd : dirfd;
}

/* 1 when from and to in dirfd are one file (device and inode), looked at
 * without a callback: from the link on no handler may run. */
static int same_file(int dirfd, const char *from, const char *to)
{
    struct stat f, t;
    int err;

    FF_SYSCALL(err, NULL, fstatat(dirfd, from, &f, AT_SYMLINK_NOFOLLOW));
    if (err)
        return 0;
    FF_SYSCALL(err, NULL, fstatat(dirfd, to, &t, AT_SYMLINK_NOFOLLOW));
    return !err && f.st_dev == t.st_dev && f.st_ino == t.st_ino;
}

/* The link fallback publishes in two steps: link (the target now exists,
 * the temp is a second name of it), then unlink of the temp. No handler
 * runs once the link is made (the unlink's EINTR is retried without the
 * callback): user code never sees the target with two names, and a
 * handler that dies cannot leave a target made by a call that dies. The
 * link and the unlink are one step, as a rename is: a signal that comes
 * during it is handled after the call returns. An EINTR may come after the
 * server did the work (NFS, FUSE): a link interrupted is looked for (the
 * same inode as the temp) before handlers run, and the unlink's ENOENT
 * means its name is gone. */
static int link_then_unlink(struct ff_atomic *a, int dirfd, const char *from, const char *to,
                            int *unsupported, const struct ff_eintr *intr)
{
    unsigned spins = 0;
    int err, undo, interrupted = 0;

    for (;;) {
        err = linkat(dirfd, from, dirfd, to, 0) < 0 ? errno : 0;
        if (err != EINTR)
            break;
        interrupted = 1;
        if (same_file(dirfd, from, to)) {   /* linked after all: no handler now */
            err = 0;
            break;
        }
        if (!ff_retry_eintr(intr, &spins))  /* nothing published: handlers may run */
            break;
        dirfd = dir_now(a, dirfd);
        if ((err = ff_atomic_temp_publishable(a, dirfd, from)))   /* and may replace the temp */
            return err;
    }
    if (err == EEXIST && interrupted && same_file(dirfd, from, to))
        err = 0;                            /* the interrupted link, done late */
    *unsupported = err == EPERM || err == ENOSYS || err == EOPNOTSUPP;
    if (err)
        return err;
    FF_SYSCALL(err, NULL, unlinkat(dirfd, from, 0));     /* no callback: see above */
    if (!err || err == ENOENT)      /* the temp's name is gone: published */
        return 0;
    /* noclobber: there was no target before; it goes again, if it is
     * still the link made here (not a file renamed over it meanwhile) */
    if (same_file(dirfd, from, to))
        FF_SYSCALL(undo, NULL, unlinkat(dirfd, to, 0));
    return err;
}

int ff_noclobber_renameat(struct ff_atomic *a, int dirfd, const char *from, const char *to,
                          int *unsupported, const struct ff_eintr *intr)
{
    unsigned spins = 0;
    int err;

    *unsupported = 0;
    for (;;) {
        err = ff_renameat_noreplace(dirfd, from, dirfd, to) < 0 ? errno : 0;
        if (err != EINTR || !ff_retry_eintr(intr, &spins))
            break;
        /* a handler ran: it may have replaced the temp by name */
        dirfd = dir_now(a, dirfd);
        if ((err = ff_atomic_temp_publishable(a, dirfd, from)))
            return err;
    }
    if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP)
        return err;
    return link_then_unlink(a, dirfd, from, to, unsupported, intr);
}

/* The commit's steps below take dirfd, where relative names are looked
 * up: its code is made twice, for the working directory of the call
 * (ff_atomic_commit: AT_FDCWD, a constant, so the single call's code is
 * one rename(2), nothing tested) and for a held directory (the writer's,
 * or the single call's once a handler ran: ff_atomic_pin_cwd). Where
 * handlers may run in the middle of a step, its retries read a->dirfd
 * again. */
#if defined(__GNUC__)
#define FF_INLINE_ALWAYS static inline __attribute__((always_inline))
#else
#define FF_INLINE_ALWAYS static inline
#endif

static int rename_noreplace(struct ff_atomic *a, int dirfd)
{
    int unsupported, err = ff_noclobber_renameat(a, dirfd, a->temp, a->target, &unsupported,
                                                 a->intr);

    if (unsupported)
        a->step = FF_STEP_NOCLOBBER;
    return err;
}

/* The parent of the directory path dir, in place: "a/b" -> "a", "a" -> ".",
 * "/a" -> "/". */
static void cut_to_parent(char *dir)
{
    char *slash = strrchr(dir, '/');

    while (slash && slash > dir && slash[-1] == '/')
        slash--;
    if (!slash)
        strcpy(dir, ".");               /* fits: dir was one name, at least a byte */
    else
        slash[slash == dir] = '\0';     /* keep the root's own "/" */
}

/* open (relative to *at, read at each try: see open_excl_in) and fsync
 * the directory dir; the fd is in *fd meanwhile. */
static int sync_one_dir(const int *at, const char *dir, int *fd, const struct ff_eintr *intr)
{
    int err;

    FF_SYSCALL(err, intr, *fd = openat(*at, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (err)
        return err;
    FF_SYSCALL(err, intr, fsync(*fd));
    ff_close_read(*fd);
    *fd = -1;
    return err == EINVAL || err == ENOSYS ? 0 : err;    /* cannot sync: not an error */
}

static int sync_parents_at(const int *at, char *dir, int levels, int *fd,
                           const struct ff_eintr *intr)
{
    int err = 0;

    while (levels-- > 0 && !err) {
        cut_to_parent(dir);
        err = sync_one_dir(at, dir, fd, intr);
    }
    return err;
}

int ff_sync_parents(char *dir, int levels, int *fd, const struct ff_eintr *intr)
{
    static const int cwd = AT_FDCWD;

    return sync_parents_at(&cwd, dir, levels, fd, intr);
}

/* fsync the target's directory (relative to a->dirfd), then, for each
 * level mkdir made, the parent that holds it: a new directory is only
 * durable once its entry is. */
static int sync_dirs(struct ff_atomic *a)
{
    int err;

    a->step_mem = dir_of(a->target);
    err = a->step_mem ? sync_one_dir(&a->dirfd, a->step_mem, &a->step_fd, a->intr) : ENOMEM;
    if (!err)
        err = sync_parents_at(&a->dirfd, a->step_mem, a->dirs_made, &a->step_fd, a->intr);
    release_step(a);
    return err;
}

/* rename_own's retries, after an EINTR: a handler that ran meanwhile (its
 * identity then noted) may have replaced the temp, which is checked again
 * before each, and may have had the working directory held (a->dirfd). */
static int rename_retry(struct ff_atomic *a)
{
    unsigned spins = 0;
    int err = EINTR, dirfd;

    while (err == EINTR) {
        if (!ff_retry_eintr(a->intr, &spins))
            return EINTR;
        dirfd = a->dirfd;
        if ((err = ff_atomic_temp_publishable(a, dirfd, a->temp)))
            return err;
        a->step = FF_STEP_RENAME;
        err = (dirfd == AT_FDCWD ? rename(a->temp, a->target)
                                 : renameat(dirfd, a->temp, dirfd, a->target)) < 0 ? errno : 0;
    }
    return err;
}

/* rename(temp, target) (renameat in a held directory), EINTR retried.
 * Without a handler run: one rename(2), nothing more. */
FF_INLINE_ALWAYS int rename_own(struct ff_atomic *a, int dirfd)
{
    int err = (dirfd == AT_FDCWD ? rename(a->temp, a->target)
                                 : renameat(dirfd, a->temp, dirfd, a->target)) < 0 ? errno : 0;

    return err == EINTR ? rename_retry(a) : err;
}

/* The rename and what follows it, in dirfd. */
FF_INLINE_ALWAYS int publish_in(struct ff_atomic *a, int dirfd)
{
    int err;

    if ((err = ff_atomic_temp_publishable(a, dirfd, a->temp)))
        return err;
    a->step = FF_STEP_RENAME;
    if (a->opt.noclobber)
        err = rename_noreplace(a, dirfd);
    else
        err = rename_own(a, dirfd);
    if (err)
        return err;
    a->created = 0;

    if (a->opt.fsync) {
        a->step = FF_STEP_SYNC_DIR;
        err = sync_dirs(a);
        if (err)
            return err;
    }
    a->step = FF_STEP_NONE;
    return 0;
}

/* publish_in in the directory held (not inlined: the single call's own
 * copy is the one with the working directory, a constant) */
static int publish_held(struct ff_atomic *a)
{
    return publish_in(a, a->dirfd);
}

FF_INLINE_ALWAYS int commit_in(struct ff_atomic *a, int dirfd)
{
    int err;

    if (a->opt.preserve && a->have_old) {
        err = preserve_old(a);
        if (err)
            return err;
    }
    if (a->opt.fsync) {
        a->step = FF_STEP_SYNC;
        FF_SYSCALL(err, a->intr, ff_fdatasync(a->fd));
        if (err && err != EINVAL && err != ENOSYS)
            return err;
    }

    /* EINTR from close is not an error: Linux has released the fd already,
     * and retrying could close someone else's. */
    a->step = FF_STEP_CLOSE;
    err = close(a->fd) < 0 && errno != EINTR ? errno : 0;
    a->fd = -1;
    if (err)
        return err;
    /* A signal that came during the write (a disk write is not interrupted:
     * the handler is only pending) is handled now, while the target is
     * still the old one: an alarm handler that dies leaves it untouched. */
    interrupted(a->intr);

    /* the handlers that ran may have had the working directory held */
    if (dirfd == AT_FDCWD && a->opt.cwd_held)
        return publish_held(a);
    return publish_in(a, dirfd);
}

FF_HOT int ff_atomic_commit(struct ff_atomic *a)
{
    return commit_in(a, AT_FDCWD);
}

int ff_atomic_commit_held(struct ff_atomic *a)
{
    return commit_in(a, a->dirfd);
}

void ff_atomic_remove_temp(struct ff_atomic *a)
{
    int saved = errno, err;

    if (a->fd >= 0) {
        close(a->fd);
        a->fd = -1;
    }
    /* no callback: this runs while perl unwinds, or is about to, where no
     * handler may run; EINTR (FUSE, NFS) is still retried, bounded */
    if (a->created) {
        int dirfd = a->dirfd;

        if (ff_atomic_temp_ours(a, dirfd, a->temp) == 0)
            FF_SYSCALL(err, NULL, dirfd == AT_FDCWD ? unlink(a->temp) : unlinkat(dirfd, a->temp, 0));
    }
    a->created = 0;
    errno = saved;
}

FF_HOT void ff_atomic_discard(struct ff_atomic *a)
{
    int saved;

    /* a call that succeeded: nothing open, created or allocated */
    if (ff_atomic_holds_nothing(a)) {
        a->temp = a->target = NULL;
        a->target_lent = 0;
        return;
    }
    saved = errno;

    ff_atomic_remove_temp(a);
    release_step(a);
    if (a->temp != a->temp_buf)
        free(a->temp);
    if (!a->target_lent)
        free(a->target);
    free(a->acl);
    a->temp = a->target = a->acl = NULL;
    a->target_lent = 0;
    errno = saved;
}

void ff_atomic_forget(struct ff_atomic *a)
{
    a->created = 0;
}

void ff_atomic_close_cwd(struct ff_atomic *a)
{
    a->opt.cwd_held = 0;
    ff_close_read(a->dirfd);
    a->dirfd = AT_FDCWD;
}

int ff_atomic_pin_cwd(struct ff_atomic *a)
{
    int err;

    if (!a || !a->target || a->opt.cwd_held || a->target[0] == '/')
        return 0;
    err = take_cwd(a);
    return FF_OUT_OF_FDS(err) ? err : 0;
}

void ff_atomic_note_temp(struct ff_atomic *a, int dirfd, const char *name)
{
    struct stat st;
    int err, saved = errno;     /* a probe: a filesystem without handles is no error */

    if (!a->created || a->have_id)
        return;
    if (a->fd >= 0)
        FF_SYSCALL(err, NULL, fstat(a->fd, &st));
    else
        FF_SYSCALL(err, NULL, fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW));
    a->have_id = FF_ID_INODE;
    a->id_dev = err ? 0 : st.st_dev;
    a->id_ino = err ? 0 : st.st_ino;
    /* the handle where the filesystem gives one (else the inode number,
     * which a file made after the temp's removal may get again) */
    if (!err && a->fd >= 0)
        FF_SYSCALL(err, NULL, ff_file_handle_id(a->fd, "", AT_EMPTY_PATH, &a->id_mnt, &a->id_handle));
    else if (!err)
        FF_SYSCALL(err, NULL, ff_file_handle_id(dirfd, name, 0, &a->id_mnt, &a->id_handle));
    if (!err)
        a->have_id = FF_ID_HANDLE;
    errno = saved;
}

/* The verdict of a look at the temp's name that did not find our file:
 * err 0 (another file there) or an errno that says the name is no longer
 * it (none, a symlink, a file without a handle), ESTALE, "replaced or
 * removed"; any other errno (EIO, ENOMEM, EACCES of a directory) says
 * nothing about the file: that errno, "unable to check", never a pass. */
static int temp_not_ours(struct ff_atomic *a, int err)
{
    if (!err || err == ENOENT || err == ENOTDIR || err == ELOOP || err == ESTALE
        || err == EOPNOTSUPP || err == ENOTSUP || err == EOVERFLOW) {
        a->step = FF_STEP_TEMP_GONE;
        return ESTALE;
    }
    a->step = FF_STEP_TEMP_CHECK;
    return err;
}

/* ff_atomic_temp_ours; where the identity is the inode, *st is the
 * temp's stat (st_size -1 where it is its handle: not looked at). */
static int temp_ours_stat(struct ff_atomic *a, int dirfd, const char *name, struct stat *st)
{
    int err;

    st->st_size = -1;
    if (!a->have_id)
        return 0;
    if (a->have_id == FF_ID_HANDLE) {
        unsigned long long id = 0;
        int mnt = 0;

        FF_SYSCALL(err, NULL, ff_file_handle_id(dirfd, name, 0, &mnt, &id));
        if (!err && mnt == a->id_mnt && id == a->id_handle)
            return 0;
        /* another handle: on FUSE the same file may get one (a node id
         * given anew): there the device and inode decide (the only
         * syscalls this costs are where the handles differ) */
        if (err == ENOENT || ff_file_handle_lasts(dirfd, name))
            return temp_not_ours(a, err);
    }
    FF_SYSCALL(err, NULL, fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW));
    if (!err && a->id_ino && st->st_dev == a->id_dev && st->st_ino == a->id_ino)
        return 0;
    st->st_size = -1;
    return temp_not_ours(a, err);
}

FF_HOT int ff_atomic_temp_ours(struct ff_atomic *a, int dirfd, const char *name)
{
    struct stat st;

    return temp_ours_stat(a, dirfd, name, &st);
}

/* got[0..n), read from the temp at offset *pos, is what it must hold
 * there (a->data, then a->data_tail); *pos moves past it. */
static int holds_here(const struct ff_atomic *a, const char *got, size_t n, size_t *pos)
{
    size_t total = a->data_len + a->data_tail_len;

    if (n > total - *pos)
        return 0;
    while (n) {
        const char *want = *pos < a->data_len ? a->data + *pos
                                              : a->data_tail + (*pos - a->data_len);
        size_t run = *pos < a->data_len ? a->data_len - *pos : total - *pos;

        if (run > n)
            run = n;
        if (memcmp(got, want, run) != 0)
            return 0;
        got += run;
        n -= run;
        *pos += run;
    }
    return 1;
}

#define FF_VERIFY_CHUNK (256 * 1024)

static int temp_size_is(struct ff_atomic *a, int dirfd, const char *name, struct stat *st,
                        unsigned long long size);

/* The temp at name (checked to be ours just before) read back and
 * compared with what was written. No callback: nothing may run between
 * this and the rename. */
static int temp_holds(struct ff_atomic *a, int dirfd, const char *name, struct stat *st)
{
    unsigned reads = 0;         /* (ff_read_full counts them: not needed here) */
    size_t total = a->data_len + a->data_tail_len, pos = 0, cap, got;
    mode_t mode = a->data_preserve && a->have_old ? a->old.st_mode : a->opt.perm;
    char *buf;
    int fd, err, same = 1;

    FF_SYSCALL(err, NULL, fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    /* not readable: where the call made it so (perm 0200, a normal user),
     * its size is what can be checked; else code that ran took the read
     * bit away, and what it holds cannot be told */
    if ((err == EACCES || err == EPERM) && !(mode & S_IRUSR))
        return temp_size_is(a, dirfd, name, st, total);
    if (err) {
        if (err == ENOENT || err == ELOOP || err == ENOTDIR)
            return temp_not_ours(a, err);
        a->step = FF_STEP_TEMP_CHECK;
        return err;
    }
    cap = total < FF_VERIFY_CHUNK ? total + 1 : FF_VERIFY_CHUNK;   /* + 1: sees the end */
    buf = malloc(cap);
    err = buf ? 0 : ENOMEM;
    while (!err) {
        err = ff_read_full(fd, buf, cap, 0, &got, &reads, NULL);
        same = !err && holds_here(a, buf, got, &pos);
        if (!same || got < cap)
            break;
    }
    free(buf);
    ff_close_read(fd);
    if (err) {
        a->step = FF_STEP_TEMP_CHECK;
        return err;
    }
    if (same && pos == total)
        return 0;
    a->step = FF_STEP_TEMP_WRITTEN;
    return ESTALE;
}

/* The temp at name (ours; its stat in *st where that look had it) is
 * size bytes long. */
static int temp_size_is(struct ff_atomic *a, int dirfd, const char *name, struct stat *st,
                        unsigned long long size)
{
    int err = 0;

    if (st->st_size < 0)
        FF_SYSCALL(err, NULL, fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW));
    if (err)
        return temp_not_ours(a, err);
    if ((unsigned long long)st->st_size == size)
        return 0;
    a->step = FF_STEP_TEMP_WRITTEN;
    return ESTALE;
}

int ff_atomic_expect_fd_end(struct ff_atomic *a)
{
    off_t end;
    int err;

    FF_SYSCALL(err, a->intr, end = lseek(a->fd, 0, SEEK_CUR));
    if (err) {          /* no size to check: not published unchecked */
        a->step = FF_STEP_TEMP_CHECK;
        return err;
    }
    a->written_len = (unsigned long long)end;
    a->verify = FF_VERIFY_SIZE;
    return 0;
}

FF_HOT int ff_atomic_temp_publishable(struct ff_atomic *a, int dirfd, const char *name)
{
    struct stat st;
    int err, saved = errno;     /* a check passed leaves errno (a refused read back: EACCES) */

    if (!a->have_id)
        return 0;
    if ((err = temp_ours_stat(a, dirfd, name, &st)))
        return err;
    if (a->verify == FF_VERIFY_DATA)
        err = temp_holds(a, dirfd, name, &st);
    else if (a->verify == FF_VERIFY_SIZE)
        err = temp_size_is(a, dirfd, name, &st, a->written_len);
    if (!err)
        errno = saved;
    return err;
}

/* Where r->path is looked up. */
static inline int reread_at(const struct ff_reread *r)
{
    return r->at ? *r->at : AT_FDCWD;
}

/* Whether r->path is looked up in the working directory as it is now (a
 * relative name, no directory held): a handler's chdir would move it. */
static inline int follows_cwd(const struct ff_reread *r)
{
    return r->path[0] != '/' && reread_at(r) == AT_FDCWD;
}

/* Whether a reader of r->path should start over after err (from its open
 * when opening, else from a read or fstat of the fd it had open): a
 * writer replaced the file meanwhile. Only ESTALE and ENOENT can mean that:
 * a FUSE server that dropped the old node answers an OPEN or READ that was
 * on its way with one of them (pmxcfs with ENOENT, libfuse with hard_remove
 * ESTALE), and the kernel retries neither from the start of the path. An
 * ENOENT from open is also what a missing file gets: it is retried only
 * when a second lookup finds the name, so a missing file fails after that
 * one statx, at once. The lookup takes the attributes the kernel has
 * (AT_STATX_DONT_SYNC): in the window the kernel still holds the old
 * file's entry, and a GETATTR of it would get the server's ENOENT too.
 * Bounded by FF_REREAD_TRIES (ff_io.h): the first retry at once, then
 * after pauses that double from FF_REREAD_PAUSE_NS. Pending signal
 * handlers run before each retry and when a signal ends a pause early
 * (they may die: the caller's fd is closed by then). Nothing of this runs unless a call
 * failed. */
static int reread(struct ff_reread *r, int err, int opening, const struct ff_eintr *intr)
{
    struct timespec pause;
    struct stat cwd;
    mode_t type;
    long ns;
    int serr;

    if (err != ENOENT && err != ESTALE)
        return 0;
    if (err == ENOENT && opening) {
        FF_SYSCALL(serr, intr, ff_stat_type(reread_at(r), r->path, 0, &type));
        if (serr) {
            ff_poll_signals(intr);      /* (see below) */
            return 0;           /* no such name: the file is missing */
        }
    }
    /* a relative name is looked up again where it was first: a handler
     * that chdirs (below) ends the retries, the error standing, as the
     * reference's one open leaves it; never another directory's file */
    if (follows_cwd(r) && !r->tries) {
        if (stat(".", &cwd) < 0)
            return 0;
        r->cwd_dev = cwd.st_dev;
        r->cwd_ino = cwd.st_ino;
    }
    /* a signal that came during a failed call (a FUSE request is not
     * interrupted by it): its handler runs now, in the call (no fd is
     * open; it may die), not after the croak, where a die of it would
     * escape the caller's eval, nor after the pauses */
    ff_poll_signals(intr);
    if (r->tries >= FF_REREAD_TRIES)
        return 0;
    if (r->tries) {
        ns = FF_REREAD_PAUSE_NS << (r->tries - 1);
        pause.tv_sec = ns / 1000000000L;
        pause.tv_nsec = ns % 1000000000L;
        /* a signal ends the pause, its handlers run (they may die): only
         * a wait, not one to finish (EINTRs that keep coming, as strace
         * injects them, made it wait forever for the time left) */
        if (nanosleep(&pause, NULL) < 0 && errno == EINTR)
            ff_poll_signals(intr);
    }
    if (follows_cwd(r) && (stat(".", &cwd) < 0 || cwd.st_dev != r->cwd_dev || cwd.st_ino != r->cwd_ino))
        return 0;
    r->tries++;
    return 1;
}

int ff_open_read(struct ff_reread *r, int *fd, const struct ff_eintr *intr)
{
    int err;

    do
        FF_SYSCALL(err, intr, *fd = openat(reread_at(r), r->path, O_RDONLY | O_CLOEXEC));
    while (err && reread(r, err, 1, intr));
    return err;
}

int ff_read_again(struct ff_reread *r, int *fd, int err, const struct ff_eintr *intr)
{
    if (err != ENOENT && err != ESTALE)
        return 0;               /* (the usual error: nothing to decide) */
    ff_close_read(*fd);
    *fd = -1;
    if (!reread(r, err, 0, intr) || ff_open_read(r, fd, intr)) {
        *fd = -1;
        return 0;               /* err stands: the file is gone, or still failing */
    }
    return 1;
}

int ff_size_hint(int fd, size_t *size, const struct ff_eintr *intr)
{
    struct stat st;
    int err;

    FF_SYSCALL(err, intr, fstat(fd, &st));
    if (err)
        return err;
    *size = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 0;
    return 0;
}

int ff_read_some(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr)
{
    ssize_t n;
    int err;

    FF_SYSCALL(err, intr, n = read(fd, buf, len));
    *got = err ? 0 : (size_t)n;
    return err;
}

int ff_read_full(int fd, char *buf, size_t len, size_t eof_at, size_t *got, unsigned *reads,
                 const struct ff_eintr *intr)
{
    size_t total = 0;
    unsigned spins = 0;     /* FF_SYSCALL's count, for each read */
    int err = 0;

    /* ff_read_some's loop, inline: a reader's read is most of its
     * user-space work */
    while (total < len) {
        ssize_t n = read(fd, buf + total, len - total);

        if (n > 0) {
            /* a pipe's reads: many, none interrupted */
            if (total)
                ff_poll_signals(intr);
            total += (size_t)n;
            spins = 0;
            ++*reads;
            if (total == eof_at)
                break;      /* short (eof_at < len): the end fstat gave */
        } else if (n == 0) {
            break;
        } else if ((err = errno) != EINTR || !ff_retry_eintr(intr, &spins)) {
            break;
        } else {
            err = 0;
        }
    }
    *got = total;
    return err;
}

int ff_pread_full(int fd, char *buf, size_t len, off_t off, size_t eof_at, size_t *got,
                  unsigned *reads, const struct ff_eintr *intr)
{
    int err = 0;

    *got = 0;
    while (*got < len) {
        ssize_t n;

        FF_SYSCALL(err, intr, n = pread(fd, buf + *got, len - *got, off + (off_t)*got));
        if (err || n == 0)
            break;
        *got += (size_t)n;
        ++*reads;
        if (*got == eof_at)
            break;
        if (*got < len)
            ff_poll_signals(intr);
    }
    return err;
}

int ff_file_matches(int fd, off_t start, const char *buf, size_t len, int to_end, int *same,
                    const struct ff_eintr *intr)
{
    char *piece = malloc(FF_MATCH_PIECE);
    size_t done = 0;
    int err = 0;

    if (!piece)
        return ENOMEM;
    for (;;) {
        size_t left = len - done, want = left + (to_end ? 1 : 0), got;
        unsigned reads = 0;     /* (each piece is compared, however read) */

        if (want > FF_MATCH_PIECE)
            want = FF_MATCH_PIECE;
        if (want == 0) {
            *same = 1;  /* the prefix, all compared */
            break;
        }
        err = ff_pread_full(fd, piece, want, start + (off_t)done, left, &got, &reads, intr);
        *same = !err && got <= left && memcmp(piece, buf + done, got) == 0
                && (got == want || got == left);
        if (!*same || got < want || (!to_end && got == left))
            break;      /* it differs, it ended where buf does, or buf is done */
        done += got;
    }
    free(piece);
    return err;
}

int ff_fd_on_fuse(int fd)
{
    return ff_on_fuse(fd);
}

int ff_fd_rereadable(int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

void ff_close_read(int fd)
{
    int saved = errno;

    close(fd);
    errno = saved;
}

/* The pieces ff_batch.c shares (see ff_io.h). */

char *ff_dir_of(const char *path)
{
    return dir_of(path);
}

int ff_atomic_preserve(struct ff_atomic *a)
{
    return preserve_old(a);
}


unsigned ff_features(void)
{
    return FF_FEATURES;
}
