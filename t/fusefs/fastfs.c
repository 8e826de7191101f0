/*
 * fastfs - a tiny in-memory FUSE filesystem for FastFile's tests and
 * benchmarks.
 *
 * It counts FUSE WRITE requests, models pmxcfs' write amplification
 * (pmxcfs stores the whole file again on every write request, so
 * "bytes_stored" grows by the file's size after each request) and
 * injects faults; "modify_requests" counts every request that can change
 * the tree (each one a stored sqlite transaction on pmxcfs).  Everything is controlled through the file "/.fastfs"
 * at the mount root (not listed by readdir); see README.
 *
 *   fastfs -f -s -o max_write=131072,default_permissions MOUNTPOINT
 *
 * All state is guarded by one mutex, so the multi-threaded loop works as
 * well; that is only needed to let "delay" be cut short by an INTERRUPT
 * (run without -s and with -o intr).
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <fuse.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define CTL_PATH   "/.fastfs"
#define NSIZES     4096            /* remembered write request sizes */
#define MAX_RULES  64
#define MAX_FILE   (1LL << 31)     /* refuse files above 2 GiB: EFBIG */

struct node;
struct entry { char *name; struct node *node; };

struct node {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	nlink_t nlink;
	ino_t ino;
	struct timespec atime, mtime, ctime;
	char *data;                 /* file contents or symlink target */
	size_t size, cap;
	struct entry *ents;         /* directory entries, in creation order */
	size_t nents, cap_ents;
	int opens;                  /* open handles keep unlinked files alive */
	/* the durability model: what survives a "crash" */
	char *ddata;                /* contents as of the last fsync */
	size_t dsize;
	struct entry *dents;        /* directory entries as of the last fsyncdir */
	size_t ndents;
	int drefs;                  /* durable entries naming this node */
	unsigned long long mark;    /* crash: visited in pass number mark */
	struct node *copy;          /* crash: its restored copy (hard links) */
};

/* fi->fh points to one of these; the control file gets a text snapshot. */
/* pending: the control file's command line so far, until its "\n" comes
 * (the kernel may hand one write(2) over in pieces) */
struct handle { struct node *node; int is_ctl; char *text; size_t len;
                char *pending; size_t npending; };

/* OP_CREATED: a create that makes the file, then answers the errno (NFS
 * or a FUSE server interrupted after the fact) */
enum op { OP_WRITE, OP_FLUSH, OP_FSYNC, OP_RENAME, OP_CREATE, OP_OPEN,
	  OP_TRUNCATE, OP_UNLINK, OP_READ, OP_CREATED, OP_SHORT, OP_DELAY, OP_COUNT };
static const char *op_names[OP_COUNT] = { "write", "flush", "fsync",
	"rename", "create", "open", "truncate", "unlink", "read", "created" };

/* fail rules: value = errno; short: max bytes; delay: milliseconds.
 * remaining < 0 means "forever". */
struct rule { enum op op; long value; long remaining; char *pattern; };

static struct {
	unsigned long long write_requests, write_bytes, write_max, write_min,
		bytes_stored, write_errors, read_requests, create_requests,
		open_requests, flush_requests, release_requests, rename_requests,
		fsync_requests, unlink_requests, truncate_requests, faults_injected,
		interrupted, fsyncdir_requests, requests, crashes,
		modify_requests;
} st;
static unsigned sizes[NSIZES];      /* ring buffer of the last write sizes */
static unsigned long long nsizes;   /* total recorded, ring index = n % N */

static struct rule rules[MAX_RULES];
static int nrules;
/* "swap": another cluster node's change as pmxcfs receives it, applied to
 * its database and not through the kernel: after `after` more READ
 * requests on path, the file at path holds data (a snapshot taken when
 * the command came), between two requests of a read in progress; "flip"
 * (every > 0): again after every `every` requests, the two versions in
 * turn, until "unswap" */
static struct { char *path; char *data; size_t size; long after, every; } swap;
static unsigned long long swaps_done;
static struct node *root;
static ino_t next_ino = 1;
/* "crashpoint N": after request number crash_at the durable state is
 * copied to crash_image, which "crash" then makes the whole tree */
static unsigned long long crash_at;
static struct node *crash_image;
static unsigned long long crash_pass;
/* "crashpoints": the durable state after each request from then on, image
 * N after the N-th, until the next crash; "crash N" makes image N the tree
 * (each image once). Every crash point of one run of a call, which then
 * runs once, not once per point. */
static struct node **images;
static size_t nimages, images_cap;
static int recording, recording_failed;
static unsigned max_write_seen;
static struct fuse_conn_info_opts *conn_opts;  /* -o max_write=N etc. */

/* libfuse 3 dropped these as -o options (they are fuse_config fields set
 * in init()), so we parse them ourselves. */
static struct { int direct_io, intr, cache, pmxcfs; } opts;
static unsigned long max_write_opt;
enum { KEY_MAX_WRITE };
static const struct fuse_opt opt_spec[] = {
	{ "direct_io", offsetof(typeof(opts), direct_io), 1 },
	{ "intr", offsetof(typeof(opts), intr), 1 },
	{ "cache", offsetof(typeof(opts), cache), 1 },
	{ "pmxcfs", offsetof(typeof(opts), pmxcfs), 1 },
	FUSE_OPT_KEY("max_write=", KEY_MAX_WRITE),
	FUSE_OPT_END
};

/* Peeks at max_write (left in place for fuse_parse_conn_info_opts). */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *out)
{
	(void) data; (void) out;
	if (key == KEY_MAX_WRITE)
		max_write_opt = strtoul(arg + strlen("max_write="), NULL, 0);
	return 1;
}

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static void unlock_cb(int *unused) { (void) unused; pthread_mutex_unlock(&big); }
/* Holds the big lock until the enclosing function returns. */
#define LOCKED __attribute__((cleanup(unlock_cb), unused)) \
	int lock_guard_ = pthread_mutex_lock(&big)
static void tick(void);
static void tick_cb(int *counted) { if (*counted) tick(); }
/* After LOCKED: counts the request (for "crashpoint") when the function
 * returns, still locked. The control file's traffic is NOT_COUNTED. */
