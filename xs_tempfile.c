/* xs_tempfile.c - the perl side of tempfile, tempfile_contents and
 * create_owned_file_fh (XSUBs in Tempfile.xsh, files opened in
 * ff_tempfile.c). Each returns the reference's handle, an IO::File on the
 * fd (PerlIO finds the file's offset where the data written here ended). */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"
#include "xs_helpers.h"
#include "ff_tempfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* PerlIO's buffer: the reference's print of data this long or longer
 * writes (and fails) inside print, a shorter one only at its flush. */
#define FF_PERLIO_BUFSIZ 8192

/* The reference's text for a write of total bytes to the new file fd that
 * failed: its print writes PerlIO's full 8 KiB buffers and fails when one
 * of them does; the rest is written (and fails) at its flush. Where the
 * kernel stopped taking bytes (ENOSPC, EFBIG at `ulimit -f`) is the file's
 * offset: the file was empty, and one write put them from its start. */
static const char *failed_write_text(int fd, size_t total)
{
    off_t done = lseek(fd, 0, SEEK_CUR);
    size_t printed = total / FF_PERLIO_BUFSIZ * FF_PERLIO_BUFSIZ;

    return done >= 0 && (size_t)done >= printed ? "unable to flush to tempfile: "
                                                : "unable to write to tempfile: ";
}

/* PerlIO_fdopen(fd, mode) with fd inherited across exec when it is one of
 * $^F's (0 to 2), as perl's own open leaves it: perl 5.28 and later do
 * that in PerlIO_fdopen, older ones (5.20) leave our O_CLOEXEC. */
static PerlIO *S_perlio_of(pTHX_ int fd, const char *mode)
{
    if (fd <= PL_maxsysfd)
        (void)fcntl(fd, F_SETFD, 0);
    return PerlIO_fdopen(fd, mode);
}

/* A perl handle on fd, as sysopen with these flags makes one: its PerlIO
 * (which finds the offset where our write left it; S_perlio_of makes the
 * fd inherited across exec only when it is one of $^F's), its IoTYPE. A glob
 * reference, named name (in perl's messages), blessed into class unless
 * NULL. NULL with errno when PerlIO cannot take the fd; it has then closed
 * it, as perl's open does. */
static SV *S_handle_of(pTHX_ int fd, int flags, const char *class, const char *name)
{
    char mode[8];
    int type;
    PerlIO *f;
    GV *gv;
    IO *io;
    SV *rv;

    /* the mode and IoTYPE as sysopen derives them from the flags (its
     * type is by access mode alone: O_APPEND changes the mode, not it) */
    type = PerlIO_intmode2str(flags, mode, NULL);
    f = S_perlio_of(aTHX_ fd, mode);
    if (!f)
        return NULL;
    gv = (GV *)newSV(0);
    gv_init_pvn(gv, class ? gv_stashpv(class, GV_ADD) : PL_curstash, name, strlen(name), 0);
    io = GvIOn(gv);
    IoIFP(io) = f;
    if (type != IoTYPE_RDONLY)
        IoOFP(io) = f;
    IoTYPE(io) = (char)type;
    rv = sv_2mortal(newRV_noinc((SV *)gv));
    if (class)
        sv_bless(rv, gv_stashpv(class, GV_ADD));
    return rv;
}
#define handle_of(fd, flags, class, name) S_handle_of(aTHX_ fd, flags, class, name)

/* A name the reference passes to sysopen (a file, tempfile's dir), its
 * get-magic run: the private string, refused under -T when tainted, as
 * sysopen refuses it. An empty one is returned as it is (the caller fails
 * as sysopen fails on it, ENOENT, with the reference's text); only undef
 * croaks (path_arg). */
static SV *S_open_name(pTHX_ SV *name, const char *op)
{
    SV *snap = name_snapshot(name), *path;

    if (!SvOK(snap))
        return path_arg(snap, op);
    path = stringified(snap);
    if (SvTAINTED(snap) || SvTAINTED(path)) {
        TAINT;
        taint_proper(NULL, op);
    }
    return path;
}
#define open_name(name, op) S_open_name(aTHX_ name, op)

