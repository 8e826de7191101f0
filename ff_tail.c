/* ff_tail.c - file_read_last_line's reads (ff_tail.h). The reference reads
 * 4 KiB blocks backwards, each with a seek and a read; here one pread(2) of
 * FF_TAIL_BLOCK bytes finds the last line of a log, and a longer line doubles
 * the block until it starts in it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memrchr */
#endif

#include "ff_tail.h"
#include "ff_io.h"
#include "ff_syscall.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>

/* The last '\n' in buf[0..len), or NULL (memrchr is a GNU extension). */
static const char *last_newline(const char *buf, size_t len)
{
#if defined(__GLIBC__)
    return (const char *)memrchr(buf, '\n', len);
#else
    while (len > 0)
        if (buf[--len] == '\n')
            return buf + len;
    return NULL;
#endif
}

/* The file's end now, as lseek(SEEK_END) says, or -1 (errno set). */
static off_t file_end(int fd)
{
    return lseek(fd, 0, SEEK_END);
}

/* ff_read_last_line's one try: *split when a block took more than one
 * pread that returned bytes */
static int last_line(int fd, struct ff_tail *t, int *split, const struct ff_eintr *intr)
{
    off_t end, off, buf_end;
    size_t want, scan_end;
    int joined, err;

    t->buf = NULL;
    t->step = FF_TAIL_SEEK;
    /* the end as the reference's sysseek finds it (EINVAL where the file
     * cannot seek to its end: /proc's generated files, some directories) */
    end = file_end(fd);
    if (end < 0)
        return errno;
again:
    t->len = t->line = t->line_len = 0;
    t->step = FF_TAIL_READ;
    off = buf_end = end;        /* buf_end: where the bytes in buf end */
    want = FF_TAIL_BLOCK;
    scan_end = 0;
    joined = 0;                 /* buf holds bytes of more than one read */
    while (off > 0) {
        size_t have = t->len, got;
        unsigned reads = 0;
        off_t from = off > (off_t)want ? off - (off_t)want : 0;
        size_t n = (size_t)(off - from);
        const char *nl;

        t->buf = t->grow(t->ctx, have + n);
        if (!t->buf)
            return ENOMEM;
        memmove(t->buf + n, t->buf, have);      /* the new bytes go before */
        err = ff_pread_full(fd, t->buf, n, from, 0, &got, &reads, intr);
        if (err)
            return err;
        if (reads > 1)
            *split = 1;
        if (got < n) {
            /* the file ends before the size the seek said (sysfs says 4096
             * whatever it holds; a file cut meanwhile): what was read is its
             * end, and nothing read after it counts */
            have = 0;
            n = got;
            buf_end = from + (off_t)got;
            if (got == 0) {
                /* cut before this block: none of the bytes read before is
                 * in it. Its end now is further back: start again from
                 * there, not one empty block a step (a 1 TiB file cut to
                 * 0: 16 million reads, no handler run meanwhile). Bounded:
                 * a file again shorter than a block read each time. */
                end = file_end(fd);
                if (end < 0) {
                    t->step = FF_TAIL_SEEK;
                    return errno;
                }
                ff_poll_signals(intr);
                if (end < from)
                    goto again;
                t->len = scan_end = 0;          /* grown back: step back */
                joined = 0;
                off = from;
                continue;
            }
        }
        joined = have > 0;
        t->len = have + n;
        if (!have) {
            /* the first bytes read hold the file's end: one newline there
             * is not where the last line starts */
            scan_end = n;
            if (t->buf[n - 1] == '\n')
                scan_end--;
            nl = last_newline(t->buf, scan_end);
        } else {
            scan_end += n;
            nl = last_newline(t->buf, n);       /* the bytes after had none */
        }
        if (nl) {
            t->line = (size_t)(nl - t->buf) + 1;
            t->line_len = scan_end - t->line;
            break;
        }
        off = from;
        want = t->len;                           /* doubling */
        ff_poll_signals(intr);
    }
    if (!t->line)
        t->line_len = scan_end;                  /* no newline: the whole file */
    if (joined) {
        /* the line was read in several blocks, the last first: a file cut
         * (and written again) meanwhile would join bytes it never held
         * together. Shorter now than the bytes read: read it again. */
        end = file_end(fd);
        if (end < 0) {
            t->step = FF_TAIL_SEEK;
            return errno;
        }
        if (end < buf_end) {
            ff_poll_signals(intr);
            goto again;
        }
    }
    return 0;
}

int ff_read_last_line(int fd, struct ff_tail *t, const struct ff_eintr *intr)
{
    int tries, split, err;

    for (tries = 1;; tries++) {
        split = 0;
        err = last_line(fd, t, &split, intr);
        /* a block that took more than one pread on FUSE (pmxcfs): a short
         * one, and the rest from the version that replaced the file
         * meanwhile: read it again, FF_TORN_TRIES times at most */
        if (err || !split || !ff_fd_on_fuse(fd) || !ff_fd_rereadable(fd))
            return err;
        if (tries == FF_TORN_TRIES) {
            t->step = FF_TAIL_READ;
            return EAGAIN;
        }
    }
}
