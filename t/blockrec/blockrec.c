/*
 * blockrec - a FUSE filesystem holding one disk image, recording every
 * write and flush that a loop device sends to it, and serving the image as
 * a crash could have left it: FastFile's block-level crash test (t/92).
 *
 *   BLOCKREC_SIZE=<bytes> blockrec -f -s -o default_permissions MOUNTPOINT
 *
 * MOUNTPOINT/disk  the recorded image: `losetup --direct-io=on` over it
 *                  makes each block write of the filesystem on the loop
 *                  device a WRITE request here, each cache flush an FSYNC
 * MOUNTPOINT/state the image after a chosen set of the recorded writes
 *                  (see "state" below), for a second loop device; what is
 *                  written to it is kept until the next "state"
 * MOUNTPOINT/ctl   commands in, the log out (see README)
 *
 * Images are sparse: 4 KiB blocks in memory, only those ever written. The
 * base is the image at the last "start"; the disk and the state are
 * copy-on-write overlays over it, so a crash state costs only its writes.
 * Single-threaded (-s): requests are logged in the order the kernel sent
 * them.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <fuse.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define BLOCK 4096

/* one image: a block pointer per 4 KiB, NULL where never written (zeros,
 * or the base's block for an overlay) */
struct image { unsigned char **b; };

/* a log entry: a write (data, off, len), a flush (FSYNC) or a mark */
enum kind { WRITE, FLUSH, MARK };
struct entry { enum kind kind; off_t off; size_t len; char *data; };

static size_t size, nblocks;
static struct image base, disk, state;
static struct entry *log_;
static size_t nlog, caplog;
static struct { unsigned long long writes, write_bytes, fsyncs, flushes,
                state_writes; } st;

/* the command line so far (a write may bring part of a line) */
static char pending[65536];
static size_t npending;

static unsigned char *block_of(struct image *over, size_t i)
{
	if (over && over->b[i])
		return over->b[i];
	return base.b[i];
}

static void drop(struct image *im)
{
	for (size_t i = 0; i < nblocks; i++) {
		free(im->b[i]);
		im->b[i] = NULL;
	}
}

/* Writes len bytes at off into the overlay (NULL: the base), copying a
 * block from below before its first change; -ENOMEM if out of memory. */
static int put(struct image *over, const char *buf, size_t len, off_t off)
{
	struct image *im = over ? over : &base;

	while (len > 0) {
		size_t i = (size_t) off / BLOCK, in = (size_t) off % BLOCK;
		size_t n = BLOCK - in < len ? BLOCK - in : len;

		if (!im->b[i]) {
			unsigned char *below = over ? base.b[i] : NULL;

			if (!(im->b[i] = malloc(BLOCK)))
				return -ENOMEM;
			if (below)
				memcpy(im->b[i], below, BLOCK);
			else
				memset(im->b[i], 0, BLOCK);
		}
		memcpy(im->b[i] + in, buf, n);
		buf += n;
		len -= n;
		off += n;
	}
	return 0;
}

static void get(struct image *over, char *buf, size_t len, off_t off)
{
	while (len > 0) {
		size_t i = (size_t) off / BLOCK, in = (size_t) off % BLOCK;
		size_t n = BLOCK - in < len ? BLOCK - in : len;
		unsigned char *b = block_of(over, i);

		if (b)
			memcpy(buf, b + in, n);
		else
			memset(buf, 0, n);
		buf += n;
		len -= n;
		off += n;
	}
}

static int append(enum kind kind, const char *data, size_t len, off_t off)
{
	struct entry *e;

	if (nlog == caplog) {
		size_t cap = caplog ? 2 * caplog : 1024;
		struct entry *l = realloc(log_, cap * sizeof *l);

		if (!l)
			return -ENOMEM;
		log_ = l;
		caplog = cap;
	}
	e = &log_[nlog];
	e->kind = kind;
	e->off = off;
	e->len = len;
	e->data = NULL;
	if (len && !(e->data = malloc(len)))
		return -ENOMEM;
	if (len)
		memcpy(e->data, data, len);
	nlog++;
	return 0;
}

static void clear_log(void)
{
	for (size_t i = 0; i < nlog; i++)
		free(log_[i].data);
	nlog = 0;
}

