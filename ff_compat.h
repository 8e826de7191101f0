/* ff_compat.h - private to the perl-free core (ff_io.c, ff_batch.c): every
 * Linux-only call the core makes, and its POSIX fallback, in one place.
 * Include after the file's feature macros (_GNU_SOURCE), like any header.
 *
 * The Linux calls are used on Linux unless FF_PORTABLE is defined
 * (`perl Makefile.PL FF_PORTABLE=1`; Makefile.PL defines it off Linux too):
 * then every call below takes its fallback at compile time, so the fallbacks
 * can be tested on Linux. The POSIX.1-2008 calls the core needs everywhere
 * (openat, fstatat, renameat, link, fsync, O_CLOEXEC, O_DIRECTORY,
 * O_NOFOLLOW) have no fallback: Makefile.PL says "OS unsupported" without them.
 *
 *   ff_renameat_noreplace(fromfd, from, tofd, to), and ff_rename_noreplace(from, to)
 *                                  relative to the cwd: renameat2(RENAME_NOREPLACE);
 *                                  fallback: -1 with ENOSYS (the caller then links)
 *   ff_start_writeback(fd)         sync_file_range(WRITE); fallback: nothing
 *                                  (fdatasync does all the work later)
 *   ff_getrandom(buf, len)         getrandom(GRND_NONBLOCK); fallback: -1
 *                                  with ENOSYS (the caller mixes the clock)
 *   ff_fdatasync(fd)               fdatasync where POSIX's synchronized I/O
 *                                  is there, else fsync (more, never less)
 *   ff_acl_read/write/remove       preserve's ACL (an xattr); fallback:
 *                                  ENOTSUP (the mode alone is kept)
 *   ff_copy_file_range(in, out, len) copy_file_range between the fds'
 *                                  offsets: the kernel moves the bytes;
 *                                  fallback: -1 with ENOSYS (the caller
 *                                  reads and writes)
 *   ff_on_fuse(fd)                 fd is on FUSE (fstatfs, Linux); fallback: 0
 *   FF_O_PATH                      O_PATH (an fd only for *at calls and
 *                                  fstat: fsync on it is EBADF); fallback:
 *                                  O_RDONLY, which needs read permission on
 *                                  a directory
 *
 * FF_FEATURES tells which were built in (FF_FEATURE_* of ff_io.h). A new
 * Linux-only call gets its FF_HAVE_ and fallback here, never an #if in a .c. */
#ifndef FF_COMPAT_H
#define FF_COMPAT_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#if !defined(O_CLOEXEC) || !defined(O_DIRECTORY) || !defined(O_NOFOLLOW) || !defined(AT_FDCWD)
#error "FastFile needs POSIX.1-2008: O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW and the *at calls"
#endif

#if defined(__linux__) && !defined(FF_PORTABLE)
#define FF_LINUX 1
#else
#define FF_LINUX 0
#endif

#if FF_LINUX
#include <sys/syscall.h>
#endif

/* glibc's version test, safe in #if where there is no glibc (musl) */
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#define FF_GLIBC_AT_LEAST(maj, min) __GLIBC_PREREQ(maj, min)
#else
#define FF_GLIBC_AT_LEAST(maj, min) 0
#endif

/* renameat2: glibc declares it from 2.28 on; other Linux libcs (musl 1.2.3)
 * reach it by its syscall number. FF_NO_RENAMEAT2 and FF_NO_RENAMEAT2_SYSCALL
 * build as on a libc without either (t/01-core-build.t). */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)   /* the kernel's value (linux/fs.h) */
#endif
#if FF_LINUX && FF_GLIBC_AT_LEAST(2, 28) && !defined(FF_NO_RENAMEAT2)
#define FF_HAVE_RENAMEAT2 1
#define ff_renameat_noreplace(fromfd, from, tofd, to) \
    renameat2(fromfd, from, tofd, to, RENAME_NOREPLACE)
#elif FF_LINUX && defined(SYS_renameat2) && !defined(FF_NO_RENAMEAT2_SYSCALL)
#define FF_HAVE_RENAMEAT2 1
#define ff_renameat_noreplace(fromfd, from, tofd, to) \
    ((int)syscall(SYS_renameat2, fromfd, from, tofd, to, RENAME_NOREPLACE))
