/* ff_io.h - the perl-free I/O core of FastFile.
 *
 * Functions return 0 on success or an errno value. An atomic replacement is
 * a struct ff_atomic, made in this order:
 *   ff_atomic_init       paths and options copied, nothing touched
 *   ff_atomic_prepare    symlinks followed, the old target looked at
 *   ff_atomic_unchanged  if_changed: the target holds the bytes already, done
 *   ff_atomic_create     the temp "<target>.tmp.<pid>" (parents with mkdir)
 *   write or buffer      ff_write_all / ff_write_tail_all, or the streaming
 *                        writer's struct ff_wbuf (one write(2) each time it
 *                        is full, ff_wbuf_flush for the rest)
 *   ff_atomic_commit     preserve's owner and mode, fsync's fdatasync, close,
 *                        pending signal handlers, rename, fsync of the dir
 * and ff_atomic_discard for cleanup: it removes whatever is still ours. The
 * caller (the XS glue: xs_common.c's start_write, or file_set_contents'
 * own destructor, registered before init with a->target NULL) has discard
 * run however it ends, so a croak or a die from a signal handler inside an
 * ff_on_eintr callback leaves nothing behind. ff_batch.h does the same for
 * many files at once.
 */
#ifndef FF_IO_H
#define FF_IO_H

#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Only boot_FastFile leaves FastFile.so: calls between our files then
 * need no PLT, and no other module can see or replace these names. */
#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)
#endif

/* The functions a plain file_set_contents runs, together: GCC places them
 * in .text.hot, which the linker lays out as one block, so the call's code
 * spans two pages instead of nine. Where the kernel flushes the TLB on
 * every syscall (page-table isolation without PCID) each page touched is
 * looked up again after each of the call's four syscalls. Error paths stay
 * where they are (GCC moves a hot function's unlikely blocks to
 * .text.unlikely). Elsewhere (clang, other compilers) it is nothing. */
#if defined(__GNUC__) && !defined(__clang__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 3))
#define FF_HOT __attribute__((hot))
#else
#define FF_HOT
#endif

/* Called when a syscall returned EINTR, before it is retried, after a short
 * write, between the syscalls of a loop when a signal is pending (see
 * pending below), and once in ff_atomic_commit between close and rename (signals that
 * came during the write are handled before the file is published). It runs
 * pending signal handlers and makes no syscall; it may not return (a perl
 * signal handler that dies unwinds through it). It returns nonzero when a
 * signal was pending: FF_EINTR_SPINS_MAX EINTRs in a row with none (or
 * without a callback) fail the call with EINTR. */
typedef int (*ff_on_eintr)(void *ctx);

/* EINTRs in a row, with no signal pending, before a syscall fails with
 * EINTR. A real signal is always pending when it interrupts us (perl's
 * handler marks it before the syscall returns) and resets the count; an
 * EINTR without one comes from the filesystem (a FUSE server, NFS "intr")
 * or a ptrace stop, and a transient one clears in a retry or two. 100
 * leaves a wide margin for that and still ends a server that says EINTR
 * forever after 100 quick calls (microseconds locally, 100 round trips on
 * FUSE), instead of spinning at full CPU. */
#define FF_EINTR_SPINS_MAX 100

struct ff_eintr {
    ff_on_eintr fn;
    void *ctx;
    /* perl's count of signals caught but not yet handled (&PL_sig_pending),
     * or NULL: then fn only runs where said above. A signal that comes
     * while a syscall completes is caught without EINTR; perl dies inside
     * its C signal handler once 120 wait ("Maximal count of pending
     * signals"), so a loop that may make many syscalls polls it
     * (ff_poll_signals). */
    const volatile int *pending;
};

/* In a loop of syscalls: the pending signal handlers run now (fn), at a
 * point where the state is as on EINTR there (what discard needs noted).
 * One load and a branch when nothing is pending. */
static inline void ff_poll_signals(const struct ff_eintr *intr)
{
    if (intr && intr->pending && *intr->pending)
        intr->fn(intr->ctx);
}

