/* ff_batch.h - many atomic replacements with one durability barrier, the
 * perl-free core of file_set_contents_many.
 *
 * In this order: every target and every directory is looked at (a
 * directory target, a duplicate, a missing directory without mkdir are
 * errors here) and nothing is changed yet; then missing directories are
 * made (mkdir), every temp is created and written in full and, with fsync,
 * one barrier covers their data (per window of open temps); then the
 * renames, in the caller's order, and with fsync each directory is fsynced
 * once. Until the first rename nothing but temps and new directories has
 * been made, and an error removes them all.
 *
 * File descriptors are bounded whatever the number of files and
 * directories: directories are opened O_PATH (no read permission needed)
 * into a small cache, temps are open only while written (with fsync, a
 * window of them until their barrier); both sizes derive from
 * RLIMIT_NOFILE. A directory reopened after it left the cache must still be
 * the one first opened (device and inode), or the batch fails.
 */
#ifndef FF_BATCH_H
#define FF_BATCH_H

#include "ff_io.h"

#include <stdint.h>

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* Upper bounds of the fds a batch keeps: temps open for one barrier, and
 * directories in its cache. Both are lowered to fit RLIMIT_NOFILE (half of
 * it for the batch, at least one of each). A directory that falls out of
 * the cache costs an open and an fstat each time it is needed again. */
#define FF_BATCH_OPEN_MAX 256
#define FF_BATCH_DIRS_MAX 65536

#define FF_BATCH_NONE ((size_t)-1)

struct ff_batch_file {
    struct ff_atomic a;     /* target, temp (full paths: messages), fd */
    const char *buf;        /* the bytes to write */
    size_t len;
    size_t dir;             /* index of its directory in dirs (after
                             * de-duplication: the one that stands for it) */
    size_t leaf;            /* where the last component starts, in a.target
                             * and a.temp alike (temp = target + suffix) */
    size_t dir_len;         /* the directory part: a.target[0..dir_len), 0 for "." */
    int unchanged;          /* if_changed: the target already holds buf */
    int temp_is_target;     /* its plain temp name is another pair's target
                             * (in the same directory): a random one is taken */
    int existed;            /* the look found the target (not a directory) */
};

/* What failed on a directory (b->failed_dir): the glue words it. */
enum ff_dir_step {
    FF_DIR_NONE,
    FF_DIR_OPEN,            /* open (O_PATH) or fstat */
    FF_DIR_CHANGED,         /* reopened, it is another directory now (ESTALE) */
    FF_DIR_MKDIR,           /* mkdir: path is the level that failed */
    FF_DIR_SYNC             /* fsync of it, or of the parent of one made */
};

struct ff_batch_dir {
    char *path;             /* as derived from a target: the key */
    int fd;                 /* O_PATH, while in the cache; else -1 */
    size_t same_as;         /* the dirs index that stands for it (itself, or
                             * one that is the same directory by another name) */
    dev_t dev;
    ino_t ino;
    unsigned statted : 1;   /* dev, ino known: a reopen must find them again */
    unsigned need_id : 1;   /* fstat it when opened: a target of it could be
                             * one of another directory name (same leaf), or
                             * fsync merges its syncs */
    unsigned missing : 1;   /* mkdir: it did not exist */
    unsigned renamed_into : 1; /* with fsync: this directory needs its fsync */
    size_t first, count;    /* its files: order[first .. first + count) */
};

/* A directory the mkdir option created: removed again if the batch fails;
 * with fsync, its parent is synced too, or the new directory (and all in
 * it) could vanish in a crash. */
struct ff_batch_made {
    char *path;             /* the directory that was missing; unless
                             * complete, the level whose mkdir failed (or
                             * was interrupted): only the levels above it
                             * were made */
    int complete;           /* every level of path exists */
    size_t dir;             /* dirs index (messages) */
    int levels;             /* how many levels were made: the last ones of
                             * path, or, cut short, the ones above it */
};