/* sysopen's verdict on a name before the kernel's: FALSE (ENOENT) for ""
 * and for a NUL byte in it (with perl's warning). */
#define openable(path, op) (SvCUR(path) > 0 && safe_path(path, op))

/* A tempfile's intr callback: ffxs_on_eintr, and before the handlers run
 * the first time, a relative directory's base (the working directory)
 * held in cwd_fd (closed when the caller's scope is left): a chdir of
 * theirs moves nothing of the call. Nothing held where no handler runs. */
struct tempfile_eintr {
    struct ff_guard guard;
    const char *dir;        /* the directory, once known (else NULL) */
    int cwd_fd;             /* AT_FDCWD, or the working directory held */
};

static int S_tempfile_on_eintr(void *ctx)
{
    struct tempfile_eintr *t = (struct tempfile_eintr *)ctx;
    dTHX;

    if (PL_sig_pending && t->cwd_fd == AT_FDCWD && t->dir) {
        /* no fd left: the open fails before the handlers run (their
         * chdir would move it) */
        int err = ff_tempfile_hold_cwd(t->dir, &t->cwd_fd);

        if (FF_OUT_OF_FDS(err))
            croak_errno(err, "failed to create tempfile: ");
        if (t->cwd_fd != AT_FDCWD)
            SAVEDESTRUCTOR_X(ffxs_close_fd_at_leave, &t->cwd_fd);
    }
    return ffxs_on_eintr(&t->guard);
}

SV *ffxs_tempfile(pTHX_ SV *data, SV *perm, SV *dir, bool dir_given, SV *flags,
                  bool allow_links)
{
    const char *op = "tempfile_contents";
    struct tempfile_eintr tintr = { { NULL, 0, FALSE, FALSE, FF_GUARD_PERL, NULL }, NULL, AT_FDCWD };
    struct ff_eintr intr = { S_tempfile_on_eintr, &tintr, NULL };
    SV *dir_sv, *ors_sv = NULL;
    const char *buf, *ors = "";
    STRLEN len, ors_len = 0;
    int fd = -1, err, open_flags;
    SV *fh;

    ENTER;   /* closes fd on a croak (a warning's handler may die) */
    if (data) {
        SvGETMAGIC(data);
        data = snapshot(data);
        if (PL_ors_sv && SvOK(PL_ors_sv))
            ors_sv = snapshot(PL_ors_sv);
    }
    /* under -T, a tainted directory, perm or mode is refused, as the
     * reference's sysopen refuses it */
    SvGETMAGIC(dir);
    dir_sv = open_name(dir, "tempfile");
    SvGETMAGIC(perm);
    SvGETMAGIC(flags);
    if (SvTAINTED(perm) || SvTAINTED(flags)) {
        TAINT;
        taint_proper(NULL, "tempfile");
    }
    open_flags = (int)SvIV(flags);
    SAVEDESTRUCTOR_X(ffxs_close_fd_at_leave, &fd);
    tintr.dir = SvPVX(dir_sv);
    err = openable(dir_sv, "tempfile")
              ? ff_tempfile_open(SvPVX(dir_sv), dir_given, open_flags, allow_links,
                                 (mode_t)SvIV(perm), &tintr.cwd_fd, &fd, &intr)
              : ENOENT;
    tintr.dir = NULL;       /* open: a chdir moves nothing of it now */
    if (err)
        croak_errno(err, "failed to create tempfile: ");
    if (data) {
        /* print's bytes, as file_set_contents writes them: wide characters
         * as UTF-8 with a warning, then $\; one write(2) (a writev with $\) */
        buf = payload(data, FALSE, &len, op);
        if (ors_sv)
            ors = payload(ors_sv, FALSE, &ors_len, op);
        err = ff_write_tail_all(fd, buf, len, ors, ors_len, &intr);
        if (err) {
            const char *text = failed_write_text(fd, len + ors_len);

            ff_close_read(fd);
            fd = -1;
            croak_errno(err, "%s", text);
        }
    }
    fh = handle_of(fd, open_flags, "IO::File", "__ANONIO__");
    err = errno;
    fd = -1;                /* PerlIO's now (closed by it if it failed) */
    LEAVE;
    if (!fh)
        croak_errno(err, data ? "unable to write to tempfile: " : "failed to create tempfile: ");
    return fh;
}