struct ff_options {
    mode_t perm;                 /* for a new file, filtered by the umask */
    unsigned fsync : 1;          /* fdatasync the temp, fsync the directory */
    unsigned preserve : 1;       /* copy mode and owner of the replaced file */
    unsigned if_changed : 1;     /* leave an identical target alone */
    unsigned mkdir : 1;          /* create missing parent directories */
    unsigned follow_symlinks : 1;/* replace the file a symlink points to */
    unsigned noclobber : 1;      /* fail if the target exists */
    /* not a user's option: a relative temp is made, renamed and removed
     * in the working directory of the call, held (the writer's, which
     * user code can reach between its calls) */
    unsigned hold_cwd : 1;
    /* not an option: set where hold_cwd held the working directory in
     * a->dirfd (0 from the caller) */
    unsigned cwd_held : 1;
};

/* Which step failed: the glue words its message after it. */
enum ff_step {
    FF_STEP_NONE,
    FF_STEP_RESOLVE,   /* following symlinks (target) */
    FF_STEP_STAT,      /* looking at the old target (target) */
    FF_STEP_PRESERVE,  /* preserve: another user's file in a sticky directory (target) */
    FF_STEP_MKDIR,     /* creating parent directories (target) */
    FF_STEP_OPEN,      /* creating the temp (temp) */
    FF_STEP_OWNER,     /* preserve: fchown (temp) */
    FF_STEP_MODE,      /* preserve: fchmod (temp) */
    FF_STEP_WRITE,     /* (temp) */
    FF_STEP_SYNC,      /* fdatasync (temp) */
    FF_STEP_CLOSE,     /* (temp) */
    FF_STEP_RENAME,    /* (target) */
    FF_STEP_NOCLOBBER, /* no way to rename without replacing (target) */
    FF_STEP_SYNC_DIR,  /* fsync of the directory (target) */
    FF_STEP_TEMP_GONE, /* the temp is no longer the file made (temp) */
    FF_STEP_TEMP_WRITTEN, /* the temp no longer holds the bytes written (temp) */
    FF_STEP_TEMP_CHECK /* the temp could not be looked at or read back (temp) */
};

struct ff_atomic {
    struct ff_options opt;
    const struct ff_eintr *intr;
    char *target;      /* the path replaced: the name given, or where its symlinks lead */
    size_t target_len; /* strlen(target) */
    char *temp;        /* target + ".tmp.<pid>" [+ ".<random>"] */
    /* The single call's and the batch's paths without the heap
     * (ff_atomic_init_lent; the batch names its temps in a block of its own):
     * target is the caller's string until symlinks replace it, temp in the
     * caller's buffer when it fits. Neither is freed then. */
    char *temp_buf;    /* FF_TEMP_BUF bytes of the caller's (a batch: temp's slot), or NULL */
    int target_lent;   /* target is the caller's, not ours to free */
    int fd;            /* the temp's fd, -1 once closed */
    int created;       /* 1 while the file at temp is ours to remove */
    int have_old;      /* old holds the stat of an existing regular target */
    long pid;          /* the process that created temp (its name has it) */
    /* What a step holds while it may be interrupted: a die from a signal
     * handler skips the step's own release, discard does it instead. */
    int step_fd;       /* if_changed's compare fd, fsync's directory fd; or -1 */
    int dirs_made;     /* mkdir: directory levels made, synced with fsync */
    char *step_mem;    /* if_changed's compare buffer, a directory path; or NULL */
    char *acl;         /* preserve: the old file's access ACL (xattr), or NULL */
    size_t acl_len;
    int acl_none;      /* preserve: the filesystem has ACLs, the old file none */
    enum ff_step step; /* the step that failed */
    /* The temp's identity, noted before user code (a signal handler, code
     * between the writer's calls) could run while it exists: that code may
     * replace the temp by name, so the rename, and the cleanup's unlink,
     * first check the name still is this file (ff_atomic_temp_ours).
     * FF_ID_HANDLE: its file handle too (id_mnt, id_handle), which a file
     * that got the same inode number after the temp was removed does not
     * have (ext4 and xfs give a freed number again at once). */
    int have_id;
    /* Where the temp is made, renamed and removed: AT_FDCWD (set by
     * init), or with opt.cwd_held the working directory held open
     * (opt.hold_cwd: the writer's relative temp) from before the temp is
     * made, so that no chdir, user code's or another thread's, moves its
     * creation, rename or removal (in have_id's padding: init's memset is
     * no longer). The owner closes it after the last discard
     * (ff_atomic_release_cwd). */
    int dirfd;
    /* What the temp must hold after user code ran, checked before its
     * rename (ff_atomic_temp_publishable), so that code's writes into it
     * by name are not published: FF_VERIFY_DATA, where the caller has all
     * the bytes (the single call, the batch: data, then data_tail), read
     * back and compared; FF_VERIFY_SIZE (the writer, which keeps no copy),
     * its size is written_len, where its own fd ended ('>' or '>>' change
     * the size; a write that keeps it is not seen); else 0. */
    int verify;
    dev_t id_dev;
    ino_t id_ino;
    /* old and what follows: init leaves them as they are (not zeroed:
     * the plain call's memset is shorter); each is read only under a
     * field above (have_old, have_id, verify) set with it */
    struct stat old;
    int id_mnt;        /* FF_ID_HANDLE: the mount's id */
    unsigned long long id_handle;  /* FF_ID_HANDLE: digest of the file handle */
    const char *data;  /* FF_VERIFY_DATA */
    const char *data_tail;
    size_t data_len;
    size_t data_tail_len;
    int data_preserve; /* FF_VERIFY_DATA: the temp gets the old file's mode */
    unsigned long long written_len;    /* FF_VERIFY_SIZE */
};

