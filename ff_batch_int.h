/* ff_batch_int.h - private to the batch core (ff_batch*.c): what its files
 * share. ff_batch.c has the steps, ff_batch_group.c the names, grouping and
 * duplicates, ff_batch_cache.c the directory cache, ff_batch_barrier.c the
 * barrier's threads. */
#ifndef FF_BATCH_INT_H
#define FF_BATCH_INT_H

#include "ff_batch.h"
#include "ff_compat.h"

#include <errno.h>
#include <fcntl.h>

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

#define FF_NONE FF_BATCH_NONE

/* A directory is opened only to look names up in it: O_PATH needs no read
 * permission (a 0300 directory works, as with file_set_contents; the
 * portable build's fallback needs it, see ff_compat.h). */
#define FF_DIR_FLAGS (FF_O_PATH | O_DIRECTORY | O_CLOEXEC)

/* "cannot do that here" answers of the sync calls: not errors */
#define FF_CANNOT_SYNC(err) ((err) == EINVAL || (err) == ENOSYS || (err) == EOPNOTSUPP)

#define LEAF(f) ((f)->a.target + (f)->leaf)
#define TEMP_LEAF(f) ((f)->a.temp + (f)->leaf)
#define LEAF_LEN(f) ((f)->a.target_len - (f)->leaf)

/* ff_batch_group.c */

/* f's temp name: its target + suffix, room left for a random suffix; sets
 * f->leaf and f->dir_len. 0 or ENOMEM. */
int ff_batch_name_temp(struct ff_batch_file *f, const char *suffix, size_t suffix_len,
                       char **block, const char *block_end);
/* b->order and b->dirs: the files grouped by directory name, the
 * directories in name order (a parent before its subdirectories). */
int ff_batch_group_by_dir(struct ff_batch *b);
/* The seed of the name hashes (no syscall). */
uint64_t ff_batch_hash_seed(const struct ff_batch *b);
/* Sets need_id on the directories whose identity a duplicate needs. */
int ff_batch_mark_need_id(struct ff_batch *b);
/* Two names of one directory: one stands for both (same_as, files' dir). */
int ff_batch_merge_same_dirs(struct ff_batch *b);
/* A target given twice: EINVAL, dup_first and dup_second set. */
int ff_batch_find_duplicate(struct ff_batch *b);

/* ff_batch_cache.c */

/* The cache's and the window's sizes, from RLIMIT_NOFILE; 0 or ENOMEM. */
int ff_batch_make_cache(struct ff_batch *b);
/* Out of fds (EMFILE): close a cached directory other than dirs[keep];
 * 0 when there was none. */
int ff_batch_evict_one(struct ff_batch *b, size_t keep);
/* dirs[k]'s fd, opened into the cache if it is not there; ESTALE when
 * its name now leads to another directory. */
int ff_batch_open_dir(struct ff_batch *b, size_t k, const struct ff_eintr *intr);
/* The same; a directory in the cache costs no call (every file asks, a
 * batch in one directory always finds it there). */
static inline int ff_batch_dir_fd(struct ff_batch *b, size_t k, const struct ff_eintr *intr)
{
    return b->dirs[k].fd >= 0 ? 0 : ff_batch_open_dir(b, k, intr);
}

/* ff_batch_barrier.c */

/* threads of the barrier, at most, and the fewest temps worth a thread */
#define FF_SYNC_THREADS 16
#define FF_SYNC_PER_THREAD 4

/* The window's fdatasyncs split among nshares threads (the calling one
 * too); the first failure in window order is told (b->failed). */
int ff_batch_sync_window_threaded(struct ff_batch *b, size_t nshares);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