#define COUNTED __attribute__((cleanup(tick_cb), unused)) int counted_ = 1
#define NOT_COUNTED (counted_ = 0)

static struct timespec now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}

/* ---------- the tree ---------- */

static struct node *new_node(mode_t mode, uid_t uid, gid_t gid)
{
	struct node *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	n->mode = mode;
	n->uid = uid;
	n->gid = gid;
	n->ino = next_ino++;
	n->atime = n->mtime = n->ctime = now();
	return n;
}

static void drop_dents(struct node *dir);

static void maybe_free(struct node *n)
{
	if (n->nlink > 0 || n->opens > 0 || n->drefs > 0)
		return;
	drop_dents(n);
	free(n->data);
	free(n->ddata);
	free(n->ents);  /* only ever empty here: rmdir insists */
	free(n);
}

static struct entry *find_entry(struct node *dir, const char *name, size_t len)
{
	for (size_t i = 0; i < dir->nents; i++)
		if (strlen(dir->ents[i].name) == len &&
		    memcmp(dir->ents[i].name, name, len) == 0)
			return &dir->ents[i];
	return NULL;
}

/* Walks the first len bytes of path; NULL with errno set on failure. */
static struct node *walk(const char *path, size_t len)
{
	struct node *n = root;
	size_t i = 0;

	while (i < len) {
		size_t j;
		struct entry *e;

		while (i < len && path[i] == '/')
			i++;
		if (i >= len)
			break;
		for (j = i; j < len && path[j] != '/'; j++)
			;
		if (!S_ISDIR(n->mode)) {
			errno = ENOTDIR;
			return NULL;
		}
		e = find_entry(n, path + i, j - i);
		if (!e) {
			errno = ENOENT;
			return NULL;
		}
		n = e->node;
		i = j;
	}
	return n;
}

static struct node *lookup(const char *path)
{
	if (!path) {  /* unlinked while open, and no fi to go by */
		errno = ENOENT;
		return NULL;
	}
	return walk(path, strlen(path));
}

/* The directory holding path's last component, which goes to *leaf. */
static struct node *lookup_parent(const char *path, const char **leaf)
{
	const char *slash = strrchr(path, '/');
	struct node *dir = walk(path, slash - path);

	*leaf = slash + 1;
	if (dir && !S_ISDIR(dir->mode)) {
		errno = ENOTDIR;
		return NULL;
	}
	return dir;
}

static int add_entry(struct node *dir, const char *name, struct node *n)
{
	if (dir->nents == dir->cap_ents) {
		size_t cap = dir->cap_ents ? dir->cap_ents * 2 : 8;
		struct entry *e = realloc(dir->ents, cap * sizeof *e);
		if (!e)
			return -ENOMEM;
		dir->ents = e;
		dir->cap_ents = cap;
	}
	if (!(dir->ents[dir->nents].name = strdup(name)))
		return -ENOMEM;
	dir->ents[dir->nents++].node = n;
	n->nlink++;
	dir->mtime = dir->ctime = now();
	return 0;
}

/* Takes the entry out of dir; the node is left alone. */
static void remove_slot(struct node *dir, struct entry *e)
{
	size_t i = e - dir->ents;

	free(e->name);
	memmove(e, e + 1, (dir->nents - i - 1) * sizeof *e);
	dir->nents--;
	dir->mtime = dir->ctime = now();
}

/* Removes the entry, drops one link and frees the node if unused. */
static void del_entry(struct node *dir, struct entry *e)
{
	struct node *n = e->node;

	remove_slot(dir, e);
	n->nlink--;
	n->ctime = now();
	if (S_ISDIR(n->mode))
		n->nlink = 0;  /* a removed directory has no "." either */
	maybe_free(n);
}

/* Creates path as a new node; fails with EEXIST if it is there. */
static int make_node(const char *path, mode_t mode, struct node **out)
{
	const char *leaf;
	struct node *dir = lookup_parent(path, &leaf), *n;
	int r;

	if (!dir)
		return -errno;
	if (find_entry(dir, leaf, strlen(leaf)) || strcmp(path, CTL_PATH) == 0)
		return -EEXIST;
	if (!(n = new_node(mode, fuse_get_context()->uid,
			   fuse_get_context()->gid)))
		return -ENOMEM;
	if ((r = add_entry(dir, leaf, n)) < 0) {
		free(n);
		return r;
	}
	if (S_ISDIR(mode)) {
		n->nlink++;    /* its own "." */
		dir->nlink++;  /* its ".." */
	}
	*out = n;
	return 0;
}

static int resize(struct node *n, off_t size)
{
	if (size < 0)
		return -EINVAL;
	if (size > MAX_FILE)
		return -EFBIG;
	if ((size_t) size > n->cap) {
		size_t cap = n->cap ? n->cap : 4096;
		char *d;
		while (cap < (size_t) size)
			cap *= 2;
		if (!(d = realloc(n->data, cap)))
			return -ENOMEM;
		n->data = d;
		n->cap = cap;
	}
	if ((size_t) size > n->size)
		memset(n->data + n->size, 0, size - n->size);  /* holes read 0 */
	n->size = size;
	n->mtime = n->ctime = now();
	return 0;
}

/* ---------- the durability model ----------
 *
 * A file's data is volatile until an fsync (or fdatasync) of it copies it
 * to ddata; a directory's entries (create, rename, unlink, link) are
 * volatile until an fsyncdir of it copies them to dents. "crash" replaces
 * the tree by its durable state: every directory holds its dents, every
 * file its ddata. Stricter than any real filesystem (ext4's journal would
 * keep more), so what survives here survives there. */

/* Forgets dir's durable entries (their nodes may go with them). */
static void drop_dents(struct node *dir)
{
	struct entry *d = dir->dents;
	size_t n = dir->ndents;

	dir->dents = NULL;
	dir->ndents = 0;
	for (size_t i = 0; i < n; i++) {
		free(d[i].name);
		d[i].node->drefs--;
		maybe_free(d[i].node);
	}
	free(d);
}

/* fsync: the file's data as it is now becomes durable. */
static int sync_data(struct node *n)
{
	char *d = n->size ? malloc(n->size) : NULL;

	if (n->size && !d)
		return -ENOMEM;
	if (n->size)
		memcpy(d, n->data, n->size);
	free(n->ddata);
	n->ddata = d;
	n->dsize = n->size;
	return 0;
}