/* have_id: how the temp's identity was noted */
#define FF_ID_INODE  1  /* device and inode number (no file handle here) */
#define FF_ID_HANDLE 2  /* those and the file handle (ff_file_handle_id) */
/* verify: what else is checked */
#define FF_VERIFY_DATA 1
#define FF_VERIFY_SIZE 2

/* Bytes a temp path needs beyond "<target>.tmp.<pid>" for a random suffix. */
#define FF_TEMP_SUFFIX_MAX 18   /* "." + 16 hex digits + NUL */
/* Bytes "<target>.tmp.<pid>.<random>" needs beyond the target's length. */
#define FF_TEMP_EXTRA (sizeof ".tmp." + 3 * sizeof(long) + FF_TEMP_SUFFIX_MAX)
/* A temp buffer that holds the temp of any target the kernel accepts
 * (PATH_MAX, with its NUL); a longer one is allocated (open then fails
 * with ENAMETOOLONG, and the message names it). */
#define FF_TEMP_BUF (4096 + FF_TEMP_EXTRA)
/* How many random names are tried after the plain temp name exists. */
#define FF_TEMP_TRIES 16
/* Symlinks followed before ELOOP, as the kernel does. */
#define FF_MAX_SYMLINKS 40

/* Prepare an atomic replacement of path (copied). Nothing is touched yet.
 * Returns 0 or ENOMEM. */
int ff_atomic_init(struct ff_atomic *a, const char *path, const struct ff_options *opt,
                   const struct ff_eintr *intr);

/* ff_atomic_init without copying path: it must outlive a (until
 * ff_atomic_discard); the temp name is made in temp_buf (FF_TEMP_BUF
 * bytes, living as long) when it fits. No heap for the usual call.
 * Cannot fail. */
void ff_atomic_init_lent(struct ff_atomic *a, const char *path, size_t path_len,
                         const struct ff_options *opt, const struct ff_eintr *intr,
                         char *temp_buf);

/* Follow symlinks (follow_symlinks) and lstat the old target (preserve,
 * if_changed). */
int ff_atomic_prepare(struct ff_atomic *a);

/* if_changed: 1 when the target already holds exactly buf[0..len) followed
 * by tail[0..tail_len), else 0.
 * Errors while looking are not errors: the file is then rewritten. */
int ff_atomic_unchanged(struct ff_atomic *a, const char *buf, size_t len, const char *tail,
                        size_t tail_len);

/* Create the temp "<target>.tmp.<pid>" (missing directories first with the
 * mkdir option). */
int ff_atomic_create(struct ff_atomic *a, long pid);
/* The same with ".tmp.<pid>" made already (ff_temp_suffix): suffix_len
 * bytes, at most FF_PID_SUFFIX_MAX - 1. */
int ff_atomic_create_named(struct ff_atomic *a, long pid, const char *suffix, size_t suffix_len);
/* ".tmp.<pid>" at out (FF_PID_SUFFIX_MAX bytes), NUL-terminated; returns
 * its length. */