#else
#define FF_HAVE_RENAMEAT2 0
static inline int ff_renameat_noreplace(int fromfd, const char *from, int tofd, const char *to)
{
    (void)fromfd;
    (void)from;
    (void)tofd;
    (void)to;
    errno = ENOSYS;
    return -1;
}
#endif
#define ff_rename_noreplace(from, to) ff_renameat_noreplace(AT_FDCWD, from, AT_FDCWD, to)

#if FF_LINUX && defined(SYNC_FILE_RANGE_WRITE)
#define FF_HAVE_SYNC_FILE_RANGE 1
#define ff_start_writeback(fd) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)
#else
#define FF_HAVE_SYNC_FILE_RANGE 0
static inline int ff_start_writeback(int fd)
{
    (void)fd;
    return 0;
}
#endif

#if FF_LINUX && FF_GLIBC_AT_LEAST(2, 25)
#define FF_HAVE_GETRANDOM 1
#elif FF_LINUX && !defined(__GLIBC__) && defined(__has_include)
#if __has_include(<sys/random.h>)
#define FF_HAVE_GETRANDOM 1     /* musl 1.1.20 on */
#endif
#endif
#if defined(FF_HAVE_GETRANDOM)
#include <sys/random.h>
#define ff_getrandom(buf, len) getrandom(buf, len, GRND_NONBLOCK)
#else
#define FF_HAVE_GETRANDOM 0
static inline ssize_t ff_getrandom(void *buf, size_t len)
{
    (void)buf;
    (void)len;
    errno = ENOSYS;
    return -1;
}
#endif

/* fdatasync is POSIX, but optional (macOS declares none) */
#if (FF_LINUX || (defined(_POSIX_SYNCHRONIZED_IO) && _POSIX_SYNCHRONIZED_IO > 0)) \
    && !defined(FF_NO_FDATASYNC)
#define FF_HAVE_FDATASYNC 1
#define ff_fdatasync(fd) fdatasync(fd)
#else
#define FF_HAVE_FDATASYNC 0
#define ff_fdatasync(fd) fsync(fd)
#endif

#if FF_LINUX && defined(O_PATH)
#define FF_HAVE_O_PATH 1
#define FF_O_PATH O_PATH
#else
#define FF_HAVE_O_PATH 0
#define FF_O_PATH O_RDONLY
#endif

/* copy_file_range (Linux 4.5): glibc declares it from 2.27 on, other Linux
 * libcs (musl) reach it by its syscall number. FF_NO_COPY_FILE_RANGE builds
 * as on a libc without it. */
#if FF_LINUX && FF_GLIBC_AT_LEAST(2, 27) && !defined(FF_NO_COPY_FILE_RANGE)
#define FF_HAVE_COPY_FILE_RANGE 1
#define ff_copy_file_range(in, out, len) copy_file_range(in, NULL, out, NULL, len, 0)
#elif FF_LINUX && defined(SYS_copy_file_range) && !defined(FF_NO_COPY_FILE_RANGE)
#define FF_HAVE_COPY_FILE_RANGE 1
#define ff_copy_file_range(in, out, len) \
    ((ssize_t)syscall(SYS_copy_file_range, in, (void *)NULL, out, (void *)NULL, len, 0u))
#else
#define FF_HAVE_COPY_FILE_RANGE 0
static inline ssize_t ff_copy_file_range(int in, int out, size_t len)
{
    (void)in;
    (void)out;
    (void)len;
    errno = ENOSYS;
    return -1;
}
#endif

/* A file handle (name_to_handle_at, Linux 2.6.39): what NFS uses to tell
 * a file from a later one that got its inode number; ext4, xfs, btrfs and
 * tmpfs put the inode's generation in it, new for each inode made. Not
 * every filesystem gives one (overlayfs without nfs_export: EOPNOTSUPP);
 * FUSE's does not last (ff_file_handle_lasts).
 * FF_NO_FILE_HANDLE builds as without it. ff_file_handle_id: 0 with the
 * mount's id in *mnt and a 64-bit digest of the handle in *id, or -1 with
 * errno (ENOTSUP where the build has no handles). flags: 0 (a symlink is
 * not followed) or AT_EMPTY_PATH (dirfd itself, name ""). */
