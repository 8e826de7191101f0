/* ff_tempfile.c - tempfile's nameless file and create_owned_file_fh's
 * owned one (ff_tempfile.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* O_TMPFILE, memfd_create */
#endif

#include "ff_tempfile.h"
#include "ff_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#if FF_LINUX && defined(O_TMPFILE)
#define FF_HAVE_O_TMPFILE 1
#else
#define FF_HAVE_O_TMPFILE 0
#endif

/* memfd_create (only where O_TMPFILE is: its fallback): glibc 2.27
 * declares it; older C libraries reach the syscall */
#if FF_HAVE_O_TMPFILE && FF_GLIBC_AT_LEAST(2, 27)
#include <sys/mman.h>
#define ff_memfd_create(name) memfd_create(name, MFD_CLOEXEC)
#elif FF_HAVE_O_TMPFILE && defined(SYS_memfd_create)
#define ff_memfd_create(name) ((int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */))
#elif FF_HAVE_O_TMPFILE
static inline int ff_memfd_create(const char *name)
{
    (void)name;
    errno = ENOSYS;
    return -1;
}
#endif

/* The reference's fallback: <dir>/.tmpfile.<pid>, exclusive, unlinked at once.
 * The name is on the stack: a signal handler that dies in the open's EINTR
 * retry leaves this function by longjmp, and would leak a malloc'd one. */
static int open_named(const char *dir, int flags, mode_t perm, const int *at, int *fd,
                      const struct ff_eintr *intr)
{
    char path[PATH_MAX + sizeof("/.tmpfile.") + 3 * sizeof(long)];
    int err;

    if (strlen(dir) >= PATH_MAX)
        return ENAMETOOLONG;    /* as open(2) finds it */
    snprintf(path, sizeof path, "%s/.tmpfile.%ld", dir, (long)getpid());
    FF_SYSCALL(err, intr, *fd = openat(*at, path, flags | O_CREAT | O_EXCL, perm));
    if (!err)       /* as the reference: its result unchecked */
        (void)(*at == AT_FDCWD ? unlink(path) : unlinkat(*at, path, 0));
    return err;
}

int ff_tempfile_hold_cwd(const char *dir, int *at)
{
    int fd, err;

    if (dir[0] == '/')
        return 0;
    err = ff_open_cwd(&fd);
    if (!err)
        *at = fd;
    return err;
}

int ff_tempfile_open(const char *dir, int dir_given, int flags, int allow_links, mode_t perm,
                     const int *at, int *fd, const struct ff_eintr *intr)
{
#if FF_HAVE_O_TMPFILE
    int err;
#endif

    flags |= O_CLOEXEC | (allow_links ? 0 : O_EXCL);
#if FF_HAVE_O_TMPFILE
    FF_SYSCALL(err, intr, *fd = openat(*at, dir, flags | O_TMPFILE, perm));
    if (err != EOPNOTSUPP)
        return err;
    if (!dir_given) {
        /* nothing ever appears in a directory; the mode as the file would
         * have it (the umask aside: only /proc/<pid>/fd reaches it) */
        FF_SYSCALL(err, intr, *fd = ff_memfd_create("tempfile"));
        if (!err) {
            FF_SYSCALL(err, intr, fchmod(*fd, perm & 07777));
            if (err) {
                close(*fd);
                *fd = -1;
            }
            return err;
        }
        if (err != ENOSYS && err != EINVAL)     /* missing, or refused its flag */
            return err;
    }
#else
    (void)dir_given;
#endif
    return open_named(dir_given ? dir : "/tmp", flags, perm, at, fd, intr);
}

char *ff_owned_dir(const char *path, const char **name)
{
    size_t end = strlen(path), start, len;
    char *dir;

    while (end > 1 && path[end - 1] == '/')
        end--;                  /* trailing slashes are no level */
    start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    *name = path + start;
    if (start == end) {         /* all slashes: the root itself, named as given */
        *name = path;
        len = 1;
    } else if (start == 0) {
        path = ".";
        len = 1;
    } else {
        len = start;
        while (len > 1 && path[len - 1] == '/')
            len--;
    }
    dir = (char *)malloc(len + 1);
    if (dir) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

/* Removes name in the held directory at when it is still the file fd has
 * open; returns 0 or why not (ESTALE: another file has that name now, it
 * is left alone). No signal handler runs between the look and the unlink
 * (EINTR is retried without them). */
static int remove_own(int at, const char *name, int fd)
{
    struct stat mine, now;
    int err;

    FF_SYSCALL(err, NULL, fstat(fd, &mine));
    if (!err)
        FF_SYSCALL(err, NULL, fstatat(at, name, &now, AT_SYMLINK_NOFOLLOW));
    if (!err && (now.st_dev != mine.st_dev || now.st_ino != mine.st_ino))
        err = ESTALE;
    if (!err)
        FF_SYSCALL(err, NULL, unlinkat(at, name, 0));
    return err;
}

int ff_create_owned(const char *path, const char *dir, const char *name, uid_t uid, gid_t gid,
                    mode_t perm, int *at, int *fd, enum ff_step *step, int *unlink_err,
                    const struct ff_eintr *intr)
{
    int err, in, unheld = 0;

    *step = FF_STEP_OPEN;
    *unlink_err = 0;
    /* the kernel's verdict on the whole path, which the reference opens:
     * made in its directory, a path past PATH_MAX would be made too */
    if (strlen(path) >= PATH_MAX)
        return ENAMETOOLONG;
    /* the directory held: the file is made, looked at and removed in it,
     * whatever is renamed or swapped for a symlink on the path meanwhile */
    FF_SYSCALL(err, intr, *at = open(dir, FF_O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (FF_OUT_OF_FDS(err) || (err == EACCES && !FF_HAVE_O_PATH)) {
        /* a directory that cannot be held (no fd for it, or one we may
         * write but not read): the file by the path, as the reference
         * makes it, and nothing removed by it (unheld says why) */
        unheld = err;
        in = AT_FDCWD;
        name = path;
    } else if (err) {
        return err;
    } else {
        in = *at;
    }
    FF_SYSCALL(err, intr, *fd = openat(in, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, perm));
    if (FF_OUT_OF_FDS(err) && in != AT_FDCWD) {
        /* the directory took the last fd, which the reference's open
         * has: that one for the file, by the path, as above */
        close(*at);
        *at = -1;
        unheld = err;
        in = AT_FDCWD;
        name = path;
        FF_SYSCALL(err, intr, *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, perm));
    }
    if (err)
        return err;
    *step = FF_STEP_OWNER;
    FF_SYSCALL(err, intr, fchown(*fd, uid, gid));
    if (err) {
        /* the reference passes its handle to unlink, which removes nothing;
         * ours goes while its fd is still open, once seen to be it */
        *unlink_err = unheld ? unheld : remove_own(in, name, *fd);
        close(*fd);
        *fd = -1;
    } else if (*at >= 0 && *at < *fd && dup3(*fd, *at, O_CLOEXEC) == *at) {
        /* the file in the slot the directory took first, the lowest free
         * one, where the reference's open puts it (0 to 2 when free: perl
         * leaves such a handle inherited across exec, as $^F says); dup3
         * closed the directory */
        close(*fd);
        *fd = *at;
        *at = -1;
    }
    return err;
}
