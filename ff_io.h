/* ff_io.h - the perl-free I/O core of FastFile.
 *
 * Every function returns 0 on success or an errno value on failure and never
 * leaves a resource behind that its caller does not know about: the caller
 * (the XS glue) owns the fd and the temp path through struct ff_tempfile and
 * cleans them up on every path, including a die from a signal handler that
 * runs inside ff_on_eintr.
 */
#ifndef FF_IO_H
#define FF_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Called when a syscall returned EINTR, before it is retried. It may not
 * return (a perl signal handler that dies unwinds through it). */
typedef void (*ff_on_eintr)(void *ctx);

struct ff_eintr {
    ff_on_eintr fn;
    void *ctx;
};

/* A temp file being written; `path` is owned by the caller. */
struct ff_tempfile {
    int fd;       /* -1 once closed */
    int created;  /* 1 while the file at `path` is ours and must be removed on failure */
    char *path;   /* NUL-terminated; room for FF_TEMP_SUFFIX_MAX more bytes */
};

/* Bytes a temp path buffer needs beyond its base name for the random suffix. */
#define FF_TEMP_SUFFIX_MAX 18   /* "." + 16 hex digits + NUL */

/* How many random names are tried after the plain name exists. */
#define FF_TEMP_TRIES 16

/* Create tf->path with O_EXCL; if it exists, append ".<random>" and retry.
 * Never removes or opens a file it did not create. */
int ff_temp_create(struct ff_tempfile *tf, mode_t mode, const struct ff_eintr *intr);

/* write(2) all of buf, retrying short writes and EINTR. A write that
 * returns 0 is reported as ENOSPC. */
int ff_write_all(int fd, const char *buf, size_t len, const struct ff_eintr *intr);

/* close(2) tf->fd and mark it closed; EINTR is not an error (Linux has
 * released the fd already, retrying could close someone else's). */
int ff_temp_close(struct ff_tempfile *tf);

/* rename(2) the temp over target; on success the temp is no longer ours. */
int ff_temp_commit(struct ff_tempfile *tf, const char *target, const struct ff_eintr *intr);

/* Close and unlink whatever of tf is still ours; keeps errno. */
void ff_temp_discard(struct ff_tempfile *tf);

/* Reading. */

/* open(2) read-only, EINTR retried. */
int ff_open_read(const char *path, int *fd, const struct ff_eintr *intr);

/* The size fstat(2) reports when it can be trusted as a first guess (a
 * regular file), else 0: /proc, pipes and the like say nothing useful. */
int ff_size_hint(int fd, size_t *size);

/* One read(2) of up to len bytes, EINTR retried; *got is 0 at end of file. */
int ff_read_some(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr);

/* read(2) until len bytes are in or end of file; *got < len means EOF. */
int ff_read_full(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr);

/* close(2) an fd that was only read; its result cannot mean lost data. */
void ff_close_read(int fd);

#endif