/* 1 when path is a directory, as perl's -d says (symlinks followed). */
static int is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* File::Path::make_path's croak for dir, when dir is not a directory after
 * ff_mkdir_p: it climbs from dir while the parent is not a directory, then
 * makes the level below the first one that is, and names that level with
 * its mkdir's error ("File exists" for a file or dangling symlink in the
 * way: what lstat finds there; nothing is made). Returns when dir is a
 * directory, or that level is missing (it went after ff_mkdir_p made it:
 * the open's ENOENT is the error, as the reference's open meets it). */
static void S_croak_make_path(pTHX_ char *dir)
{
    size_t len = strlen(dir), top = len;
    struct stat st;
    char saved;

    if (is_dir(dir))
        return;
    for (;;) {
        char *slash, save;

        while (top > 1 && dir[top - 1] == '/')
            top--;
        save = dir[top];
        dir[top] = '\0';
        slash = strrchr(dir, '/');
        dir[top] = save;
        if (!slash)
            break;              /* a relative first level: its parent is "." */
        {
            size_t parent = (size_t)(slash - dir);
            int parent_is_dir;

            if (parent == 0)
                break;          /* its parent is "/" */
            dir[parent] = '\0';
            parent_is_dir = is_dir(dir);
            dir[parent] = '/';
            if (parent_is_dir)
                break;
            top = parent;
        }
    }
    saved = dir[top];
    dir[top] = '\0';
    if (lstat(dir, &st) == 0)
        croak_errno_at(EEXIST, "mkdir %s: ", dir);
    dir[top] = saved;
}
#define croak_make_path(dir) S_croak_make_path(aTHX_ dir)

/* The glob IO::File->new starts from, got as the reference gets it before
 * its open: Symbol::gensym's (named "GEN<n>" in perl's messages), a mortal
 * reference. NULL without Symbol (IO::File could not be loaded: no fd
 * left), or where gensym (anyone's code) gave no unopened glob. */
static SV *S_gensym(pTHX)
{
    dSP;
    SV *rv;
    IO *io;

    if (!get_cv("Symbol::gensym", 0))
        return NULL;
    PUSHMARK(SP);
    PUTBACK;
    (void)call_pv("Symbol::gensym", G_SCALAR);
    SPAGAIN;
    rv = sv_2mortal(newSVsv(POPs));
    PUTBACK;
    if (!SvROK(rv) || !isGV_with_GP(SvRV(rv)))
        return NULL;
    io = GvIOp((GV *)SvRV(rv));
    return io && IoIFP(io) ? NULL : rv;
}

/* The handle IO::File->new makes: glob (S_gensym's; NULL: a glob of our
 * own) blessed into IO::File, on fd open for writing. */
static SV *S_io_file_handle(pTHX_ SV *glob, int fd)
{
    PerlIO *f;
    IO *io;

    if (!glob)
        return handle_of(fd, O_WRONLY, "IO::File", "__ANONIO__");
    f = S_perlio_of(aTHX_ fd, "w");
    if (!f)
        return NULL;
    io = GvIOn((GV *)SvRV(glob));
    IoIFP(io) = IoOFP(io) = f;
    IoTYPE(io) = IoTYPE_WRONLY;
    sv_bless(glob, gv_stashpvs("IO::File", GV_ADD));
    return glob;
}

