/* ff_batch.h - many atomic replacements with one durability barrier, the
 * perl-free core of file_set_contents_many.
 *
 * In this order: every target is looked at (a directory, a duplicate, a
 * missing directory are errors here), every temp is created and written
 * in full; with fsync, one barrier covers all their data; then the renames,
 * in the caller's order, relative to one fd per directory; with fsync,
 * each directory is fsynced once. Until the first rename nothing but
 * temps has been touched, and an error removes them all.
 */
#ifndef FF_BATCH_H
#define FF_BATCH_H

#include "ff_io.h"

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* With fsync, at most this many temps are open at once: the barrier runs
 * over each group of this many (a huge batch does not run out of fds). */
#define FF_BATCH_OPEN_MAX 256

struct ff_batch_file {
    struct ff_atomic a;     /* target, temp (full paths: messages, discard), fd */
    const char *buf;        /* the bytes to write */
    size_t len;
    size_t dir;             /* index of its directory in dirs */
    size_t leaf;            /* where the last component starts, in a.target
                             * and a.temp alike (temp = target + suffix) */
    int unchanged;          /* if_changed: the target already holds buf */
};

struct ff_batch_dir {
    char *path;             /* as derived from a target: the key */
    int fd;                 /* -1 once closed, or when same_as is another */
    size_t same_as;         /* the dirs index that holds the fd (itself, or one
                             * that is the same directory under another name) */
    dev_t dev;
    ino_t ino;
    int statted;
    int renamed_into;       /* with fsync: this directory needs its fsync */
    size_t last_file;       /* the last file renamed into it (for messages) */
};

/* A directory the mkdir option created: with fsync, its parent is synced
 * too, or the new directory (and all in it) could vanish in a crash. */
struct ff_batch_made {
    char *path;             /* a directory that was missing */
    int levels;             /* how many of its last levels were made */
    size_t file;            /* the file that needed it (for messages) */
};

struct ff_batch {
    struct ff_options opt;
    const struct ff_eintr *intr;
    struct ff_batch_file *files;
    size_t n;               /* files[0..n) were added */
    size_t cap;
    struct ff_batch_dir *dirs;
    size_t ndirs;
    struct ff_batch_made *made;
    size_t nmade;
    int sync_fd;            /* a made directory's parent while it is synced, or -1 */
    size_t failed;          /* the file whose step failed: files[failed].a.step */
    size_t renamed;         /* after a rename failed: files[0..renamed) are
                             * replaced (those not unchanged) */
    size_t dup_first, dup_second; /* a target given twice (else (size_t)-1) */
    size_t written;         /* files written (not unchanged) on success */
    long pid;               /* the process whose temps these are */
    const char *tail;       /* bytes appended to every file ($\), else "" */
    size_t tail_len;
};

/* Room for up to n files; nothing is touched yet. Returns 0 or ENOMEM. */
int ff_batch_init(struct ff_batch *b, size_t n, const struct ff_options *opt,
                  const struct ff_eintr *intr);

/* Add a file: path is copied, buf[0..len) must stay valid until commit
 * returns. Returns 0 or ENOMEM. */
int ff_batch_add(struct ff_batch *b, const char *path, const char *buf, size_t len);

/* Everything, in the order described above; temps are named
 * "<target>.tmp.<pid>". Returns 0 or an errno: then b->failed and that
 * file's a.step say where, or dup_first/dup_second name a target given
 * twice (EINVAL); b->renamed tells how far the renames got. */
int ff_batch_commit(struct ff_batch *b, long pid);

/* Close and unlink whatever is still ours, free everything; keeps errno.
 * Safe to call more than once. */
void ff_batch_discard(struct ff_batch *b);

/* 1 while b has a temp file it would remove. */
int ff_batch_has_temps(const struct ff_batch *b);

/* A forked child (a signal handler that forked, unwinding its copy of the
 * parent's cleanup) calls this before ff_batch_discard: the temps are the
 * parent's, so they are only closed, never removed. */
void ff_batch_forget(struct ff_batch *b);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
