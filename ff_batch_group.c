/* ff_batch_group.c - file_set_contents_many's names: each temp named, the
 * files grouped by directory name, directories told apart by device and
 * inode, targets given twice found.
 *
 * Directories are grouped by name with one sort of the runs of files that
 * share one (a batch in one directory sorts nothing), told apart by device
 * and inode with one sort of the directories, and targets given twice are
 * found with a hash: nothing compares every pair.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* O_PATH (ff_compat.h) */
#endif
#include "ff_batch_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The temp's name: "<target>" + suffix (".tmp.<pid>", made once per
 * batch), room left for a random suffix; where the leaf starts, and the
 * length of the directory part as ff_dir_of cuts it (0: "."). */
int ff_batch_name_temp(struct ff_batch_file *f, const char *suffix, size_t suffix_len,
                       char **block, const char *block_end)
{
    const char *t = f->a.target, *slash = strrchr(t, '/');
    size_t len = f->a.target_len, need = len + suffix_len + FF_TEMP_SUFFIX_MAX;

    f->leaf = slash ? (size_t)(slash + 1 - t) : 0;
    if (slash) {
        while (slash > t && slash[-1] == '/')
            slash--;
        f->dir_len = slash == t ? 1 : (size_t)(slash - t);     /* "/x": "/" */
    }
    if (*block && (size_t)(block_end - *block) >= need) {
        /* a slot of the batch's block: discard leaves it (temp_buf) */
        f->a.temp = f->a.temp_buf = *block;
        *block += need;
    } else if (!(f->a.temp = malloc(need))) {
        return ENOMEM;
    }
    memcpy(f->a.temp, t, len);
    memcpy(f->a.temp + len, suffix, suffix_len + 1);
    return 0;
}

static int same_dir_name(const struct ff_batch_file *x, const struct ff_batch_file *y)
{
    return x->dir_len == y->dir_len && memcmp(x->a.target, y->a.target, x->dir_len) == 0;
}

static int cmp_dir_name(const struct ff_batch_file *x, const struct ff_batch_file *y)
{
    size_t n = x->dir_len < y->dir_len ? x->dir_len : y->dir_len;
    int c = memcmp(x->a.target, y->a.target, n);
    return c ? c : (x->dir_len > y->dir_len) - (x->dir_len < y->dir_len);
}

/* files[start .. start + len): consecutive files in one directory (qsort has
 * no context argument: each run carries the files) */
struct ff_run { const struct ff_batch_file *files; size_t start, len; };

static int cmp_run(const void *x, const void *y)
{
    const struct ff_run *p = x, *q = y;
    int c = cmp_dir_name(&p->files[p->start], &q->files[q->start]);
    return c ? c : (p->start > q->start) - (p->start < q->start);
}

/* b->order: the files grouped by directory name; b->dirs: one per name,
 * in name order (a parent before its subdirectories: mkdir relies on it). */
