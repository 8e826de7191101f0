/* ff_copy.h - file_copy's bytes, moved from one fd to another without perl:
 * by the kernel (copy_file_range) where it can, else read(2) and write(2)
 * of large blocks. Both continue from the fds' offsets, so one can take
 * over where the other stopped. Neither allocates: a die from a signal
 * handler (an ff_eintr callback) has nothing to leak.
 */
#ifndef FF_COPY_H
#define FF_COPY_H

#include <stddef.h>

#include "ff_io.h"

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* Which fd an error of ff_copy_rw came from. */
enum ff_copy_side { FF_COPY_READ, FF_COPY_WRITE };

/* Let the kernel copy from in to out until in's end of file or until
 * *copied reaches limit (bytes copied are added to *copied). 1 when done;
 * 0 when the kernel refused before that (any error: EXDEV, EINVAL,
 * EOPNOTSUPP, ENOSYS, also EIO or ENOSPC, which ff_copy_rw then meets and
 * reports on the side it came from), or copied nothing at all (procfs and
 * sysfs files may read as empty to it), or out is on FUSE (the kernel
 * would write it in 64 KiB requests): ff_copy_rw then goes on. Pending
 * signal handlers run on EINTR. eof_at (fstat's size of a regular file, or
 * 0): a copy that comes back short at that size is the end, with no call
 * that finds 0 after it (on FUSE, a request). *reads counts the calls,
 * the one that found the end too (see ff_read_full: what more than one
 * call brought may mix versions, a read of 0 may be a shorter one's). */
int ff_copy_range(int in, int out, size_t limit, size_t eof_at, size_t *copied,
                  unsigned *reads, const struct ff_eintr *intr);

/* Copy from in to out through buf (cap bytes), starting with the pending
 * bytes already in buf, until in's end of file or until *copied reaches
 * limit; each block is one read(2) and one write(2) (short writes and
 * EINTR retried); eof_at as ff_copy_range's. Returns 0 or an errno, *side
 * telling which fd failed. */
int ff_copy_rw(int in, int out, char *buf, size_t cap, size_t pending, size_t limit,
               size_t eof_at, size_t *copied, unsigned *reads, enum ff_copy_side *side,
               const struct ff_eintr *intr);

/* Empty out (truncate to 0, offset 0): a copy that starts over. 0 or the
 * errno. */
int ff_copy_restart(int out, const struct ff_eintr *intr);

/* 1 when fd holds a byte at offset off (one pread; fd's offset is left
 * as it is), 0 when it does not or cannot tell: fstat's size is only a
 * hint (sysfs says 4096 whatever a file holds), this byte is a fact. */
int ff_byte_at(int fd, size_t off, const struct ff_eintr *intr);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