#define FF_PID_SUFFIX_MAX (sizeof ".tmp." + 3 * sizeof(long) + 1)
size_t ff_temp_suffix(char *out, long pid);

/* The old file's owner and mode (preserve), fdatasync (fsync), close, the
 * intr callback (pending signal handlers), rename or no-clobber link,
 * directory fsync (fsync). Relative names from a->dirfd: the directory
 * held (opt.hold_cwd, ff_atomic_pin_cwd), else the working directory. */
int ff_atomic_commit(struct ff_atomic *a);
/* The same where a->dirfd is held from the start (the writer's). */
int ff_atomic_commit_held(struct ff_atomic *a);

/* User code (a signal handler) is about to run in the middle of a call:
 * a relative target's working directory is held from now on in a->dirfd
 * (O_PATH), so that a chdir of that code moves none of the call's later
 * steps (the temp's open, mkdir, rename or link, the directory's fsync,
 * the temp's removal): they stay where the call started. Once; nothing
 * when held already, the target absolute, a NULL or not set up yet.
 * Without O_PATH, a directory it may not read: nothing held (the call goes
 * on as before). No fd left (EMFILE): it returns that errno
 * (FF_OUT_OF_FDS), and the caller fails the call before the handlers run.
 * Else 0. Costs nothing to a call no handler reaches; the owner calls
 * ff_atomic_release_cwd after its last discard. */
int ff_atomic_pin_cwd(struct ff_atomic *a);

/* "." opened for lookups only (O_PATH where the build has it), close on
 * exec, EINTR retried: the one way FastFile holds its working directory.
 * 0, or the errno. */
int ff_open_cwd(int *fd);

/* The working directory that the caller held (ff_open_cwd) before a was
 * set up (file_copy's read of its source, when handlers ran there): with a
 * relative target a takes it over as a->dirfd (every step of a in it, a
 * closes it: ff_atomic_release_cwd) and *fd becomes -1; with an absolute
 * one (or a holding one already) it stays the caller's. */
void ff_atomic_adopt_cwd(struct ff_atomic *a, int *fd);

/* No fd (or memory) for a hold: the handlers may not run in the middle of
 * the call (their chdir would move its rest, and leave its temp behind):
 * ff_atomic_pin_cwd and ff_tempfile_hold_cwd return these, the call fails
 * with them. */
#define FF_OUT_OF_FDS(err) ((err) == EMFILE || (err) == ENFILE || (err) == ENOMEM)

/* Close the directory held, after the last discard (which may still need
 * it to remove the temp). Safe to call again, or with none held. */
void ff_atomic_close_cwd(struct ff_atomic *a);
static inline void ff_atomic_release_cwd(struct ff_atomic *a)
{
    if (a->opt.cwd_held)
        ff_atomic_close_cwd(a);
}

/* Close and unlink whatever is still ours and free the paths and what a
 * step holds; keeps errno. Safe to call more than once. A forked child that
 * unwinds a copy of the parent's atomic calls ff_atomic_forget first: it
 * closes its copies of the fds but leaves the parent's temp file alone. */
void ff_atomic_discard(struct ff_atomic *a);

/* 1 when discard has nothing to close, remove or free in a (a call that
 * succeeded): a batch asks it of each file before calling discard. */
static inline int ff_atomic_holds_nothing(const struct ff_atomic *a)
{
    return a->fd < 0 && !a->created && a->step_fd < 0 && !a->step_mem && !a->acl
           && a->target_lent && a->temp == a->temp_buf;
}
void ff_atomic_forget(struct ff_atomic *a);

/* The part of discard that closes the temp's fd and removes the temp
 * (if still the file made); the paths stay, for an error message. Keeps
 * errno. */
void ff_atomic_remove_temp(struct ff_atomic *a);

/* Note the temp's identity (device, inode, and the file handle where the
 * filesystem gives one) unless noted already: from its fd while open, else
 * from its name (relative to dirfd; AT_FDCWD: a->temp as given), which is
 * still ours as long as no user code has run since it was made. Call it
 * before user code may run while the temp exists; no intr callback runs. A
 * temp that cannot be looked at gets an identity no file has: it is then
 * never renamed nor removed. */
void ff_atomic_note_temp(struct ff_atomic *a, int dirfd, const char *name);