/* "start": the disk as it is becomes the base, the log starts empty */
static int start(void)
{
	for (size_t i = 0; i < nblocks; i++)
		if (disk.b[i]) {
			free(base.b[i]);
			base.b[i] = disk.b[i];
			disk.b[i] = NULL;
		}
	drop(&state);
	clear_log();
	return 0;
}

/* "state N [I ...]": the state image is the base plus the writes among
 * log entries 0..N-1 and among entries I ..., in log order */
static int make_state(char *args)
{
	char *end;
	unsigned long n = strtoul(args, &end, 10);
	unsigned char *chosen;
	int r = 0;

	if (end == args || n > nlog)
		return -EINVAL;
	if (!(chosen = calloc(nlog + 1, 1)))
		return -ENOMEM;
	memset(chosen, 1, n);
	for (args = end; *args; args = end) {
		unsigned long i = strtoul(args, &end, 10);

		if (end == args)
			break;
		if (i >= nlog) {
			free(chosen);
			return -EINVAL;
		}
		chosen[i] = 1;
	}
	drop(&state);
	for (size_t i = 0; i < nlog && !r; i++)
		if (chosen[i] && log_[i].kind == WRITE)
			r = put(&state, log_[i].data, log_[i].len, log_[i].off);
	free(chosen);
	return r;
}

/* "save PATH": the state image to a (sparse) file, for a look by hand */
static int save(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t) size) < 0)
		goto fail;
	for (size_t i = 0; i < nblocks; i++) {
		unsigned char *b = block_of(&state, i);

		if (b && pwrite(fd, b, BLOCK, (off_t) i * BLOCK) != BLOCK)
			goto fail;
	}
	if (close(fd) < 0)
		return -errno;
	return 0;
fail:;
	int err = errno ? errno : EIO;
	close(fd);
	return -err;
}

static int command(char *line)
{
	if (strcmp(line, "start") == 0)
		return start();
	if (strncmp(line, "mark ", 5) == 0)
		return append(MARK, line + 5, strlen(line + 5), 0);
	if (strncmp(line, "state ", 6) == 0)
		return make_state(line + 6);
	if (strncmp(line, "save ", 5) == 0)
		return save(line + 5);
	return -EINVAL;
}

/* ---------- the files ---------- */

enum file { NONE, DISK, STATE, CTL };

static enum file file_of(const char *path)
{
	if (strcmp(path, "/disk") == 0)
		return DISK;
	if (strcmp(path, "/state") == 0)
		return STATE;
	if (strcmp(path, "/ctl") == 0)
		return CTL;
	return NONE;
}

/* the control file's text at open: counters, then one line per entry */
struct snapshot { char *text; size_t len; };

static struct snapshot *snapshot(void)
{
	struct snapshot *s = calloc(1, sizeof *s);
	FILE *f;

	if (!s)
		return NULL;
	if (!(f = open_memstream(&s->text, &s->len))) {
		free(s);
		return NULL;
	}
	fprintf(f, "size %zu\nwrites %llu\nwrite_bytes %llu\nfsyncs %llu\n"
		"flushes %llu\nstate_writes %llu\nentries %zu\n", size,
		st.writes, st.write_bytes, st.fsyncs, st.flushes,
		st.state_writes, nlog);
	for (size_t i = 0; i < nlog; i++) {
		struct entry *e = &log_[i];

		if (e->kind == WRITE)
			fprintf(f, "W %lld %zu\n", (long long) e->off, e->len);
		else if (e->kind == FLUSH)
			fprintf(f, "F\n");
		else
			fprintf(f, "M %.*s\n", (int) e->len, e->data);
	}
	if (fclose(f) != 0) {
		free(s->text);
		free(s);
		return NULL;
	}
	return s;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->direct_io = 1;     /* no page cache: a new state shows at once */
	cfg->attr_timeout = cfg->entry_timeout = 0;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	return NULL;
}

static int fs_getattr(const char *path, struct stat *sb,
		      struct fuse_file_info *fi)
{
	(void) fi;
	memset(sb, 0, sizeof *sb);
	sb->st_uid = getuid();
	sb->st_gid = getgid();
	if (strcmp(path, "/") == 0) {
		sb->st_mode = S_IFDIR | 0755;
		sb->st_nlink = 2;
		return 0;
	}
	switch (file_of(path)) {
	case DISK: case STATE:
		sb->st_size = (off_t) size;
		break;
	case CTL:
		break;
	default:
		return -ENOENT;
	}
	sb->st_mode = S_IFREG | 0600;
	sb->st_nlink = 1;
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	enum file f = file_of(path);