/* fsyncdir: the directory's entries as they are now become durable. */
static int sync_entries(struct node *dir)
{
	struct entry *d = dir->nents ? calloc(dir->nents, sizeof *d) : NULL;

	if (dir->nents && !d)
		return -ENOMEM;
	for (size_t i = 0; i < dir->nents; i++) {
		if (!(d[i].name = strdup(dir->ents[i].name))) {
			while (i--)
				free(d[i].name);
			free(d);
			return -ENOMEM;
		}
		d[i].node = dir->ents[i].node;
		d[i].node->drefs++;     /* before drop_dents can free it */
	}
	drop_dents(dir);
	dir->dents = d;
	dir->ndents = dir->nents;
	return 0;
}

/* "sync": everything durable, as sync(2) would make it (test setup). */
static int sync_all(struct node *n)
{
	int r = S_ISDIR(n->mode) ? sync_entries(n) : sync_data(n);

	for (size_t i = 0; r == 0 && S_ISDIR(n->mode) && i < n->nents; i++)
		r = sync_all(n->ents[i].node);
	return r;
}

/* A new tree made of n's durable state (NULL on ENOMEM): what a machine
 * that crashed now would find. Hard links stay one node. */
static struct node *restore(struct node *n)
{
	struct node *m;

	if (n->mark == crash_pass)
		return n->copy;
	n->mark = crash_pass;
	if (!(m = n->copy = calloc(1, sizeof *m)))
		return NULL;
	m->mode = n->mode;
	m->uid = n->uid;
	m->gid = n->gid;
	m->ino = n->ino;        /* the kernel sees the same inode numbers */
	m->atime = n->atime;
	m->mtime = n->mtime;
	m->ctime = n->ctime;
	if (S_ISDIR(n->mode)) {
		m->nlink = 1;   /* "."; its parent's entry and subdirs' ".." follow */
		for (size_t i = 0; i < n->ndents; i++) {
			struct node *c = restore(n->dents[i].node);
			if (!c || add_entry(m, n->dents[i].name, c) < 0)
				return NULL;
			if (S_ISDIR(c->mode))
				m->nlink++;
		}
		if (sync_entries(m) < 0)
			return NULL;
	} else {
		if (n->dsize && !(m->data = malloc(n->dsize)))
			return NULL;
		if (n->dsize)
			memcpy(m->data, n->ddata, n->dsize);
		m->size = m->cap = n->dsize;
		if (sync_data(m) < 0)
			return NULL;
	}
	return m;
}

static struct node *restore_tree(struct node *r)
{
	struct node *m;

	crash_pass++;
	if (!(m = restore(r)))
		return NULL;  /* a test filesystem: the half copy is leaked */
	m->nlink++;  /* the root's ".." */
	return m;
}

/* Collects every node of the tree at n (once) into *all. */
static int collect(struct node *n, struct node ***all, size_t *len, size_t *cap)
{
	if (n->mark == crash_pass)
		return 0;
	n->mark = crash_pass;
	if (*len == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		struct node **a = realloc(*all, c * sizeof *a);
		if (!a)
			return -ENOMEM;
		*all = a;
		*cap = c;
	}
	(*all)[(*len)++] = n;
	for (size_t i = 0; i < n->nents; i++)
		if (collect(n->ents[i].node, all, len, cap) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < n->ndents; i++)
		if (collect(n->dents[i].node, all, len, cap) < 0)
			return -ENOMEM;
	return 0;
}

/* Lets go of a tree that a crash replaced (or an unused image): its
 * nodes are unlinked; those still open live on until released. */
static void free_tree(struct node *r)
{
	struct node **all = NULL;
	size_t len = 0, cap = 0;

	crash_pass++;
	if (collect(r, &all, &len, &cap) < 0) {
		free(all);
		return;  /* a test filesystem: leaked, not corrupted */
	}
	for (size_t i = 0; i < len; i++) {
		struct node *n = all[i];
		for (size_t k = 0; k < n->nents; k++)
			free(n->ents[k].name);
		for (size_t k = 0; k < n->ndents; k++)
			free(n->dents[k].name);
		free(n->ents);
		free(n->dents);
		n->ents = n->dents = NULL;
		n->nents = n->ndents = 0;
		n->nlink = 0;
		n->drefs = 0;
	}
	for (size_t i = 0; i < len; i++)
		maybe_free(all[i]);
	free(all);
}

/* "crash": the tree becomes the durable state (as of the crashpoint if
 * one was reached). */
static int crash(void)
{
	struct node *old = root, *fresh = crash_image;

	if (!fresh && !(fresh = restore_tree(root)))
		return -ENOMEM;
	crash_image = NULL;
	crash_at = 0;
	recording = 0;
	root = fresh;
	free_tree(old);
	st.crashes++;
	return 0;
}

/* Lets go of the images "crashpoints" took. */
static void free_images(void)
{
	for (size_t i = 0; i < nimages; i++)
		if (images[i])
			free_tree(images[i]);
	free(images);
	images = NULL;
	nimages = images_cap = 0;
	recording = recording_failed = 0;
}

/* "crash N": the tree becomes image N of "crashpoints" (1: after its
 * first request), which is used up. */
static int crash_into(long n)
{
	struct node *old = root;

	if (recording_failed)
		return -ENOMEM;
	if (n < 1 || (size_t) n > nimages || !images[n - 1])
		return -EINVAL;
	recording = 0;
	crash_image = NULL;
	crash_at = 0;
	root = images[n - 1];
	images[n - 1] = NULL;
	free_tree(old);
	st.crashes++;
	return 0;
}

/* Keeps the durable state after this request, for "crash N". */
static void record_image(void)
{
	struct node *m;

	if (nimages == images_cap) {
		size_t c = images_cap ? 2 * images_cap : 64;
		struct node **a = realloc(images, c * sizeof *a);
		if (!a) {
			recording = 0;
			recording_failed = 1;
			return;
		}
		images = a;
		images_cap = c;
	}
	if (!(m = restore_tree(root))) {
		recording = 0;
		recording_failed = 1;
		return;
	}
	images[nimages++] = m;
}