/* 0 when no identity was noted (no user code ran since the temp was made)
 * or name (relative to dirfd) still is that file: its file handle (one
 * name_to_handle_at) where one was noted, else its device and inode (one
 * fstatat); ESTALE, with a->step FF_STEP_TEMP_GONE, where it is another
 * file or none; the errno of the look, with a->step FF_STEP_TEMP_CHECK,
 * where it failed otherwise (EIO, ENOMEM, EACCES: we cannot tell). No
 * intr callback runs. */
int ff_atomic_temp_ours(struct ff_atomic *a, int dirfd, const char *name);

/* What the rename of a temp needs after user code ran: it still is the
 * file made (ff_atomic_temp_ours), and with FF_VERIFY_DATA it holds
 * exactly a->data then a->data_tail, read back by name, with
 * FF_VERIFY_SIZE its size is a->written_len (no further syscall where
 * the identity's fstatat has it, else one fstatat). No user code runs
 * between these and the rename: the caller's callback is not called.
 * 0 only where each check was made and passed; ESTALE with a->step
 * FF_STEP_TEMP_GONE or FF_STEP_TEMP_WRITTEN where one failed; where one
 * could not be made (the read back's open or read failed, ENOMEM), its
 * errno with a->step FF_STEP_TEMP_CHECK: never taken as passed. A temp
 * the call made without the owner's read bit (perm 0200, or preserve's
 * old mode), which a normal user may not open, is checked by its
 * identity and size.
 * Nothing at all where no user code ran (have_id 0). */
int ff_atomic_temp_publishable(struct ff_atomic *a, int dirfd, const char *name);

/* The bytes the temp must hold (data, then tail; they must live until
 * the rename): read back before it, after user code ran (FF_VERIFY_DATA).
 * preserve: the call's (the old file's mode is the temp's at its rename). */
static inline void ff_atomic_verify_data(struct ff_atomic *a, const char *data, size_t len,
                                         const char *tail, size_t tail_len, int preserve)
{
    a->data_preserve = preserve;
    a->verify = FF_VERIFY_DATA;
    a->data = data;
    a->data_len = len;
    a->data_tail = tail;
    a->data_tail_len = tail_len;
}

/* Where nothing keeps the bytes written (the writer): the temp must be
 * as long as its fd's offset now (one lseek), checked with its identity
 * before the rename (FF_VERIFY_SIZE). Code that wrote into it by name with
 * '>' or '>>' made it longer or shorter. 0, or lseek's errno with a->step
 * FF_STEP_TEMP_CHECK. */
int ff_atomic_expect_fd_end(struct ff_atomic *a);

/* write(2) all of buf, retrying short writes and EINTR. A write that
 * returns 0 is reported as ENOSPC. */
int ff_write_all(int fd, const char *buf, size_t len, const struct ff_eintr *intr);

/* buf[0..len) then tail[0..tail_len) (perl's $\): one writev(2) of both,
 * the rest of a short writev with write(2). Without a tail, ff_write_all. */
int ff_write_tail_all(int fd, const char *buf, size_t len, const char *tail, size_t tail_len,
                      const struct ff_eintr *intr);

/* The streaming writer's buffer. Zeroed, with size set, it is empty and
 * holds no memory: buf is allocated as it fills, doubling from
 * FF_WBUF_FIRST_CAP, never past size. ff_wbuf_init can lend it its first
 * memory instead (the writer's own block): used until it is full, never
 * freed here. */
struct ff_wbuf {
    char *buf;
    size_t len;        /* bytes waiting */
    size_t cap;        /* bytes allocated */
    size_t size;       /* buffer_size: one write(2) each time len reaches it */
    char *first;       /* the lent first memory, or NULL: buf is ours to free unless it is this */
};

#define FF_WBUF_FIRST_CAP 8192

/* An empty buffer of size (>= 1) that starts in first[0..first_cap), the
 * caller's memory (living as long as b is used), or with first NULL on the
 * heap when it first fills. */
void ff_wbuf_init(struct ff_wbuf *b, size_t size, char *first, size_t first_cap);

/* 1 when appending n bytes fills the buffer, that is, writes. */
int ff_wbuf_fills(const struct ff_wbuf *b, size_t n);

