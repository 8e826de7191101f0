/*
 * bare - the floor for bench/compare.pl: the four syscalls of an atomic
 * whole-file write (open, write, close, rename) in a loop, nothing else.
 * compare.pl builds it on the fly (cc -O2) into a temp dir.
 *
 *   bare time  FILE SIZE N   one untimed call, then N timed calls;
 *                            prints the nanoseconds the N calls took
 *   bare serve FILE SIZE 0   one untimed call, then for each number N read
 *                            from stdin, N timed calls and their
 *                            nanoseconds on stdout (one process for all
 *                            of compare.pl's batches)
 *   bare serve-cpu FILE SIZE 0  serve, timed by this thread's CPU time
 *                            (CLOCK_THREAD_CPUTIME_ID) instead of the
 *                            wall clock: time preempted by other work on
 *                            a busy machine is not counted (vsbare.pl)
 *   bare trace FILE SIZE N   one untimed call, then N calls between two
 *                            marker syscalls (chdir to /bare-mark-start and
 *                            /bare-mark-end) that strace can find
 *   bare rss   FILE SIZE N   N calls (0: just fill the buffer), then prints
 *                            the peak RSS in KiB (VmHWM)
 *   bare spread FILE SIZE N K  like time, but the calls go round K files
 *                            FILE.0 .. FILE.K-1 (at most 64; bench/batch.pl:
 *                            the loop a batch of K distinct files replaces)
 *   bare staged FILE SIZE N K  the same N writes of K files in a batch's
 *                            order: K temps created and written, then K
 *                            renames (no target replaced before every temp
 *                            is written, file_set_contents_many's promise),
 *                            repeated; prints the nanoseconds of the N writes
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *file;
static char tmp[4096];
static char suffix[32];         /* ".tmp.<pid>", made once, as FastFile caches it */
static size_t suffix_len;
#define SPREAD 64
static char spread_file[SPREAD][4096], spread_tmp[SPREAD][4096];
static char *buf;
static size_t size;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "bare: %s '%s': %s\n", what, path, strerror(errno));
	exit(1);
}

static void write_temp(void)
{
	size_t off = 0;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0)
		die("open", tmp);
	while (off < size) {
		ssize_t n = write(fd, buf + off, size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write", tmp);
		off += n;
	}
	if (close(fd) < 0)
		die("close", tmp);
}

static void publish(void)
{
	if (rename(tmp, file) < 0)
		die("rename", file);
}

/* the temp's name from the file's, each call, as FastFile builds it (it is
 * given a name per call) */
static void name_temp(void)
{
	size_t len = strlen(file);

	memcpy(tmp, file, len);
	memcpy(tmp + len, suffix, suffix_len + 1);
}

static void one_call(void)
{
	name_temp();
	write_temp();
	publish();
}

/* the k-th of the spread files becomes the current file */
static void use_spread(int k)
{
	file = spread_file[k];
	strcpy(tmp, spread_tmp[k]);
}

static clockid_t clock_id = CLOCK_MONOTONIC;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(clock_id, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void print_hwm(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		die("fopen", "/proc/self/status");
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			printf("%lld\n", atoll(line + 6));
	fclose(f);
}

int main(int argc, char **argv)
{
	const char *mode;
	long n;

	int k_files = argc > 5 ? atoi(argv[5]) : SPREAD;

	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: bare time|serve|serve-cpu|trace|rss FILE SIZE N | spread|staged FILE SIZE N K\n");
		return 2;
	}
	if (k_files < 1 || k_files > SPREAD) {
		fprintf(stderr, "bare: K from 1 to %d\n", SPREAD);
		return 2;
	}
	mode = argv[1];
	file = argv[2];
	size = strtoull(argv[3], NULL, 10);
	n = atol(argv[4]);
	suffix_len = (size_t) snprintf(suffix, sizeof suffix, ".tmp.%d", (int) getpid());
	if (strlen(file) + suffix_len >= sizeof tmp) {
		fprintf(stderr, "bare: name too long\n");
		return 2;
	}
	if (!(buf = malloc(size ? size : 1)))
		die("malloc", "");
	memset(buf, 'x', size);

	if (strcmp(mode, "time") == 0) {
		long long t0;
		one_call();
		t0 = now_ns();
		for (long i = 0; i < n; i++)
			one_call();
		printf("%lld\n", now_ns() - t0);
	} else if (strcmp(mode, "serve") == 0 || strcmp(mode, "serve-cpu") == 0) {
		char line[64];
		if (strcmp(mode, "serve-cpu") == 0)
			clock_id = CLOCK_THREAD_CPUTIME_ID;
		one_call();
		while (fgets(line, sizeof line, stdin)) {
			long long t0;
			n = atol(line);
			t0 = now_ns();
			for (long i = 0; i < n; i++)
				one_call();
			printf("%lld\n", now_ns() - t0);
			fflush(stdout);
		}
	} else if (strcmp(mode, "trace") == 0) {
		one_call();
		if (chdir("/bare-mark-start") == 0)
			return 3;
		for (long i = 0; i < n; i++)
			one_call();
		if (chdir("/bare-mark-end") == 0)
			return 3;
	} else if (strcmp(mode, "spread") == 0 || strcmp(mode, "staged") == 0) {
		long long t0;
		const char *name = file;
		int staged = strcmp(mode, "staged") == 0;
		for (int k = 0; k < k_files; k++) {
			snprintf(spread_file[k], sizeof spread_file[k], "%s.%d", name, k);
			snprintf(spread_tmp[k], sizeof spread_tmp[k], "%s.tmp.%d", spread_file[k], (int) getpid());
		}
		for (int k = 0; k < k_files; k++) {   /* untimed: the files exist */
			use_spread(k);
			one_call();
		}
		t0 = now_ns();
		for (long i = 0; i < n; i += k_files) {
			int round = n - i < k_files ? (int) (n - i) : k_files;
			for (int k = 0; k < round; k++) {
				use_spread(k);
				if (staged)
					write_temp();
				else
					one_call();
			}
			for (int k = 0; staged && k < round; k++) {
				use_spread(k);
				publish();
			}
		}
		printf("%lld\n", now_ns() - t0);
	} else if (strcmp(mode, "rss") == 0) {
		for (long i = 0; i < n; i++)
			one_call();
		print_hwm();
	} else {
		fprintf(stderr, "bare: unknown mode '%s'\n", mode);
		return 2;
	}
	return 0;
}