int ff_batch_group_by_dir(struct ff_batch *b)
{
    struct ff_run *runs;
    size_t nruns = 0, i, j, k;

    if (!(b->order = malloc(b->n * sizeof *b->order)) || !(runs = malloc(b->n * sizeof *runs)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        if (i == 0 || !same_dir_name(&b->files[i - 1], &b->files[i])) {
            runs[nruns].files = b->files;
            runs[nruns].start = i;
            runs[nruns++].len = 0;
        }
        runs[nruns - 1].len++;
    }
    if (nruns > 1)
        qsort(runs, nruns, sizeof *runs, cmp_run);
    if (!(b->dirs = calloc(nruns, sizeof *b->dirs))) {
        free(runs);
        return ENOMEM;
    }
    for (i = j = 0; i < nruns; i++) {
        const struct ff_batch_file *first = &b->files[runs[i].start];
        struct ff_batch_dir *d = &b->dirs[b->ndirs];

        if (i == 0 || !same_dir_name(&b->files[runs[i - 1].start], first)) {
            size_t len = first->dir_len ? first->dir_len : 1;
            d->fd = -1;
            d->same_as = b->ndirs;
            d->first = j;
            if (!(d->path = malloc(len + 1))) {
                free(runs);
                return ENOMEM;
            }
            memcpy(d->path, first->dir_len ? first->a.target : ".", len);
            d->path[len] = '\0';
            b->ndirs++;
        }
        d = &b->dirs[b->ndirs - 1];
        for (k = runs[i].start; k < runs[i].start + runs[i].len; k++) {
            b->order[j++] = k;
            b->files[k].dir = b->ndirs - 1;
            d->count++;
        }
    }
    free(runs);
    return 0;
}

/* ASCII letters folded to lower case: how a directory that folds case
 * (ext4 or tmpfs casefold, vfat, cifs) may see a name. Not the locale's
 * tolower: a name is bytes. */
static unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* 1 when two leaves are one name where case folds */
static int same_folded(const char *x, const char *y)
{
    while (*x && fold((unsigned char)*x) == fold((unsigned char)*y))
        x++, y++;
    return fold((unsigned char)*x) == fold((unsigned char)*y);
}

/* 1 when leaf (NUL-terminated) is the n bytes at x, where case folds */
static int same_folded_n(const char *leaf, const char *x, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (!leaf[i] || fold((unsigned char)leaf[i]) != fold((unsigned char)x[i]))
            return 0;
    return leaf[n] == '\0';
}

/* FNV-1a of a leaf's n bytes from the batch's random seed (and a
 * directory index: NONE for the leaf alone), case folded (a leaf and its
 * case variants probe one chain; a table that holds them all takes the
 * exact bytes instead, see find_duplicate). Finished by a mix: the low bits
 * of FNV's state, the slot, see only the low bits of the bytes and seed. */
static uint64_t name_hash(const struct ff_batch *b, size_t dir, const char *leaf, size_t n, int folded)
{
    const unsigned char *p = (const unsigned char *)leaf, *end = p + n;
    uint64_t h = (1469598103934665603ULL ^ b->seed) ^ (uint64_t)dir * 0x9e3779b97f4a7c15ULL;

    if (folded)
        while (p < end)
            h = (h ^ fold(*p++)) * 1099511628211ULL;
    else
        while (p < end)
            h = (h ^ *p++) * 1099511628211ULL;
    h ^= h >> 32;               /* (murmur3's finalizer) */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 29;
    return h;
}
#define leaf_hash_n(b, dir, leaf, n) name_hash(b, dir, leaf, n, 1)
#define leaf_hash(b, dir, leaf) name_hash(b, dir, leaf, strlen(leaf), 1)

/* The name hashes' seed, without a syscall (getrandom would be one more
 * per batch): the vDSO clock and the randomized stack address. Enough that
 * no list of names collides in every run. */
uint64_t ff_batch_hash_seed(const struct ff_batch *b)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_nsec << 24) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts
           ^ (uint64_t)(uintptr_t)b->files;
}

/* A slot of the name tables: a file index + 1 (0: empty). 32 bits (a
 * batch has fewer files, ff_batch_init): half the table to zero. */
typedef uint32_t ff_slot;

/* A slot table for n file indices, its mask */
static ff_slot *make_slots(size_t n, size_t *mask)
{
    size_t size = 16;

    while (size < 2 * n)
        size *= 2;
    *mask = size - 1;
    return calloc(size, sizeof(ff_slot));
}

/* The first file whose target leaf is leaf, or is where case folds (slots:
 * a table of target leaves, by leaf_hash(b, dir, ...), dir NONE for the
 * leaf alone; same directory too unless dir is NONE), or NONE. Folded: a
 * temp "x.tmp.<pid>" beside a target "X.TMP.<pid>" is that target on a
 * directory that folds case, where the first pair's rename would replace
 * the other's temp (the temp then takes a random name: harmless where
 * case counts). */