/* Append buf[0..n) when the memory the buffer has holds it without filling
 * it (no write(2), no allocation): 1, else 0 with nothing done. */
static inline int ff_wbuf_copy_in(struct ff_wbuf *b, const char *buf, size_t n)
{
    if (n >= b->size - b->len || n > b->cap - b->len)
        return 0;
    if (n) {            /* (an empty buffer may have no memory yet) */
        memcpy(b->buf + b->len, buf, n);
        b->len += n;
    }
    return 1;
}

/* Append buf[0..n) to fd through b: copied while the buffer has room, the
 * full buffer written with one write(2) (ff_write_all), and a rest of size
 * bytes or more written straight from buf, without a copy. Returns 0, an
 * errno of write, or ENOMEM (then a chunk that does not fill the buffer
 * has left it as it was). */
int ff_wbuf_append(struct ff_wbuf *b, int fd, const char *buf, size_t n,
                   const struct ff_eintr *intr);

/* Write what is buffered, with one write(2) if anything is. */
int ff_wbuf_flush(struct ff_wbuf *b, int fd, const struct ff_eintr *intr);

/* Free the memory (the lent first memory is only no longer used); b stays
 * usable (empty, same size, on the heap). */
void ff_wbuf_free(struct ff_wbuf *b);

/* Reading. */

/* A reader of a file that a writer may replace meanwhile (temp + rename,
 * as file_set_contents does): on FUSE (pmxcfs) the open, or a read of
 * the file that was open, can then fail with ENOENT or ESTALE although a
 * file of that name exists at every moment. Every reader opens with
 * ff_open_read and, when a read (or fstat) of its fd fails, asks
 * ff_read_again: both retry such a failure, within one budget of
 * FF_REREAD_TRIES tries a call (see reread in ff_io.c), and cost nothing
 * until a call fails. A reader that starts over reads the new file from
 * its start: it never mixes two versions. Set up per call:
 *   struct ff_reread r = { path, 0, 0, 0, NULL }; */
struct ff_reread {
    const char *path;
    unsigned tries;         /* retries made so far */
    dev_t cwd_dev;          /* a relative path's directory at the first retry */
    ino_t cwd_ino;
    const int *at;          /* NULL (AT_FDCWD), or where path is looked up,
                             * read at each try: the working directory that
                             * a handler's first run made the caller hold */
};

/* Retries after the first failure, and the first pause (before the second
 * retry; the first is made at once), doubled each time: 10 retries wait at
 * most 0.1 + 0.2 + ... + 25.6 = 51.1 ms in all. On t/fusefs' pmxcfs mode
 * (2 cores, load 2-12) most windows closed at the first retry, the longest
 * seen at the 8th (6.3-12.7 ms of pauses), and a budget of 8 failed once
 * in ~60,000 reads: the writer that must finish its rename waits for a CPU
 * there. Only a name that exists (or ESTALE) is retried so long: a missing
 * file fails at once. */
#define FF_REREAD_TRIES 10
#define FF_REREAD_PAUSE_NS 100000L

/* open(2) r->path read-only, EINTR retried, a concurrent replace's ENOENT
 * or ESTALE retried (a missing file fails with ENOENT after one statx). */
int ff_open_read(struct ff_reread *r, int *fd, const struct ff_eintr *intr);

/* After a read (read, pread, lseek, fstat) of *fd, r->path open, failed with
 * err: 1 when it was a concurrent replace's failure and *fd is now the new
 * file, open afresh: read it from its start. 0 when err stands: *fd is as
 * it was for any other errno, else closed (-1). */
int ff_read_again(struct ff_reread *r, int *fd, int err, const struct ff_eintr *intr);

/* The size fstat(2) reports when it can be trusted as a first guess (a
 * regular file), else 0: /proc, pipes and the like say nothing useful. */
int ff_size_hint(int fd, size_t *size, const struct ff_eintr *intr);

/* One read(2) of up to len bytes, EINTR retried; *got is 0 at end of file. */
int ff_read_some(int fd, char *buf, size_t len, size_t *got, const struct ff_eintr *intr);