/* (glibc 2.14 on and musl declare it with MAX_HANDLE_SZ, under _GNU_SOURCE) */
#define FF_FUSE_SUPER_MAGIC 0x65735546     /* statfs f_type of FUSE (linux/magic.h) */

#if FF_LINUX && defined(MAX_HANDLE_SZ) && !defined(FF_NO_FILE_HANDLE)
#define FF_HAVE_FILE_HANDLE 1
static inline int ff_file_handle_id(int dirfd, const char *name, int flags, int *mnt,
                                    unsigned long long *id)
{
    union {
        struct file_handle fh;
        char room[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } h;
    const unsigned char *p;
    /* FNV-1a's step, a word at a time: each step is one-to-one in d, so
     * two handles that differ in one word (the generation) always differ
     * in the digest */
    unsigned long long w, d = 14695981039346656037ULL;
    unsigned i;

    h.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(dirfd, name, &h.fh, mnt, flags) < 0)
        return -1;
    d = (d ^ ((unsigned long long)h.fh.handle_bytes << 32 | (unsigned)h.fh.handle_type))
        * 1099511628211ULL;
    p = h.fh.f_handle;
    for (i = 0; i + sizeof w <= h.fh.handle_bytes; i += sizeof w) {
        memcpy(&w, p + i, sizeof w);
        d = (d ^ w) * 1099511628211ULL;
    }
    for (; i < h.fh.handle_bytes; i++)
        d = (d ^ p[i]) * 1099511628211ULL;
    *id = d;
    return 0;
}

/* 0 where dirfd/name is on FUSE: its handle is the server's node id,
 * which a server of the high-level libfuse (pmxcfs) gives anew when the
 * kernel has forgotten the inode (memory pressure, drop_caches) though
 * the file stayed, so the handle tells nothing there; 1 elsewhere, and
 * where statfs fails (the name is gone). */
#include <sys/vfs.h>
static inline int ff_file_handle_lasts(int dirfd, const char *name)
{
    struct statfs sf;

    if ((dirfd == AT_FDCWD ? statfs(name, &sf) : fstatfs(dirfd, &sf)) < 0)
        return 1;
    return sf.f_type != FF_FUSE_SUPER_MAGIC;
}
#else
#define FF_HAVE_FILE_HANDLE 0
#define ff_file_handle_lasts(dirfd, name) ((void)(dirfd), (void)(name), 1)
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0     /* (never passed to the kernel here) */
#endif
static inline int ff_file_handle_id(int dirfd, const char *name, int flags, int *mnt,
                                    unsigned long long *id)
{
    (void)dirfd;
    (void)name;
    (void)flags;
    (void)mnt;
    (void)id;
    errno = ENOTSUP;
    return -1;
}
#endif

/* 1 when fd is on a FUSE filesystem (fstatfs's f_type), 0 when not or
 * when it cannot tell: copy_file_range's user and the readers ask. */
#if FF_LINUX
#include <sys/vfs.h>
static inline int ff_on_fuse(int fd)
{
    struct statfs sf;

    return fstatfs(fd, &sf) == 0 && sf.f_type == FF_FUSE_SUPER_MAGIC;
}
#else
#define ff_on_fuse(fd) ((void)(fd), 0)
#endif

/* The lstat file type (S_IFMT bits) of name in dirfd (ff_stat_type with
 * flags AT_SYMLINK_NOFOLLOW; with 0 the stat type, symlinks followed).
 * Linux: statx with
 * AT_STATX_DONT_SYNC, which answers from the kernel's cache where it has
 * the entry: a FUSE or NFS server is asked nothing (fstatat sends a
 * GETATTR, the attributes being stale after every write). A file's type
 * never changes, so a cached one is right. AT_NO_AUTOMOUNT, which fstatat
 * always has: an automount point (autofs) is a directory, not mounted
 * (without it statx waits for the automount daemon, an NFS server). Before
 * Linux 4.11 (ENOSYS, or EINVAL from glibc's emulation, which refuses
 * AT_STATX_DONT_SYNC), under a seccomp filter that refuses statx (EPERM),
 * and elsewhere: fstatat.
 * Returns 0, or -1 with errno. */