/* Called after every request (but the control file's): takes the
 * crashpoint's image when its request has been handled. */
static void tick(void)
{
	st.requests++;
	if (crash_at && st.requests == crash_at && !crash_image)
		crash_image = restore_tree(root);
	if (recording)
		record_image();
}

/* ---------- fault rules ---------- */

static int matches(const char *pattern, const char *path)
{
	size_t len = strlen(pattern);

	if (!path)
		path = "";  /* unlinked but still open: only "*" matches */
	if (len && pattern[len - 1] == '*')
		return strncmp(pattern, path, len - 1) == 0;
	return strcmp(pattern, path) == 0;
}

/* The newest rule for op on path, or NULL; consumes one use of it. */
static struct rule *find_rule(enum op op, const char *path)
{
	for (int i = nrules - 1; i >= 0; i--) {
		struct rule *r = &rules[i];
		if (r->op != op || r->remaining == 0 || !matches(r->pattern, path))
			continue;
		if (r->remaining > 0)
			r->remaining--;
		return r;
	}
	return NULL;
}

/* Returns -errno if a fail rule fires for op on path, else 0. */
static int fault(enum op op, const char *path)
{
	struct rule *r = find_rule(op, path);

	if (!r)
		return 0;
	st.faults_injected++;
	return -(int) r->value;
}

static void clear_rules(void)
{
	for (int i = 0; i < nrules; i++)
		free(rules[i].pattern);
	nrules = 0;
}

static int add_rule(enum op op, long value, long count, const char *pattern)
{
	if (nrules == MAX_RULES)
		return -ENOSPC;
	if (!(rules[nrules].pattern = strdup(pattern)))
		return -ENOMEM;
	rules[nrules].op = op;
	rules[nrules].value = value;
	rules[nrules].remaining = count;
	nrules++;
	return 0;
}

static int parse_op(const char *s)
{
	if (strcmp(s, "close") == 0)
		return OP_FLUSH;
	for (int i = 0; i < OP_SHORT; i++)
		if (strcmp(s, op_names[i]) == 0)
			return i;
	return -1;
}

/* Drops a pending swap. */
static void swap_clear(void)
{
	free(swap.path);
	free(swap.data);
	memset(&swap, 0, sizeof swap);
}

/* Puts data in place of path's contents, the node (inode) kept, as
 * pmxcfs' database changes under an open file. */
static int swap_apply(void)
{
	struct node *n = lookup(swap.path);
	int r;

	if (!n || !S_ISREG(n->mode))
		r = -ENOENT;
	else if (swap.every) {         /* flip: exchange, and count again */
		char *data = n->data;
		size_t size = n->size;

		n->data = swap.data;
		n->size = n->cap = swap.size;
		n->mtime = n->ctime = now();
		swap.data = data;
		swap.size = size;
		swap.after = swap.every;
		swaps_done++;
		return 0;
	} else if ((r = resize(n, (off_t) swap.size)) == 0) {
		memcpy(n->data, swap.data, swap.size);
		swaps_done++;
	}
	swap_clear();
	return r;
}

/* "swap <path> <n> <from>": from's contents now, into path after the
 * n-th READ request on path (0: at once); every: "flip"'s period */
static int swap_arm(const char *path, long after, const char *from, long every)
{
	struct node *src = lookup(from);

	if (!src || !S_ISREG(src->mode))
		return -ENOENT;
	swap_clear();
	if (!(swap.path = strdup(path)) ||
	    !(swap.data = malloc(src->size ? src->size : 1))) {
		swap_clear();
		return -ENOMEM;
	}
	memcpy(swap.data, src->data, src->size);
	swap.size = src->size;
	swap.after = after;
	swap.every = every;
	return after == 0 ? swap_apply() : 0;
}

/* One command line written to the control file. */
static int command(char *line)
{
	char word[16], opname[16], path[4096], from[4096];
	long a, b;
	int op;

	if (sscanf(line, "%15s", word) != 1)
		return 0;  /* blank line */
	if (strcmp(word, "reset") == 0) {
		memset(&st, 0, sizeof st);
		swaps_done = 0;
		nsizes = 0;
		return 0;
	}
	if (strcmp(word, "clear") == 0) {
		clear_rules();
		return 0;
	}
	if (strcmp(word, "sync") == 0)
		return sync_all(root);
	if (strcmp(word, "crash") == 0)
		return sscanf(line, "%*s %ld", &a) == 1 ? crash_into(a) : crash();
	if (strcmp(word, "crashpoints") == 0) {
		free_images();
		recording = 1;
		return 0;
	}
	if (strcmp(word, "crashpoint") == 0 &&
	    sscanf(line, "%*s %ld", &a) == 1 && a >= 0) {
		if (crash_image)
			free_tree(crash_image);
		crash_image = NULL;
		crash_at = 0;
		if (a == 0)
			return (crash_image = restore_tree(root)) ? 0 : -ENOMEM;
		crash_at = st.requests + a;
		return 0;
	}
	if (strcmp(word, "fail") == 0 &&
	    sscanf(line, "%*s %15s %ld %4095s", opname, &a, path) == 3 &&
	    (op = parse_op(opname)) >= 0 && a > 0 && a < 4096)
		return add_rule(op, a, -1, path);
	if (strcmp(word, "failn") == 0 &&
	    sscanf(line, "%*s %ld %15s %ld %4095s", &b, opname, &a, path) == 4 &&
	    (op = parse_op(opname)) >= 0 && a > 0 && a < 4096 && b > 0)
		return add_rule(op, a, b, path);
	if (strcmp(word, "short") == 0 &&
	    sscanf(line, "%*s %4095s %ld", path, &a) == 2 && a >= 0)
		return add_rule(OP_SHORT, a, -1, path);
	if (strcmp(word, "delay") == 0 &&
	    sscanf(line, "%*s %4095s %ld", path, &a) == 2 && a >= 0)
		return add_rule(OP_DELAY, a, -1, path);
	if (strcmp(word, "swap") == 0 &&
	    sscanf(line, "%*s %4095s %ld %4095s", path, &a, from) == 3 && a >= 0)
		return swap_arm(path, a, from, 0);
	if (strcmp(word, "flip") == 0 &&
	    sscanf(line, "%*s %4095s %ld %4095s", path, &a, from) == 3 && a > 0)
		return swap_arm(path, a, from, a);
	if (strcmp(word, "unswap") == 0) {
		swap_clear();
		return 0;
	}
	return -EINVAL;
}