static size_t find_leaf(const struct ff_batch *b, const ff_slot *slots, size_t mask, size_t dir,
                        const char *leaf)
{
    size_t s;

    for (s = (size_t)leaf_hash(b, dir, leaf) & mask; slots[s]; s = (s + 1) & mask) {
        const struct ff_batch_file *g = &b->files[slots[s] - 1];
        if ((dir == FF_NONE || g->dir == dir) && same_folded(LEAF(g), leaf))
            return slots[s] - 1;
    }
    return FF_NONE;
}

/* Which directories need their device and inode: only two names of one
 * directory holding the same leaf make a duplicate, or a temp that is
 * another pair's target (a leaf "x" here, "x.tmp.<pid>" there), so only
 * directories that share such a leaf with another directory name are
 * fstatted (with fsync, all: one fsync per directory). The same where case
 * folds ("D/x" and "d/X" are one file on a directory that folds case: one
 * directory, told apart when their temps meet). A batch whose leaves
 * differ, or in one directory, costs no fstat. */
int ff_batch_mark_need_id(struct ff_batch *b)
{
    size_t mask, i, s;
    ff_slot *slots;

    if (b->ndirs < 2)
        return 0;
    if (b->opt.fsync) {
        for (i = 0; i < b->ndirs; i++)
            b->dirs[i].need_id = 1;
        return 0;
    }
    if (!(slots = make_slots(b->n, &mask)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];

        /* a leaf is stored once: many files of one leaf do not make a long
         * probe, each stops at the first */
        for (s = (size_t)leaf_hash_n(b, FF_NONE, LEAF(f), LEAF_LEN(f)) & mask; slots[s]; s = (s + 1) & mask) {
            const struct ff_batch_file *g = &b->files[slots[s] - 1];
            if (same_folded(LEAF(g), LEAF(f)))
                break;
        }
        if (!slots[s]) {
            slots[s] = (ff_slot)(i + 1);
        } else if (b->files[slots[s] - 1].dir != f->dir) {
            b->dirs[b->files[slots[s] - 1].dir].need_id = 1;
            b->dirs[f->dir].need_id = 1;
        }
    }
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];
        size_t g = find_leaf(b, slots, mask, FF_NONE, TEMP_LEAF(f));

        if (g != FF_NONE && b->files[g].dir != f->dir) {
            b->dirs[b->files[g].dir].need_id = 1;
            b->dirs[f->dir].need_id = 1;
        }
    }
    free(slots);
    return 0;
}

static int cmp_dev_ino(const void *x, const void *y)
{
    const struct ff_batch_dir *p = *(const struct ff_batch_dir *const *)x;
    const struct ff_batch_dir *q = *(const struct ff_batch_dir *const *)y;

    if (p->dev != q->dev)
        return p->dev < q->dev ? -1 : 1;
    if (p->ino != q->ino)
        return p->ino < q->ino ? -1 : 1;
    return (p > q) - (p < q);
}

/* Two names of one directory: one stands for both (one fd, one fsync, and
 * a target given under both names is found by find_duplicate). */
int ff_batch_merge_same_dirs(struct ff_batch *b)
{
    struct ff_batch_dir **byid;
    size_t k, m = 0;

    if (b->ndirs < 2)
        return 0;
    if (!(byid = malloc(b->ndirs * sizeof *byid)))
        return ENOMEM;
    for (k = 0; k < b->ndirs; k++)
        if (b->dirs[k].statted)
            byid[m++] = &b->dirs[k];
    qsort(byid, m, sizeof *byid, cmp_dev_ino);
    for (k = 0; k < m; k++)
        byid[k]->same_as = k > 0 && byid[k]->dev == byid[k - 1]->dev && byid[k]->ino == byid[k - 1]->ino
                           ? byid[k - 1]->same_as : (size_t)(byid[k] - b->dirs);
    free(byid);
    for (k = 0; k < b->n; k++)
        b->files[k].dir = b->dirs[b->files[k].dir].same_as;
    return 0;
}

/* The files by directory and leaf where case folds, for the lookups of
 * find_duplicate: one slot a name (the first file of it), and next[i] the
 * next file of file i's name after it (index + 1; 0: none). */
