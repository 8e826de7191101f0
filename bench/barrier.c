/*
 * barrier - how to make N freshly written temp files durable before they are
 * renamed: the candidates for file_set_contents_many's fsync barrier, timed
 * side by side (bench/batch.pl builds it with cc -O2 -pthread and runs it).
 *
 *   barrier DIR SIZE N ROUNDS
 *
 * Each round writes N files of SIZE bytes to DIR/b<i>.tmp, makes them
 * durable with one strategy, renames them to DIR/b<i> and fsyncs DIR once.
 * The strategies run interleaved, round by round, so a disk's slow moments
 * hit all of them alike. Prints one line per strategy: its name and the
 * median microseconds per file.
 *
 *   single   the reference: each file on its own, as N file_set_contents
 *            calls with fsync do (fdatasync, rename, fsync of the directory)
 *   fdatasync    fdatasync each temp in turn
 *   sfr+fdatasync  sync_file_range(SYNC_FILE_RANGE_WRITE) on every temp as
 *            it is written, then fdatasync each (dpkg's way: the first
 *            fdatasync waits, the others find their data on disk)
 *   parallel fdatasync of all temps from N threads at once
 *   sfr+threads  sync_file_range as sfr+fdatasync, then the fdatasyncs
 *            split among min(16, N/4) threads, each syncing its share in
 *            turn (file_set_contents_many's way: the waits share commits
 *            and flushes; fewer than 8 temps, one thread)
 *   syncfs   one syncfs() of the filesystem (flushes others' data too)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { SINGLE, FDATASYNC, SFR, PARALLEL, SHARES, SYNCFS, NSTRAT };
static const char *names[NSTRAT] = { "single", "fdatasync", "sfr+fdatasync",
				     "parallel", "sfr+threads", "syncfs" };

#define SHARES_MAX 16
#define PER_SHARE 4

struct share { int *fds; long from, to; };

static const char *dir;
static char *buf;
static size_t size;

static void die(const char *what)
{
	fprintf(stderr, "barrier: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *sync_one(void *fdp)
{
	if (fdatasync(*(int *) fdp) < 0)
		die("fdatasync");
	return NULL;
}

static void *sync_share(void *p)
{
	struct share *sh = p;

	for (long i = sh->from; i < sh->to; i++)
		if (fdatasync(sh->fds[i]) < 0)
			die("fdatasync");
	return NULL;
}

/* fdatasync fds[0..n) from nshares threads (the calling one among them) */
static void sync_shared(int *fds, long n)
{
	long nshares = n / PER_SHARE > SHARES_MAX ? SHARES_MAX : n / PER_SHARE;
	struct share sh[SHARES_MAX];
	pthread_t tid[SHARES_MAX];

	if (nshares < 2)
		nshares = 1;
	for (long k = 0; k < nshares; k++) {
		sh[k] = (struct share) { fds, n * k / nshares, n * (k + 1) / nshares };
		if (k > 0 && pthread_create(&tid[k], NULL, sync_share, &sh[k]))
			die("pthread_create");
	}
	sync_share(&sh[0]);
	for (long k = 1; k < nshares; k++)
		pthread_join(tid[k], NULL);
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *) a, y = *(const long long *) b;
	return x < y ? -1 : x > y;
}

/* One round of strategy s over n files; returns nanoseconds. */
static long long round_of(int s, int dirfd, long n, int *fds)
{
	char tmp[64], name[64];
	pthread_t *tids = NULL;
	long long t0 = now_ns();

	for (long i = 0; i < n; i++) {
		snprintf(tmp, sizeof tmp, "b%ld.tmp", i);
		snprintf(name, sizeof name, "b%ld", i);
		fds[i] = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fds[i] < 0)
			die("openat");
		if (write(fds[i], buf, size) != (ssize_t) size)
			die("write");
		if ((s == SFR || s == SHARES) && sync_file_range(fds[i], 0, 0, SYNC_FILE_RANGE_WRITE) < 0)
			die("sync_file_range");
		if (s == SINGLE) {
			if (fdatasync(fds[i]) < 0 || close(fds[i]) < 0)
				die("fdatasync/close");
			if (renameat(dirfd, tmp, dirfd, name) < 0)
				die("renameat");
			if (fsync(dirfd) < 0)
				die("fsync dir");
		}
	}
	if (s == SINGLE)
		return now_ns() - t0;
	if (s == PARALLEL) {
		tids = malloc(n * sizeof *tids);
		for (long i = 0; i < n; i++)
			if (pthread_create(&tids[i], NULL, sync_one, &fds[i]))
				die("pthread_create");
		for (long i = 0; i < n; i++)
			pthread_join(tids[i], NULL);
		free(tids);
	} else if (s == SHARES) {
		sync_shared(fds, n);
	} else if (s == SYNCFS) {
		if (syncfs(dirfd) < 0)
			die("syncfs");
	} else {
		for (long i = 0; i < n; i++)
			if (fdatasync(fds[i]) < 0)
				die("fdatasync");
	}
	for (long i = 0; i < n; i++) {
		snprintf(tmp, sizeof tmp, "b%ld.tmp", i);
		snprintf(name, sizeof name, "b%ld", i);
		if (close(fds[i]) < 0)
			die("close");
		if (renameat(dirfd, tmp, dirfd, name) < 0)
			die("renameat");
	}
	if (fsync(dirfd) < 0)
		die("fsync dir");
	return now_ns() - t0;
}

int main(int argc, char **argv)
{
	long n, rounds;
	int dirfd, *fds;
	long long *t[NSTRAT];

	if (argc != 5) {
		fprintf(stderr, "usage: barrier DIR SIZE N ROUNDS\n");
		return 2;
	}
	dir = argv[1];
	size = strtoull(argv[2], NULL, 10);
	n = atol(argv[3]);
	rounds = atol(argv[4]);
	if (n < 1 || rounds < 1 || !(buf = malloc(size ? size : 1))
	    || !(fds = malloc(n * sizeof *fds)))
		return 2;
	memset(buf, 'x', size);
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("open dir");
	for (int s = 0; s < NSTRAT; s++)
		if (!(t[s] = malloc(rounds * sizeof **t)))
			return 2;
	for (int s = 0; s < NSTRAT; s++)    /* warm up: the files exist after this */
		round_of(s, dirfd, n, fds);
	for (long r = 0; r < rounds; r++)
		for (int s = 0; s < NSTRAT; s++)
			t[s][r] = round_of(s, dirfd, n, fds);
	for (int s = 0; s < NSTRAT; s++) {
		qsort(t[s], rounds, sizeof **t, cmp_ll);
		printf("%s %.1f\n", names[s], t[s][rounds / 2] / 1e3 / n);
	}
	return 0;
}
