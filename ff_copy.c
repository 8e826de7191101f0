/* ff_copy.c - file_copy's bytes from fd to fd (see ff_copy.h). */
/* our own feature macros, whatever perl's ccflags hold: copy_file_range is
 * a GNU extension */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ff_copy.h"
#include "ff_syscall.h"

#include <errno.h>
#include <unistd.h>

/* One copy_file_range asks for at most this much: the kernel caps a call
 * near 2 GiB anyway (MAX_RW_COUNT), and a smaller request lets pending
 * signal handlers run between chunks of a huge file. */
#define FF_COPY_CHUNK ((size_t)1 << 30)

int ff_copy_range(int in, int out, size_t limit, size_t eof_at, size_t *copied,
                  unsigned *reads, const struct ff_eintr *intr)
{
    size_t start = *copied;

    /* Into FUSE the kernel copies by splicing, one pipe's worth (64 KiB) a
     * WRITE request, where one write(2) makes a request per max_write
     * (128 KiB or more): pmxcfs stores the whole file again for each. */
    if (!FF_HAVE_COPY_FILE_RANGE || ff_on_fuse(out))
        return 0;
    while (*copied < limit) {
        size_t want = limit - *copied;
        ssize_t n;
        int err;

        if (want > FF_COPY_CHUNK)
            want = FF_COPY_CHUNK;
        FF_SYSCALL(err, intr, n = ff_copy_file_range(in, out, want));
        if (err)
            return 0;               /* refused: read and write take over */
        ++*reads;                   /* (0 too: see ff_copy_rw) */
        if (n == 0)
            return *copied > start; /* end of file, or nothing the kernel could see */
        *copied += (size_t)n;
        if (*copied == eof_at && (size_t)n < want)
            return 1;               /* short at fstat's size: the end */
        ff_poll_signals(intr);
    }
    return 1;
}

int ff_copy_rw(int in, int out, char *buf, size_t cap, size_t pending, size_t limit,
               size_t eof_at, size_t *copied, unsigned *reads, enum ff_copy_side *side,
               const struct ff_eintr *intr)
{
    int end = 0;

    for (;;) {
        size_t want = limit - *copied, got;
        int err;

        if (pending) {
            err = ff_write_all(out, buf, pending, intr);
            if (err) {
                *side = FF_COPY_WRITE;
                return err;
            }
            *copied += pending;
            pending = 0;
            want = limit - *copied;
        }
        if (want == 0 || end)
            return 0;
        if (want > cap)
            want = cap;
        err = ff_read_some(in, buf, want, &got, intr);
        if (err) {
            *side = FF_COPY_READ;
            return err;
        }
        ++*reads;           /* (a read of 0 too: another version may find the end) */
        if (got == 0)
            return 0;
        pending = got;
        end = got < want && *copied + got == eof_at;    /* short at fstat's size */
        ff_poll_signals(intr);      /* a pipe: many reads and writes, none interrupted */
    }
}

int ff_copy_restart(int out, const struct ff_eintr *intr)
{
    int err;

    FF_SYSCALL(err, intr, ftruncate(out, 0));
    if (!err && lseek(out, 0, SEEK_SET) < 0)
        err = errno;
    return err;
}

int ff_byte_at(int fd, size_t off, const struct ff_eintr *intr)
{
    char byte;
    ssize_t n;
    int err;

    FF_SYSCALL(err, intr, n = pread(fd, &byte, 1, (off_t)off));
    return !err && n == 1;
}