/* Runs each complete line written so far; keeps a partial one for later. */
static int ctl_write(struct handle *h, const char *buf, size_t size)
{
	char *text, *line, *nl;
	size_t left;
	int r = 0;
	LOCKED;

	if (!(text = realloc(h->pending, h->npending + size + 1)))
		return -ENOMEM;
	h->pending = text;
	memcpy(text + h->npending, buf, size);
	h->npending += size;
	text[h->npending] = '\0';
	line = text;
	left = h->npending;
	while (r >= 0 && (nl = memchr(line, '\n', left))) {
		*nl = '\0';
		r = command(line);
		left -= (size_t) (nl + 1 - line);
		line = nl + 1;
	}
	memmove(text, line, left);
	h->npending = left;
	return r < 0 ? r : (int) size;
}

/* Renders all counters as "key value\n" lines. */
static int ctl_snapshot(struct handle *h)
{
	FILE *f = open_memstream(&h->text, &h->len);
	unsigned long long first;
	LOCKED;

	if (!f)
		return -ENOMEM;
#define KV(k) fprintf(f, #k " %llu\n", st.k)
	KV(write_requests); KV(write_bytes); KV(write_max); KV(write_min);
	KV(bytes_stored); KV(write_errors); KV(read_requests);
	KV(create_requests); KV(open_requests); KV(flush_requests);
	KV(release_requests); KV(rename_requests); KV(fsync_requests);
	KV(unlink_requests); KV(truncate_requests); KV(faults_injected);
	KV(interrupted); KV(fsyncdir_requests); KV(requests); KV(crashes);
	KV(modify_requests);
#undef KV
	/* 1 while a crashpoint waits for its request */
	fprintf(f, "crashpoint_pending %d\n", crash_at && !crash_image);
	/* the images "crashpoints" took (0 if one could not be taken) */
	fprintf(f, "crashpoints %zu\n", recording_failed ? (size_t) 0 : nimages);
	/* 1 while a swap waits for its READ request; the swaps made */
	fprintf(f, "swap_pending %d\nswaps %llu\n", swap.path != NULL, swaps_done);
	fprintf(f, "rules %d\nmax_write %u\nwrite_sizes ", nrules, max_write_seen);
	first = nsizes > NSIZES ? nsizes - NSIZES : 0;
	for (unsigned long long i = first; i < nsizes; i++)
		fprintf(f, "%s%u", i > first ? "," : "", sizes[i % NSIZES]);
	fputc('\n', f);
	return fclose(f) ? -ENOMEM : 0;
}

/* ---------- operations ---------- */

static struct handle *H(struct fuse_file_info *fi)
{
	return fi ? (struct handle *) (uintptr_t) fi->fh : NULL;
}

static int is_ctl(const char *path)
{
	return path && strcmp(path, CTL_PATH) == 0;
}

/* What an operation is about: the open handle's node if there is one,
 * since the path is NULL once an open file has been unlinked. */
static struct node *node_of(const char *path, struct fuse_file_info *fi)
{
	if (fi && H(fi)->node)
		return H(fi)->node;
	return lookup(path);
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->use_ino = 1;       /* hard links and renames keep st_ino */
	cfg->hard_remove = 1;   /* no .fuse_hidden renames to skew the counts */
	/* -o pmxcfs: libfuse's settings as pmxcfs runs it (it sets none):
	 * an open file that a rename replaces lives on as .fuse_hidden...,
	 * names and attributes are cached for 1 s, and an OPEN or READ of a
	 * node that a RENAME dropped answers ENOENT (see fs_open) */
	if (opts.pmxcfs)
		cfg->hard_remove = 0;
	/* the high-level API gives each hard link its own kernel inode, so
	 * cached attributes could go stale; GETATTRs are not what we count */
	cfg->attr_timeout = 0;
	/* and names are looked up afresh: after a "crash" the kernel must
	 * not remember entries the tree no longer has */
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	/* -o cache: libfuse's default timeouts, pmxcfs' (it sets none) */
	if (opts.cache || opts.pmxcfs)
		cfg->attr_timeout = cfg->entry_timeout = 1.0;
	cfg->nullpath_ok = 0;   /* we want paths (for rules) whenever known */
	cfg->direct_io = opts.direct_io;
	cfg->intr = opts.intr;  /* see main() for the signal handler */
	cfg->intr_signal = SIGUSR1;
	/* Writeback caching would merge and split requests behind our back. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* fuse_main() does not parse -o max_write itself; libfuse derives
	 * the kernel's max_pages from it (FUSE_MAX_PAGES), so 1 MiB works */
	fuse_apply_conn_info_opts(conn_opts, conn);
	max_write_seen = conn->max_write;
	return NULL;
}

static int fs_getattr(const char *path, struct stat *sb,
		      struct fuse_file_info *fi)
{
	struct handle *h = H(fi);
	struct node *n;
	LOCKED;
	COUNTED;

	memset(sb, 0, sizeof *sb);
	if ((h && h->is_ctl) || is_ctl(path)) {
		NOT_COUNTED;
		sb->st_ino = UINT32_MAX;       /* far above any real node */
		sb->st_mode = S_IFREG | 0666;  /* size 0: read via direct_io */
		sb->st_nlink = 1;
		sb->st_uid = getuid();
		sb->st_gid = getgid();
		return 0;
	}
	if (!(n = node_of(path, fi)))
		return -errno;
	sb->st_ino = n->ino;
	sb->st_mode = n->mode;
	sb->st_nlink = n->nlink;
	sb->st_uid = n->uid;
	sb->st_gid = n->gid;
	sb->st_size = n->size;
	sb->st_blksize = 4096;
	sb->st_blocks = (n->size + 511) / 512;
	sb->st_atim = n->atime;
	sb->st_mtim = n->mtime;
	sb->st_ctim = n->ctime;
	return 0;
}

