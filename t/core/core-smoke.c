/* t/core/core-smoke.c - the perl-free core on its own, against whatever libc
 * it is linked with (glibc, musl): atomic replace (plain, fsync, noclobber,
 * mkdir), mkdir -p and a batch with fsync, each checked by reading the files
 * back. Built and run by t/02-core-run.t; prints one "ok"/"not ok" line per
 * check, then "libc ..." and "features ..." (what the build uses, ff_compat.h).
 *
 * usage: core-smoke DIR   (an empty directory; left empty again) */
#define _POSIX_C_SOURCE 200809L

#include "../../ff_batch.h"
#include "../../ff_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct ff_eintr no_handler = { NULL, NULL, NULL };

static int failures;

static void check(int ok, const char *what, const char *path)
{
    printf("%s - %s: %s\n", ok ? "ok" : "not ok", what, path);
    failures += !ok;
}

/* 1 when path holds exactly want */
static int holds(const char *path, const char *want)
{
    char buf[256];
    size_t len = strlen(want);
    ssize_t got;
    int fd = open(path, O_RDONLY);

    if (fd < 0)
        return 0;
    got = read(fd, buf, sizeof buf);
    close(fd);
    return got >= 0 && (size_t)got == len && memcmp(buf, want, len) == 0;
}

/* a regular file (one link: no temp name left on it) or a directory */
static int mode_is(const char *path, mode_t mode)
{
    struct stat st;

    return lstat(path, &st) == 0 && (st.st_mode & 07777) == mode
           && (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink == 1));
}

/* one file_set_contents: the same calls as FastFile.xs makes */
static int set_contents(const char *path, const char *data, const struct ff_options *opt)
{
    struct ff_atomic a;
    int err = ff_atomic_init(&a, path, opt, &no_handler);

    if (!err)
        err = ff_atomic_prepare(&a);
    if (!err)
        err = ff_atomic_create(&a, (long)getpid());
    if (!err)
        err = ff_write_all(a.fd, data, strlen(data), &no_handler);
    if (!err)
        err = ff_atomic_commit(&a);
    ff_atomic_discard(&a);
    return err;
}

/* nothing but the names given is left in dir */
static int only(const char *dir, const char *const *names, size_t n)
{
    char path[4096];
    size_t i;
    int count = 0;

    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        count += access(path, F_OK) == 0;
    }
    snprintf(path, sizeof path, "%s/f.tmp.%ld", dir, (long)getpid());
    return count == (int)n && access(path, F_OK) != 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : NULL;
    char f[4096], g[4096], deep[4096], made[4096], batch[3][4096];
    struct ff_options opt;
    struct ff_batch b;
    unsigned features = ff_features();
    int err, levels, i;

    if (!dir) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    umask(022);
    snprintf(f, sizeof f, "%s/f", dir);
    snprintf(g, sizeof g, "%s/g", dir);
    snprintf(deep, sizeof deep, "%s/a/b/c/deep", dir);

    /* atomic replace: new, then over the old one, with fsync */
    memset(&opt, 0, sizeof opt);
    opt.perm = 0640;
    err = set_contents(f, "first\n", &opt);
    check(!err && holds(f, "first\n") && mode_is(f, 0640), "new file, mode 0640", f);
    opt.fsync = 1;
    err = set_contents(f, "second\n", &opt);
    check(!err && holds(f, "second\n"), "replaced with fsync", f);

    /* noclobber: a new name is created, an existing one is left alone */
    memset(&opt, 0, sizeof opt);
    opt.perm = 0644;
    opt.noclobber = 1;
    err = set_contents(g, "new\n", &opt);
    check(!err && holds(g, "new\n") && mode_is(g, 0644), "noclobber creates (one link)", g);
    err = set_contents(f, "third\n", &opt);
    check(err == EEXIST && holds(f, "second\n"), "noclobber leaves the existing file (EEXIST)", f);

    /* mkdir: the missing parents, then the file */
    memset(&opt, 0, sizeof opt);
    opt.perm = 0600;
    opt.mkdir = 1;
    opt.fsync = 1;
    err = set_contents(deep, "deep\n", &opt);
    check(!err && holds(deep, "deep\n") && mode_is(deep, 0600), "mkdir option: a/b/c made", deep);

    /* ff_mkdir_p itself: two levels under an existing one */
    snprintf(made, sizeof made, "%s/a/x/y", dir);
    snprintf(g, sizeof g, "%s", made);
    err = ff_mkdir_p(made, &levels, &no_handler);
    check(!err && levels == 2 && strcmp(made, g) == 0, "ff_mkdir_p made 2 levels, path mended", made);
    check(mode_is(made, 0755), "ff_mkdir_p: mode 0755 under umask 022", made);
    snprintf(g, sizeof g, "%s/g", dir);

    /* a batch with fsync: two files in the top directory, one below */
    memset(&opt, 0, sizeof opt);
    opt.perm = 0644;
    opt.fsync = 1;
    snprintf(batch[0], sizeof batch[0], "%s/f", dir);
    snprintf(batch[1], sizeof batch[1], "%s/h", dir);
    snprintf(batch[2], sizeof batch[2], "%s/a/b/c/deep", dir);
    err = ff_batch_init(&b, 3, &opt, &no_handler);
    for (i = 0; i < 3 && !err; i++)
        err = ff_batch_add(&b, batch[i], batch[i], strlen(batch[i]));
    if (!err)
        err = ff_batch_commit(&b, (long)getpid());
    check(!err && b.written == 3 && !ff_batch_has_work(&b), "batch with fsync: 3 written", dir);
    ff_batch_discard(&b);
    for (i = 0; i < 3; i++)
        check(holds(batch[i], batch[i]), "batch: file holds its own path", batch[i]);
    {
        static const char *const names[] = { "f", "g", "h", "a/b/c/deep", "a/x/y" };
        check(only(dir, names, 5), "no temp left", dir);
    }

    /* leave dir empty */
    unlink(batch[0]);
    unlink(batch[1]);
    unlink(batch[2]);
    unlink(g);
    snprintf(made, sizeof made, "%s/a/x/y", dir);
    rmdir(made);
    snprintf(made, sizeof made, "%s/a/x", dir);
    rmdir(made);
    snprintf(made, sizeof made, "%s/a/b/c", dir);
    rmdir(made);
    snprintf(made, sizeof made, "%s/a/b", dir);
    rmdir(made);
    snprintf(made, sizeof made, "%s/a", dir);
    rmdir(made);

#ifdef __GLIBC__
    printf("libc glibc\n");
#else
    printf("libc not glibc\n");     /* musl defines no macro of its own */
#endif
    printf("features%s%s%s%s%s%s\n",
           features & FF_FEATURE_PORTABLE ? " portable" : "",
           features & FF_FEATURE_RENAMEAT2 ? " renameat2" : "",
           features & FF_FEATURE_SYNC_FILE_RANGE ? " sync_file_range" : "",
           features & FF_FEATURE_GETRANDOM ? " getrandom" : "",
           features & FF_FEATURE_FDATASYNC ? " fdatasync" : "",
           features & FF_FEATURE_O_PATH ? " O_PATH" : "");
    return failures ? 1 : 0;
}