	if (f == NONE)
		return -ENOENT;
	fi->direct_io = 1;
	fi->fh = 0;
	if (f == CTL && (fi->flags & O_ACCMODE) == O_RDONLY) {
		struct snapshot *s = snapshot();

		if (!s)
			return -ENOMEM;
		fi->fh = (uintptr_t) s;
	}
	return 0;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	struct snapshot *s = (struct snapshot *) (uintptr_t) fi->fh;

	(void) path;
	if (s) {
		free(s->text);
		free(s);
	}
	return 0;
}

static int fs_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	enum file f = file_of(path);

	if (f == CTL) {
		struct snapshot *s = (struct snapshot *) (uintptr_t) fi->fh;

		if (!s || (size_t) off >= s->len)
			return 0;
		if (len > s->len - (size_t) off)
			len = s->len - (size_t) off;
		memcpy(buf, s->text + off, len);
		return (int) len;
	}
	if (f == NONE)
		return -ENOENT;
	if ((size_t) off >= size)
		return 0;
	if (len > size - (size_t) off)
		len = size - (size_t) off;
	get(f == DISK ? &disk : &state, buf, len, off);
	return (int) len;
}

static int ctl_write(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int r;

		if (buf[i] != '\n') {
			if (npending + 1 >= sizeof pending)
				return -E2BIG;
			pending[npending++] = buf[i];
			continue;
		}
		pending[npending] = '\0';
		npending = 0;
		if ((r = command(pending)) < 0)
			return r;
	}
	return (int) len;
}

static int fs_write(const char *path, const char *buf, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	enum file f = file_of(path);
	int r;

	(void) fi;
	if (f == CTL)
		return ctl_write(buf, len);
	if (f == NONE)
		return -ENOENT;
	if ((size_t) off > size || len > size - (size_t) off)
		return -ENOSPC;
	if (f == STATE) {
		st.state_writes++;
		r = put(&state, buf, len, off);
		return r < 0 ? r : (int) len;
	}
	st.writes++;
	st.write_bytes += len;
	if ((r = append(WRITE, buf, len, off)) < 0 ||
	    (r = put(&disk, buf, len, off)) < 0)
		return r;
	return (int) len;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void) datasync; (void) fi;
	if (file_of(path) != DISK)
		return 0;
	st.fsyncs++;
	return append(FLUSH, NULL, 0, 0);
}

/* FUSE FLUSH comes with close(2): no barrier, only counted */
static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	(void) fi;
	if (file_of(path) == DISK)
		st.flushes++;
	return 0;
}

static int fs_truncate(const char *path, off_t len, struct fuse_file_info *fi)
{
	(void) fi;
	if (file_of(path) == CTL)
		return 0;
	return (size_t) len == size ? 0 : -EINVAL;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	(void) off; (void) fi; (void) flags;
	if (strcmp(path, "/") != 0)
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	fill(buf, "state", NULL, 0, 0);
	fill(buf, "ctl", NULL, 0, 0);
	return 0;
}

static const struct fuse_operations ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.open = fs_open,
	.release = fs_release,
	.read = fs_read,
	.write = fs_write,
	.fsync = fs_fsync,
	.flush = fs_flush,
	.truncate = fs_truncate,
	.readdir = fs_readdir,
};

int main(int argc, char *argv[])
{
	const char *sz = getenv("BLOCKREC_SIZE");
	const char *parent = getenv("BLOCKREC_PARENT_PID");

	/* a killed test cannot leave us (and the mount) behind */
	if (parent) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != (pid_t) atol(parent))
			return 1;
	}
	size = sz ? strtoull(sz, NULL, 0) : 0;
	if (size == 0 || size % BLOCK) {
		fprintf(stderr, "blockrec: BLOCKREC_SIZE must be a multiple of %d\n", BLOCK);
		return 2;
	}
	nblocks = size / BLOCK;
	if (!(base.b = calloc(nblocks, sizeof *base.b)) ||
	    !(disk.b = calloc(nblocks, sizeof *disk.b)) ||
	    !(state.b = calloc(nblocks, sizeof *state.b))) {
		fprintf(stderr, "blockrec: out of memory\n");
		return 1;
	}
	return fuse_main(argc, argv, &ops, NULL);
}