/* Permission bits are checked by the kernel (-o default_permissions,
 * which then never sends ACCESS); this only answers whether path exists. */
static int fs_access(const char *path, int mask)
{
	LOCKED;
	COUNTED;

	(void) mask;
	if (is_ctl(path))
		NOT_COUNTED;
	return is_ctl(path) || lookup(path) ? 0 : -errno;
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	struct node *n;
	size_t len;
	LOCKED;
	COUNTED;

	if (!(n = lookup(path)))
		return -errno;
	if (!S_ISLNK(n->mode))
		return -EINVAL;
	len = n->size < size - 1 ? n->size : size - 1;
	memcpy(buf, n->data, len);
	buf[len] = '\0';
	return 0;
}

static int fs_mkdir(const char *path, mode_t mode)
{
	struct node *n;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	return make_node(path, S_IFDIR | (mode & 07777), &n);
}

static int fs_symlink(const char *target, const char *path)
{
	struct node *n;
	int r;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	if ((r = make_node(path, S_IFLNK | 0777, &n)) < 0)
		return r;
	if ((r = resize(n, strlen(target))) == 0)
		memcpy(n->data, target, n->size);
	return r;
}

static int fs_unlink(const char *path)
{
	const char *leaf;
	struct node *dir;
	struct entry *e;
	int r;
	LOCKED;
	COUNTED;

	st.unlink_requests++;
	st.modify_requests++;
	if (is_ctl(path))
		return -EPERM;
	if ((r = fault(OP_UNLINK, path)))
		return r;
	if (!(dir = lookup_parent(path, &leaf)))
		return -errno;
	if (!(e = find_entry(dir, leaf, strlen(leaf))))
		return -ENOENT;
	if (S_ISDIR(e->node->mode))
		return -EISDIR;
	del_entry(dir, e);
	return 0;
}

static int fs_rmdir(const char *path)
{
	const char *leaf;
	struct node *dir;
	struct entry *e;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	if (!(dir = lookup_parent(path, &leaf)))
		return -errno;
	if (!(e = find_entry(dir, leaf, strlen(leaf))))
		return -ENOENT;
	if (!S_ISDIR(e->node->mode))
		return -ENOTDIR;
	if (e->node->nents)
		return -ENOTEMPTY;
	dir->nlink--;  /* the child's ".." */
	del_entry(dir, e);
	return 0;
}

/* Is path b equal to, or inside, directory path a? */
static int inside(const char *a, const char *b)
{
	size_t len = strlen(a);
	return strncmp(a, b, len) == 0 && (b[len] == '/' || b[len] == '\0');
}