SV *ffxs_create_owned(pTHX_ SV *file, SV *uid, SV *gid, SV *perm)
{
    const char *op = "create_owned_file_fh";
    struct ff_guard guard = { NULL, 0, FALSE, FALSE, FF_GUARD_PERL, NULL };
    struct ff_eintr intr = { ffxs_on_eintr, &guard, NULL };
    enum ff_step step;
    SV *path;
    char *dir;
    const char *name;
    int fd = -1, at = -1, err, made, unlink_err;
    IV uid_n, gid_n;
    SV *fh, *glob;

    ENTER;
    SvGETMAGIC(file);
    path = open_name(file, op);
    /* under -T a tainted perm (sysopen's), uid or gid (chown's) is refused
     * before anything is made (the reference dies at its sysopen or chown,
     * after making the directories, and for chown the file) */
    if (SvTAINTED(perm) || SvTAINTED(uid) || SvTAINTED(gid)) {
        TAINT;
        taint_proper(NULL, op);
    }
    uid_n = SvIV(uid);
    gid_n = SvIV(gid);
    if (!openable(path, op))
        croak_errno(ENOENT, "unable to create file '%" SVf "' - ", SVfARG(path));
    /* File::Path::make_path of File::Basename::dirname: it croaks
     * "mkdir <dir>: <$!>" for the level that failed, which ff_mkdir_p
     * leaves in dir */
    {
        char *d = ff_owned_dir(SvPVX(path), &name);

        if (!d)
            croak_errno(ENOMEM, "unable to create file '%" SVf "' - ", SVfARG(path));
        size_t len = strlen(d) + 1;

        Newx(dir, len, char);       /* (Newx, not savepv: perl 5.20's inline.h
                                     * warns when no allocation macro is used) */
        Copy(d, dir, len, char);
        free(d);
        SAVEFREEPV(dir);
    }
    err = ff_mkdir_p(dir, &made, &intr);
    if (err) {
        /* ff_mkdir_p left dir cut at the level that failed: from the whole */
        char *d = ff_owned_dir(SvPVX(path), &name);

        if (d) {
            char *full = savepv(d);

            free(d);
            SAVEFREEPV(full);
            croak_make_path(full);
        }
        croak_errno_at(err, "mkdir %s: ", dir);
    }
    glob = S_gensym(aTHX);      /* (before anything is open: it runs perl code) */
    SAVEDESTRUCTOR_X(ffxs_close_fd_at_leave, &fd);
    SAVEDESTRUCTOR_X(ffxs_close_fd_at_leave, &at);
    err = ff_create_owned(SvPVX(path), dir, name, (uid_t)uid_n, (gid_t)gid_n, (mode_t)SvIV(perm),
                          &at, &fd, &step, &unlink_err, &intr);
    /* a file where the directory should be (ENOTDIR), or a dangling
     * symlink (ENOENT): make_path croaks there, as its -d finds no
     * directory; croak_make_path returns when dir is one */
    if ((err == ENOTDIR || err == ENOENT) && step == FF_STEP_OPEN)
        croak_make_path(dir);
    if (err && step == FF_STEP_OPEN)
        croak_errno(err, "unable to create file '%" SVf "' - ", SVfARG(path));
    if (err) {
        if (unlink_err) {
            SV *text = sv_2mortal(newSVpvs(""));

            cat_errno(text, unlink_err);
            warn("failed to unlink '%" SVf "' after failing to set owner: %" SVf "\n",
                 SVfARG(path), SVfARG(text));
        }
        croak_errno_at(err, "failed to change owner of '%" SVf "' to %" SVf ":%" SVf " - ",
                       SVfARG(path), SVfARG(uid), SVfARG(gid));
    }
    fh = S_io_file_handle(aTHX_ glob, fd);
    err = errno;
    fd = -1;
    LEAVE;
    if (!fh)
        croak_errno(err, "unable to create file '%" SVf "' - ", SVfARG(path));
    /* $! as the reference leaves it: its IO::File open asks isatty */
    SETERRNO(ENOTTY, 0);
    return fh;
}