static int make_folded_names(const struct ff_batch *b, ff_slot **slots_out, ff_slot **next_out,
                             size_t *mask)
{
    ff_slot *slots = make_slots(b->n, mask), *next = calloc(b->n, sizeof *next);
    size_t i, s;

    if (!slots || !next) {
        free(slots);
        free(next);
        return ENOMEM;
    }
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];

        for (s = (size_t)leaf_hash_n(b, f->dir, LEAF(f), LEAF_LEN(f)) & *mask; slots[s]; s = (s + 1) & *mask) {
            size_t first = slots[s] - 1;

            if (b->files[first].dir == f->dir && same_folded(LEAF(&b->files[first]), LEAF(f))) {
                next[i] = next[first];
                next[first] = (ff_slot)(i + 1);
                break;
            }
        }
        if (!slots[s])
            slots[s] = (ff_slot)(i + 1);
    }
    *slots_out = slots;
    *next_out = next;
    return 0;
}

/* Two entries for one name in one directory: the second would silently
 * replace the first. A hash of (directory, leaf), of the exact bytes: the
 * case variants of a leaf (2^17 names of 17 letters) would make one chain,
 * a probe as long as the batch for each. Then the temps: one whose plain
 * name ("<target>.tmp.<pid>") is another pair's target would be replaced
 * by that pair's rename, and its own rename would publish the other pair's
 * bytes: such a temp takes a random name from the start. */
int ff_batch_find_duplicate(struct ff_batch *b)
{
    size_t mask, i;
    ff_slot *slots, *next = NULL;
    int err = 0;

    if (b->n < 2)
        return 0;
    if (!(slots = make_slots(b->n, &mask)))
        return ENOMEM;
    for (i = 0; i < b->n; i++) {
        const struct ff_batch_file *f = &b->files[i];
        size_t s;

        for (s = (size_t)name_hash(b, f->dir, LEAF(f), LEAF_LEN(f), 0) & mask; slots[s]; s = (s + 1) & mask) {
            const struct ff_batch_file *g = &b->files[slots[s] - 1];
            if (g->dir == f->dir && strcmp(LEAF(g), LEAF(f)) == 0) {
                b->dup_first = slots[s] - 1;
                b->dup_second = i;
                free(slots);
                return EINVAL;
            }
        }
        slots[s] = (ff_slot)(i + 1);
    }
    free(slots);
    slots = NULL;
    /* A temp's leaf is its target's and the suffix ".tmp.<pid>" (the
     * same for all: no random name yet): only a target whose leaf ends
     * with it (where case folds) can be another's temp, that of every file
     * of its leaf less the suffix in its directory (where case folds: all
     * its case variants). So each such target is looked up, not every
     * temp's leaf hashed; the table of the leaves is made for the first. */
    for (i = 0; i < b->n && !err; i++) {
        const struct ff_batch_file *g = &b->files[i];
        const char *suffix = g->a.temp + g->a.target_len, *leaf = LEAF(g);
        size_t suffix_len = b->suffix_len, len = LEAF_LEN(g), s;

        if (len <= suffix_len || !same_folded_n(suffix, leaf + len - suffix_len, suffix_len))
            continue;
        if (!slots && (err = make_folded_names(b, &slots, &next, &mask)))
            break;
        len -= suffix_len;
        for (s = (size_t)leaf_hash_n(b, g->dir, leaf, len) & mask; slots[s]; s = (s + 1) & mask) {
            size_t k = slots[s] - 1;

            if (b->files[k].dir == g->dir && same_folded_n(LEAF(&b->files[k]), leaf, len)) {
                /* each name's files marked once: case variants of the
                 * suffix ask for the same files */
                if (!b->files[k].temp_is_target)
                    for (k = slots[s]; k; k = next[k - 1])
                        b->files[k - 1].temp_is_target = 1;
                break;
            }
        }
    }
    free(slots);
    free(next);
    return err;
}