static int fs_rename(const char *from, const char *to, unsigned int flags)
{
	const char *fleaf, *tleaf;
	struct node *fdir, *tdir, *n;
	struct entry *fe, *te;
	int r;
	LOCKED;
	COUNTED;

	st.rename_requests++;
	st.modify_requests++;
	if (is_ctl(from) || is_ctl(to))
		return -EPERM;
	if ((r = fault(OP_RENAME, from)))
		return r;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;  /* RENAME_WHITEOUT */
	if (!(fdir = lookup_parent(from, &fleaf)) ||
	    !(tdir = lookup_parent(to, &tleaf)))
		return -errno;
	if (!(fe = find_entry(fdir, fleaf, strlen(fleaf))))
		return -ENOENT;
	te = find_entry(tdir, tleaf, strlen(tleaf));
	n = fe->node;

	if (flags & RENAME_EXCHANGE) {
		if (!te)
			return -ENOENT;
		if ((S_ISDIR(n->mode) && inside(from, to)) ||
		    (S_ISDIR(te->node->mode) && inside(to, from)))
			return -EINVAL;
		fe->node = te->node;
		te->node = n;
		fdir->ctime = tdir->ctime = now();
		return 0;
	}
	if (te && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (S_ISDIR(n->mode) && inside(from, to))
		return -EINVAL;  /* into its own subtree */
	if (te) {
		if (te->node == n)
			return 0;  /* hard links to one file: POSIX says no-op */
		if (S_ISDIR(n->mode) && !S_ISDIR(te->node->mode))
			return -ENOTDIR;
		if (!S_ISDIR(n->mode) && S_ISDIR(te->node->mode))
			return -EISDIR;
		if (S_ISDIR(te->node->mode)) {
			if (te->node->nents)
				return -ENOTEMPTY;
			tdir->nlink--;
		}
		del_entry(tdir, te);
	}
	/* add first so nothing is lost on ENOMEM; that may move fdir's
	 * entries, so look the source up again before removing it */
	if ((r = add_entry(tdir, tleaf, n)) < 0)
		return r;
	remove_slot(fdir, find_entry(fdir, fleaf, strlen(fleaf)));
	n->nlink--;
	n->ctime = now();
	if (S_ISDIR(n->mode)) {
		fdir->nlink--;
		tdir->nlink++;
	}
	return 0;
}

static int fs_link(const char *from, const char *to)
{
	const char *leaf;
	struct node *n, *dir;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	if (is_ctl(from) || is_ctl(to))
		return -EPERM;
	if (!(n = lookup(from)))
		return -errno;
	if (S_ISDIR(n->mode))
		return -EPERM;
	if (!(dir = lookup_parent(to, &leaf)))
		return -errno;
	if (find_entry(dir, leaf, strlen(leaf)))
		return -EEXIST;
	n->ctime = now();
	return add_entry(dir, leaf, n);
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct node *n;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	if (!(n = node_of(path, fi)))
		return -errno;  /* also for the control file */
	n->mode = (n->mode & S_IFMT) | (mode & 07777);
	n->ctime = now();
	return 0;
}

static int fs_chown(const char *path, uid_t uid, gid_t gid,
		    struct fuse_file_info *fi)
{
	struct node *n;
	LOCKED;
	COUNTED;

	st.modify_requests++;
	if (!(n = node_of(path, fi)))
		return -errno;
	if (uid != (uid_t) -1)
		n->uid = uid;
	if (gid != (gid_t) -1)
		n->gid = gid;
	n->ctime = now();
	return 0;
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct node *n;
	int r;
	LOCKED;
	COUNTED;

	if (is_ctl(path) || (H(fi) && H(fi)->is_ctl))
		return NOT_COUNTED;  /* open(">") of the control file truncates it */
	st.truncate_requests++;
	st.modify_requests++;
	if ((r = fault(OP_TRUNCATE, path)))
		return r;
	if (!(n = node_of(path, fi)))
		return -errno;
	return S_ISDIR(n->mode) ? -EISDIR : resize(n, size);
}

static int fs_utimens(const char *path, const struct timespec tv[2],
		      struct fuse_file_info *fi)
{
	struct node *n;
	struct timespec t = now();
	LOCKED;
	COUNTED;

	if (is_ctl(path) || (H(fi) && H(fi)->is_ctl))
		return NOT_COUNTED;  /* touch */
	st.modify_requests++;
	if (!(n = node_of(path, fi)))
		return -errno;
	if (!tv || tv[0].tv_nsec != UTIME_OMIT)
		n->atime = !tv || tv[0].tv_nsec == UTIME_NOW ? t : tv[0];
	if (!tv || tv[1].tv_nsec != UTIME_OMIT)
		n->mtime = !tv || tv[1].tv_nsec == UTIME_NOW ? t : tv[1];
	n->ctime = t;
	return 0;
}

static int open_handle(struct node *n, struct fuse_file_info *fi)
{
	struct handle *h = calloc(1, sizeof *h);

	if (!h)
		return -ENOMEM;
	h->node = n;
	n->opens++;
	fi->fh = (uintptr_t) h;
	return 0;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct node *n;
	int r;
	LOCKED;
	COUNTED;

	if (is_ctl(path))
		return -EEXIST;
	st.create_requests++;
	st.modify_requests++;
	if ((r = fault(OP_CREATE, path)))
		return r;
	/* mode arrives already masked by the caller's umask */
	r = make_node(path, S_IFREG | (mode & 07777), &n);
	if (r == -EEXIST && !(fi->flags & O_EXCL) && (n = lookup(path)))
		r = S_ISDIR(n->mode) ? -EISDIR : 0;  /* lost a race: open it */
	if (r == 0 && (fi->flags & O_TRUNC) && n->size)
		r = resize(n, 0);
	if (r == 0 && (r = fault(OP_CREATED, path)))
		return r;                   /* made, yet reported failed */
	return r ? r : open_handle(n, fi);
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct node *n;
	int r;

	if (is_ctl(path)) {
		struct handle *h = calloc(1, sizeof *h);
		if (!h)
			return -ENOMEM;
		h->is_ctl = 1;
		if ((r = ctl_snapshot(h)) < 0) {
			free(h);
			return r;
		}
		fi->direct_io = 1;  /* size is 0: bypass the page cache */
		fi->fh = (uintptr_t) h;
		return 0;
	}
	LOCKED;
	COUNTED;
	st.open_requests++;
	if ((r = fault(OP_OPEN, path)))
		return r;
	if (!(n = lookup(path)))
		return -errno;
	if (opts.pmxcfs)
		fi->direct_io = 1;  /* as pmxcfs' open: every read asks it */
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		/* only seen with FUSE_CAP_ATOMIC_O_TRUNC */
		st.truncate_requests++;
		st.modify_requests++;
		if ((r = resize(n, 0)) < 0)
			return r;
	}
	return open_handle(n, fi);
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct handle *h = H(fi);
	const char *src;
	size_t len;
	int r;
	LOCKED;
	COUNTED;

	if (h->is_ctl) {
		NOT_COUNTED;
		src = h->text;
		len = h->len;
	} else {
		/* by path, as pmxcfs answers (the handle's node once unlinked) */
		struct node *n = path ? lookup(path) : NULL;

		if (!n || !S_ISREG(n->mode))
			n = h->node;
		st.read_requests++;
		if ((r = fault(OP_READ, path)))
			return r;
		src = n->data;
		len = n->size;
	}
	if (off < 0 || (size_t) off >= len)
		size = 0;
	else if (size > len - off)
		size = len - off;
	if (size)
		memcpy(buf, src + off, size);
	/* a swap after this request: this one answered from the old data */
	if (!h->is_ctl && swap.path && path && strcmp(path, swap.path) == 0 &&
	    --swap.after == 0)
		swap_apply();
	return size;
}

/* Sleeps ms with the lock released; -EINTR if the kernel interrupts. */
static int sleep_unlocked(long ms)
{
	int r = 0;

	pthread_mutex_unlock(&big);
	/* short slices so an INTERRUPT (only with -o intr and without -s) is
	 * noticed soon; single-threaded the request just answers late */
	for (long left = ms; left > 0 && !r; left -= 10) {
		struct timespec ts = { 0, (left < 10 ? left : 10) * 1000000L };
		nanosleep(&ts, NULL);
		if (fuse_interrupted())
			r = -EINTR;
	}
	pthread_mutex_lock(&big);
	if (r)
		st.interrupted++;
	return r;
}

static int fs_write(const char *path, const char *buf, size_t size,
		    off_t off, struct fuse_file_info *fi)
{
	struct handle *h = H(fi);
	struct node *n = h->node;
	struct rule *rl;
	int r;

	if (h->is_ctl)
		return ctl_write(h, buf, size);
	LOCKED;
	COUNTED;
	st.write_requests++;
	st.modify_requests++;
	st.write_bytes += size;
	if (size > st.write_max)
		st.write_max = size;
	if (st.write_min == 0 || size < st.write_min)
		st.write_min = size;
	sizes[nsizes++ % NSIZES] = size;

	if ((rl = find_rule(OP_DELAY, path)) && (r = sleep_unlocked(rl->value)))
		goto fail;
	if ((r = fault(OP_WRITE, path)))
		goto fail;
	if ((rl = find_rule(OP_SHORT, path)) && size > (size_t) rl->value)
		size = rl->value;
	if (off + (off_t) size > (off_t) n->size &&
	    (r = resize(n, off + size)) < 0)
		goto fail;
	if (size)
		memcpy(n->data + off, buf, size);
	n->mtime = n->ctime = now();
	st.bytes_stored += n->size;  /* pmxcfs re-stores the whole file */
	return size;
fail:
	st.write_errors++;
	return r;
}

