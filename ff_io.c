/* ff_io.c - the syscalls of FastFile, in one place, without perl.
 *
 * The write path is open + write + close + rename: nothing else is needed to
 * replace a file atomically, so nothing else is done (no fstat, lseek, fcntl).
 */
#include "ff_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

#define FF_OPEN_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC)

static void interrupted(const struct ff_eintr *intr)
{
    if (intr && intr->fn)
        intr->fn(intr->ctx);
}

static int open_excl(const char *path, mode_t mode, const struct ff_eintr *intr, int *fd)
{
    for (;;) {
        *fd = open(path, FF_OPEN_FLAGS, mode);
        if (*fd >= 0)
            return 0;
        if (errno != EINTR)
            return errno;
        interrupted(intr);
    }
}

/* 64 random bits for a temp suffix; only needed after a name collision, so
 * the extra syscall is off the normal path. */
static unsigned long long random_bits(void)
{
    unsigned long long r;
    struct timespec ts;

    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec
           ^ (unsigned long long)(size_t)&r;
}

int ff_temp_create(struct ff_tempfile *tf, mode_t mode, const struct ff_eintr *intr)
{
    size_t base_len = strlen(tf->path);
    int err = open_excl(tf->path, mode, intr, &tf->fd);
    int tries;

    /* The plain name may belong to another live writer (same PID on another
     * cluster node): never touch it, pick a fresh name instead. */
    for (tries = 0; err == EEXIST && tries < FF_TEMP_TRIES; tries++) {
        snprintf(tf->path + base_len, FF_TEMP_SUFFIX_MAX, ".%016llx", random_bits());
        err = open_excl(tf->path, mode, intr, &tf->fd);
    }
    if (err == 0)
        tf->created = 1;
    return err;
}

int ff_write_all(int fd, const char *buf, size_t len, const struct ff_eintr *intr)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return ENOSPC;
        } else if (errno == EINTR) {
            interrupted(intr);
        } else {
            return errno;
        }
    }
    return 0;
}

int ff_temp_close(struct ff_tempfile *tf)
{
    int rc = close(tf->fd);

    tf->fd = -1;
    if (rc < 0 && errno != EINTR)
        return errno;
    return 0;
}

int ff_temp_commit(struct ff_tempfile *tf, const char *target, const struct ff_eintr *intr)
{
    while (rename(tf->path, target) < 0) {
        if (errno != EINTR)
            return errno;
        interrupted(intr);
    }
    tf->created = 0;
    return 0;
}

void ff_temp_discard(struct ff_tempfile *tf)
{
    int saved = errno;

    if (tf->fd >= 0) {
        close(tf->fd);
        tf->fd = -1;
    }
    if (tf->created) {
        unlink(tf->path);
        tf->created = 0;
    }
    errno = saved;
}

int ff_open_read(const char *path, int *fd, const struct ff_eintr *intr)
{
    for (;;) {
        *fd = open(path, O_RDONLY | O_CLOEXEC);
        if (*fd >= 0)
            return 0;
        if (errno != EINTR)
            return errno;
        interrupted(intr);
    }
}

int ff_size_hint(int fd, size_t *size)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return errno;
    *size = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 0;
    return 0;
}

int ff_read_some(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr)
{
    for (;;) {
        ssize_t n = read(fd, buf, len);
        if (n >= 0) {
            *got = (size_t)n;
            return 0;
        }
        if (errno != EINTR)
            return errno;
        interrupted(intr);
    }
}

int ff_read_full(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr)
{
    *got = 0;
    while (*got < len) {
        size_t n;
        int err = ff_read_some(fd, buf + *got, len - *got, &n, intr);
        if (err)
            return err;
        if (n == 0)
            break;
        *got += n;
    }
    return 0;
}

void ff_close_read(int fd)
{
    int saved = errno;

    close(fd);
    errno = saved;
}