struct ff_batch {
    struct ff_options opt;
    struct ff_atomic file_template; /* what each file's a starts as: opt
                             * without preserve and if_changed (the batch
                             * looks at targets itself), no target yet */
    size_t names_len;       /* the targets' lengths, summed */
    const struct ff_eintr *intr;
    const volatile int *pending;    /* intr's, or a constant 0 */
    /* intr of the renames and directory syncs: it runs the pending
     * handlers (a storm of signals must not fail the batch, and perl
     * dies once 120 caught signals wait) but may not leave them half done:
     * it returns even when a handler dies (the glue throws that die once
     * the call is done). NULL: no callback there, EINTR bounded as if no
     * signal came. */
    const struct ff_eintr *renaming;
    struct ff_batch_file *files;
    size_t n;               /* files[0..n) were added */
    char *temp_block;       /* the temps' names, one allocation (a name that
                             * does not fit, after symlinks, has its own) */
    size_t cap;
    size_t *order;          /* file indices grouped by directory */
    struct ff_batch_dir *dirs;
    size_t ndirs;
    size_t *cache;          /* dirs indices whose fd is open, or NONE: the
                             * all but an eighth (at least 4, or half)
                             * pinned once filled, the rest a FIFO */
    size_t cache_cap, cache_fill, cache_next;
    size_t *window;         /* with fsync: files whose temps wait for the barrier */
    size_t window_cap, window_n;
    struct ff_batch_made *made;
    size_t nmade;
    int sync_fd;            /* a directory fd while it is fsynced, or -1 */
    int cwd_fd;             /* where relative names are taken from once user
                             * code has run (it may chdir): the working
                             * directory before it first ran; else AT_FDCWD */
    size_t failed;          /* the file whose step failed: files[failed].a.step */
    size_t failed_dir;      /* or the directory that failed (dir_step) */
    enum ff_dir_step dir_step;
    char *failed_path;      /* mkdir: the level that failed (else NULL) */
    size_t renamed;         /* after a rename failed: files[0..renamed) are
                             * replaced (those not unchanged) */
    size_t dup_first, dup_second; /* a target given twice (else NONE) */
    size_t written;         /* files written (not unchanged) on success */
    uint64_t seed;          /* of the name hashes: no list of names can be
                             * made to collide in advance. The caller may set
                             * it after init (the glue: perl's own hash
                             * secret); 0: commit takes one without a syscall */
    size_t suffix_len;      /* strlen(".tmp.<pid>"): every temp's plain
                             * name is its target and that */
    long pid;               /* the process whose temps these are */
    size_t unnoted;         /* temps made whose identity is not noted yet */
    size_t note_from;       /* order[] index: those before it are noted */
    unsigned long user_code_runs; /* times ff_batch_note_temps ran */
    int done;               /* committed: the directories made stay */
    int forgotten;          /* a forked child's copy: touch nothing */
    const char *tail;       /* bytes appended to every file ($\), else "" */
    size_t tail_len;
};

/* Room for up to n files; nothing is touched yet. Returns 0 or ENOMEM. */
int ff_batch_init(struct ff_batch *b, size_t n, const struct ff_options *opt,
                  const struct ff_eintr *intr);

/* Add a file: path must stay valid until the batch is discarded (it is
 * not copied), buf[0..len) until commit returns. Returns 0 or ENOMEM. */
int ff_batch_add(struct ff_batch *b, const char *path, const char *buf, size_t len);
/* The same, path_len being strlen(path). */
int ff_batch_add_len(struct ff_batch *b, const char *path, size_t path_len, const char *buf,
                     size_t len);

/* Everything, in the order described above; temps are named
 * "<target>.tmp.<pid>" (a random suffix added where that name is taken, or
 * is another pair's target). Returns 0 or an errno: then b->failed and that
 * file's a.step say where, or b->failed_dir and b->dir_step, or
 * dup_first/dup_second name a target given twice (EINVAL); b->renamed
 * tells how far the renames got. From the first rename to the return,
 * EINTR is retried with b->renaming, not intr: the renames (and with fsync
 * the directory syncs) are never cut short by a handler. */
int ff_batch_commit(struct ff_batch *b, long pid);

/* Close and unlink whatever is still ours (relative to the directory fds),
 * remove the directories made if the batch did not complete, free
 * everything; keeps errno, runs no intr callback. Safe to call more than
 * once. */
void ff_batch_discard(struct ff_batch *b);

/* 1 while discard would remove something: a temp, or (the batch not
 * done) a directory it made. */
int ff_batch_has_work(const struct ff_batch *b);

/* Before user code may run (signal handlers, a croak's $SIG{__DIE__}):
 * the identity of every temp made since the last call is noted (an fstat
 * each, none when there is no new temp), so that the renames and the
 * cleanup touch only the files this batch made (ff_atomic_note_temp). No
 * intr callback runs. */
void ff_batch_note_temps(struct ff_batch *b);
/* (It also holds the working directory open, for relative names.) */

/* The temps still ours closed and removed (as discard does), nothing
 * freed: before the glue croaks. Keeps errno, runs no intr callback. */
void ff_batch_remove_temps(struct ff_batch *b);

/* A forked child (a signal handler that forked, unwinding its copy of the
 * parent's cleanup) calls this before ff_batch_discard: the temps and new
 * directories are the parent's, so they are only closed, never removed. */
void ff_batch_forget(struct ff_batch *b);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