static int fs_statfs(const char *path, struct statvfs *sv)
{
	(void) path;
	memset(sv, 0, sizeof *sv);
	sv->f_bsize = sv->f_frsize = 4096;
	sv->f_blocks = sv->f_bfree = sv->f_bavail = 1 << 20;  /* 4 GiB */
	sv->f_files = sv->f_ffree = sv->f_favail = 1 << 20;
	sv->f_namemax = 255;
	return 0;
}

static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	LOCKED;
	COUNTED;

	if (H(fi)->is_ctl)
		return NOT_COUNTED;
	st.flush_requests++;
	return fault(OP_FLUSH, path);
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct handle *h = H(fi);
	LOCKED;
	COUNTED;

	(void) path;
	if (h->is_ctl) {
		NOT_COUNTED;
		free(h->text);
		free(h->pending);
	} else {
		st.release_requests++;
		h->node->opens--;
		maybe_free(h->node);
	}
	free(h);
	return 0;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	int r;
	LOCKED;
	COUNTED;

	(void) datasync;
	if (H(fi)->is_ctl)
		return NOT_COUNTED;
	st.fsync_requests++;
	if ((r = fault(OP_FSYNC, path)))
		return r;
	return sync_data(H(fi)->node);  /* fdatasync too: the model has no metadata */
}

/* The kernel sends FSYNCDIR for fsync(2) of a directory fd (libfuse's
 * default OPENDIR answer is enough to get one). */
static int fs_fsyncdir(const char *path, int datasync,
		       struct fuse_file_info *fi)
{
	struct node *n;
	LOCKED;
	COUNTED;

	(void) datasync; (void) fi;
	st.fsyncdir_requests++;
	if (!(n = lookup(path)))
		return -errno;
	return S_ISDIR(n->mode) ? sync_entries(n) : -ENOTDIR;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	struct node *n;
	LOCKED;
	COUNTED;

	(void) off; (void) fi; (void) flags;
	if (!(n = lookup(path)))
		return -errno;
	if (!S_ISDIR(n->mode))
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	/* the control file is not in the tree, so it is never listed */
	for (size_t i = 0; i < n->nents; i++)
		if (fill(buf, n->ents[i].name, NULL, 0, 0))
			break;
	return 0;
}

/* Modifying requests fastfs does not implement:
 * counted, then answered as libfuse answers a missing operation. A
 * regular file's MKNOD reaches fs_create (libfuse prefers create). */
static int unsupported_change(void)
{
	LOCKED;
	COUNTED;

	st.modify_requests++;
	return -ENOSYS;
}

/* FIFOs only (a reader must not take one for a file it can read again);
 * other nodes as libfuse answers a filesystem without mknod */
static int fs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	struct node *n;
	(void) rdev;
	if (!S_ISFIFO(mode))
		return unsupported_change();
	{
		LOCKED;
		COUNTED;

		st.modify_requests++;
		return make_node(path, S_IFIFO | (mode & 07777), &n);
	}
}

static int fs_setxattr(const char *path, const char *name, const char *value,
		       size_t size, int flags)
{
	(void) path; (void) name; (void) value; (void) size; (void) flags;
	return unsupported_change();
}

static int fs_removexattr(const char *path, const char *name)
{
	(void) path; (void) name;
	return unsupported_change();
}

static int fs_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	(void) path; (void) mode; (void) off; (void) len; (void) fi;
	return unsupported_change();
}

static ssize_t fs_copy_file_range(const char *in, struct fuse_file_info *fi_in,
				  off_t off_in, const char *out,
				  struct fuse_file_info *fi_out, off_t off_out,
				  size_t len, int flags)
{
	(void) in; (void) fi_in; (void) off_in; (void) out; (void) fi_out;
	(void) off_out; (void) len; (void) flags;
	return unsupported_change();
}

static const struct fuse_operations ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.access = fs_access,
	.readlink = fs_readlink,
	.mkdir = fs_mkdir,
	.symlink = fs_symlink,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.rename = fs_rename,
	.link = fs_link,
	.chmod = fs_chmod,
	.chown = fs_chown,
	.truncate = fs_truncate,
	.utimens = fs_utimens,
	.create = fs_create,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.statfs = fs_statfs,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.fsyncdir = fs_fsyncdir,
	.readdir = fs_readdir,
	.mknod = fs_mknod,
	.setxattr = fs_setxattr,
	.removexattr = fs_removexattr,
	.fallocate = fs_fallocate,
	.copy_file_range = fs_copy_file_range,
};

static void ignore_signal(int sig)
{
	(void) sig;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	const char *parent = getenv("FASTFS_PARENT_PID");
	int r;

	/* Test harnesses set this so a killed test cannot leave us (and the
	 * mount) behind: SIGTERM makes fuse_main unmount and return. */
	if (parent) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != (pid_t) atol(parent))
			return 1;  /* parent already gone */
	}
	root = new_node(S_IFDIR | 0755, getuid(), getgid());
	if (!root)
		return 1;
	root->nlink = 2;
	/* then max_write=, max_readahead= ... go out of args for init() */
	if (fuse_opt_parse(&args, &opts, opt_spec, opt_proc) == -1 ||
	    !(conn_opts = fuse_parse_conn_info_opts(&args)))
		return 1;
	/* Outside this range the kernel rejects libfuse's read buffer
	 * (EINVAL on /dev/fuse): it needs max(4096, max_write) + header
	 * and at least 8 KiB, and libfuse's buffer is 1 MiB + header. */
	if (max_write_opt && (max_write_opt < 4096 || max_write_opt > 1048576)) {
		fprintf(stderr, "fastfs: max_write must be 4096..1048576\n");
		return 2;
	}
	if (opts.intr) {
		/* libfuse only installs its handler when intr is known before
		 * init(); without one SIGUSR1 would kill us.  No SA_RESTART:
		 * the signal is there to cut a delay's nanosleep short. */
		struct sigaction sa = { .sa_handler = ignore_signal };
		sigaction(SIGUSR1, &sa, NULL);
	}
	r = fuse_main(args.argc, args.argv, &ops, NULL);
	fuse_opt_free_args(&args);
	return r;
}
