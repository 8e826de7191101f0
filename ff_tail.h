/* ff_tail.h - file_read_last_line's reads, without perl: the last line of
 * an open file from one pread(2) of its last block, stepping back only for
 * a longer line. Defined in ff_tail.c. */
#ifndef FF_TAIL_H
#define FF_TAIL_H

#include <stddef.h>

#include "ff_io.h"

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* The first block read: the whole of most logs' last line, in one read. */
#define FF_TAIL_BLOCK (64 * 1024)

/* A buffer of at least cap bytes that holds what the old one held (the
 * caller owns the memory: perl's, freed with its scope), or NULL. */
typedef char *(*ff_tail_grow)(void *ctx, size_t cap);

enum ff_tail_step { FF_TAIL_SEEK, FF_TAIL_READ };

struct ff_tail {
    ff_tail_grow grow;
    void *ctx;
    char *buf;              /* the file's last len bytes (as read) */
    size_t len;
    size_t line;            /* the last line: buf[line .. line + line_len) */
    size_t line_len;
    enum ff_tail_step step; /* what failed */
};

/* The last line of fd, as the reference finds it: the end from
 * lseek(SEEK_END) (0: an empty line), one trailing newline ignored, the
 * bytes after the newline before it, or the whole file without one.
 * Returns 0, ENOMEM, or the errno of the step in t->step. */
int ff_read_last_line(int fd, struct ff_tail *t, const struct ff_eintr *intr);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