/* read(2) until len bytes are in or end of file; *got < len means EOF.
 * *reads counts the reads that returned bytes: on FUSE bytes of more than
 * one read may come from two versions of a file (a short read, then a
 * read after it answered from the version that replaced it), so a caller
 * checks what more than one read brought as it checks a read of more
 * than one FUSE request (ff_file_matches).
 * eof_at: the size fstat gave a regular file (0: none), counted from buf: a
 * short read that brings the total to exactly that is its end, with no
 * read of 0 after it (on FUSE that read is one more request, which a file
 * replaced meanwhile answers from its new version). A file that shrank or
 * grew past it, and pipes, /proc and sysfs (no size, or one they do not
 * hold), are read on to a read of 0. */
int ff_read_full(int fd, char *buf, size_t len, size_t eof_at, size_t *got, unsigned *reads,
                 const struct ff_eintr *intr);

/* The same with pread(2) from offset off, the fd's offset untouched. */
int ff_pread_full(int fd, char *buf, size_t len, off_t off, size_t eof_at, size_t *got,
                  unsigned *reads, const struct ff_eintr *intr);

/* A FUSE READ request carries at most this many bytes (32 pages: the
 * kernel's default, libfuse 2's and pmxcfs'): a read of up to this from a
 * page-aligned buffer is one request, which pmxcfs answers from one version
 * of the file. */
#define FF_FUSE_REQUEST ((size_t)128 * 1024)
#define FF_PAGE ((size_t)4096)

/* A read of more than one FUSE request on FUSE: at most this many reads
 * in all (each read whole checked by the next), when they keep disagreeing */
#define FF_TORN_TRIES 8

/* The pieces ff_file_matches reads: one FUSE request each wherever its
 * buffer starts */
#define FF_MATCH_PIECE (FF_FUSE_REQUEST - FF_PAGE)

/* *same = 1 when fd holds exactly buf[0..len) from offset start, and (with
 * to_end) ends there: pread(2) in FF_MATCH_PIECE pieces into a scratch
 * block, each compared (no second buffer of the file's size), to_end's last
 * asking a byte more than is left (so no extra request finds the end). The
 * fd's offset is left as it is. Returns 0 or an errno. */
int ff_file_matches(int fd, off_t start, const char *buf, size_t len, int to_end, int *same,
                    const struct ff_eintr *intr);

/* 1 when a read of len bytes is one FUSE request wherever its buffer
 * starts (up to 124 KiB and a byte) */
#define ff_one_request_anywhere(len) ((len) + FF_PAGE - 1 <= FF_FUSE_REQUEST)

/* 1 when a read of len bytes at buf could have taken more than one FUSE
 * request (split where the pages it spans pass FF_FUSE_REQUEST) */
#define ff_more_than_one_request(buf, len) \
    (((size_t)(buf) & (FF_PAGE - 1)) + (len) > FF_FUSE_REQUEST)

/* 1 when fd is on FUSE (fstatfs), where one version of a file is only
 * promised per READ request: pmxcfs applies another node's change between
 * two requests of one read(2). */
int ff_fd_on_fuse(int fd);

/* 1 when fd is a regular file, which a second read can check: a FIFO,
 * socket or device (one on FUSE too) has one version, what was read; a
 * second read of it (pread: ESPIPE) is no check. */
int ff_fd_rereadable(int fd);

/* close(2) an fd that was only read; its result cannot mean lost data. */
void ff_close_read(int fd);

/* Pieces of the single-file path that ff_batch.c reuses. */

/* The directory part of path as a new string ("." when there is none). */
char *ff_dir_of(const char *path);

/* mkdir -p of dir (mode 0777 & ~umask; another creator winning is fine),
 * cutting and mending the caller's buffer in place: nothing to leak if a
 * signal handler dies meanwhile. *made: the levels made (the last ones of
 * dir), to be made durable with ff_sync_parents. */
int ff_mkdir_p(char *dir, int *made, const struct ff_eintr *intr);
/* The same, a relative dir taken from the directory dirfd (or AT_FDCWD). */
int ff_mkdir_p_at(int dirfd, char *dir, int *made, const struct ff_eintr *intr);

/* fsync the first `levels` ancestors of the directory dir (the parents of
 * the levels ff_mkdir_p made), cutting dir in place. The open directory is
 * in *fd while it is synced, so the owner's cleanup can close it after a
 * die; -1 otherwise. EINVAL and ENOSYS (cannot sync) are not errors. */