#if FF_LINUX && FF_GLIBC_AT_LEAST(2, 28) && defined(STATX_TYPE) && defined(AT_STATX_DONT_SYNC) \
    && defined(AT_NO_AUTOMOUNT) && !defined(FF_NO_STATX)
#define FF_HAVE_STATX 1
#else
#define FF_HAVE_STATX 0
#endif
static inline int ff_stat_type(int dirfd, const char *name, int flags, mode_t *type)
{
    struct stat st;
#if FF_HAVE_STATX
    struct statx stx;

    if (statx(dirfd, name, flags | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) == 0) {
        if (stx.stx_mask & STATX_TYPE) {
            *type = stx.stx_mode & S_IFMT;
            return 0;
        }                       /* no type told: fstatat's */
    } else if (errno != ENOSYS && errno != EPERM && errno != EINVAL) {
        return -1;              /* EINVAL: glibc's own fallback refuses the flag */
    }
#endif
    if (fstatat(dirfd, name, &st, flags) < 0)
        return -1;
    *type = st.st_mode & S_IFMT;
    return 0;
}
#define ff_lstat_type(dirfd, name, type) ff_stat_type(dirfd, name, AT_SYMLINK_NOFOLLOW, type)

/* preserve's POSIX access ACL, which Linux keeps in an xattr. Fallback:
 * none read (ENOTSUP), so none is set or removed: the mode alone is kept. */
#if FF_LINUX
#include <sys/xattr.h>
#define FF_HAVE_ACL 1
#define FF_ACL_XATTR "system.posix_acl_access"
#define FF_ENOATTR ENODATA          /* the file has no ACL */
#define ff_acl_read(path, buf, size) lgetxattr(path, FF_ACL_XATTR, buf, size)
#define ff_acl_read_fd(fd, buf, size) fgetxattr(fd, FF_ACL_XATTR, buf, size)
#define ff_acl_write(fd, buf, size) fsetxattr(fd, FF_ACL_XATTR, buf, size, 0)
#define ff_acl_remove(fd) fremovexattr(fd, FF_ACL_XATTR)
#else
#define FF_HAVE_ACL 0
#define FF_ENOATTR ENOTSUP
static inline ssize_t ff_acl_read(const char *path, void *buf, size_t size)
{
    (void)path;
    (void)buf;
    (void)size;
    errno = ENOTSUP;
    return -1;
}
#define ff_acl_read_fd(fd, buf, size) ((void)(fd), (void)(buf), (void)(size), errno = ENOTSUP, -1)
#define ff_acl_write(fd, buf, size) ((void)(fd), (void)(buf), (void)(size), errno = ENOTSUP, -1)
#define ff_acl_remove(fd) ((void)(fd), errno = ENOTSUP, -1)
#endif

#define FF_FEATURES                                                 \
    ((FF_LINUX ? 0 : FF_FEATURE_PORTABLE)                           \
     | (FF_HAVE_RENAMEAT2 ? FF_FEATURE_RENAMEAT2 : 0)               \
     | (FF_HAVE_SYNC_FILE_RANGE ? FF_FEATURE_SYNC_FILE_RANGE : 0)   \
     | (FF_HAVE_GETRANDOM ? FF_FEATURE_GETRANDOM : 0)               \
     | (FF_HAVE_FDATASYNC ? FF_FEATURE_FDATASYNC : 0)               \
     | (FF_HAVE_O_PATH ? FF_FEATURE_O_PATH : 0)                     \
     | (FF_HAVE_ACL ? FF_FEATURE_ACL : 0)                           \
     | (FF_HAVE_STATX ? FF_FEATURE_STATX : 0)                       \
     | (FF_HAVE_COPY_FILE_RANGE ? FF_FEATURE_COPY_FILE_RANGE : 0)   \
     | (FF_HAVE_FILE_HANDLE ? FF_FEATURE_FILE_HANDLE : 0))

#endif