int ff_sync_parents(char *dir, int levels, int *fd, const struct ff_eintr *intr);
/* The mode a temp is created with: perm, but with preserve and an old
 * file (a->old) only the owner bits both grant (0600 & perm for a 0600
 * file): new contents are never more open than the old file's mode and the
 * final one; commit sets the final mode. */
mode_t ff_temp_mode(const struct ff_atomic *a, int preserve);
/* openat(dirfd, name, O_EXCL...) of a new temp, EINTR retried (bounded).
 * After an EINTR (NFS, FUSE: the server may have created the file) an
 * EEXIST for a file that looks just made by us (see own_orphan in ff_io.c)
 * removes it, so nothing is left behind, and is returned: the caller takes
 * a random name, never this one again (it may have been another writer's). */
int ff_open_excl(int dirfd, const char *name, mode_t mode, int *fd,
                 const struct ff_eintr *intr);
/* The kernel's rule for sticky directories that others may write, applied
 * whatever fs.protected_regular says (as at its level 2): world-writable
 * (/tmp) or group-writable (01770). There, only what belongs to us (the
 * euid) or to the directory's owner is trusted (an old file's owner and
 * mode kept by preserve, an identical file left by if_changed, a link
 * followed: fs.protected_symlinks' rule, which the kernel applies to
 * world-writable ones only), and
 * only with one link: anyone may add a hard link there to a file of ours
 * they can read and write (fs.protected_hardlinks allows it), any file
 * with that sysctl off. 1 when dir is not such a directory or file is one
 * of those. The one rule of the single call, the writer and the batch. */
int ff_sticky_trusts(const struct stat *dir, const struct stat *file);
/* preserve: the old file's access ACL into a->acl (none: NULL, 0). */
int ff_atomic_read_acl(struct ff_atomic *a);
/* preserve: owner, ACL, then mode, of a->old onto the open temp. */
int ff_atomic_preserve(struct ff_atomic *a);
/* noclobber: rename from (a's temp) to to, relative to dirfd (or
 * AT_FDCWD), without replacing anything: renameat2 RENAME_NOREPLACE, else
 * linkat + unlinkat of from. 0 once from is gone; *unsupported is 1 when the
 * filesystem has neither way (EPERM, ENOSYS, EOPNOTSUPP of the link). intr
 * runs only while nothing is published: once the link is made no callback
 * runs (ff_io.c's link_then_unlink), so no user code sees the target with
 * two names. After a callback ran, from is checked to be a's temp still
 * (ff_atomic_temp_ours: ESTALE) before the retry. */
int ff_noclobber_renameat(struct ff_atomic *a, int dirfd, const char *from, const char *to,
                          int *unsupported, const struct ff_eintr *intr);
/* The name to try after temp[0..base_len) ("<target>.tmp.<pid>", the
 * target target_len bytes) exists: ".<16 random hex digits>" appended; or,
 * once *fit is set (the longer name was too long for the filesystem) or
 * where the leaf would pass NAME_MAX, in place of the target name's last
 * 17 bytes, so it is as long as the plain name and fits wherever that one
 * does (sets *fit: 1 when asked to fit, 2 once the name is shortened; a
 * later call then only draws a new random part). temp has room for FF_TEMP_SUFFIX_MAX more bytes. */
int ff_temp_random_name(char *temp, size_t target_len, size_t base_len, int *fit);
/* 64 random bits for a temp name's suffix. */

/* What this build uses (ff_compat.h): FF_FEATURE_PORTABLE when every
 * Linux-only call takes its POSIX fallback, else the Linux calls built in. */
#define FF_FEATURE_PORTABLE        (1u << 0)
#define FF_FEATURE_RENAMEAT2       (1u << 1)
#define FF_FEATURE_SYNC_FILE_RANGE (1u << 2)
#define FF_FEATURE_GETRANDOM       (1u << 3)
#define FF_FEATURE_FDATASYNC       (1u << 4)
#define FF_FEATURE_O_PATH          (1u << 5)
#define FF_FEATURE_ACL             (1u << 6)
#define FF_FEATURE_STATX           (1u << 7)
#define FF_FEATURE_COPY_FILE_RANGE (1u << 8)
#define FF_FEATURE_FILE_HANDLE     (1u << 9)
unsigned ff_features(void);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
