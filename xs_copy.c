/* xs_copy.c - file_copy's perl side (XSUB in Copy.xsh, syscalls in
 * ff_copy.c), and safe_read_from's read of a regular file to its end. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "ff_copy.h"
#include "xs_common.h"
#include "xs_copy.h"

/* The read/write fallback's block: the whole file and a byte when fstat
 * tells its size (one read and one write), within these bounds. */
#define FF_COPY_BLOCK_MIN ((size_t)64 * 1024)
#define FF_COPY_BLOCK_MAX ((size_t)4 * 1024 * 1024)

/* A new block for the read/write fallback, freed when the scope is left. */
static char *S_copy_block(pTHX_ size_t size, size_t limit, size_t *cap)
{
    char *buf;

    *cap = size ? size + 1 : FF_COPY_BLOCK_MIN;
    if (*cap < FF_COPY_BLOCK_MIN)
        *cap = FF_COPY_BLOCK_MIN;
    if (*cap > FF_COPY_BLOCK_MAX)
        *cap = FF_COPY_BLOCK_MAX;
    if (*cap > limit)
        *cap = limit;
    Newx(buf, *cap, char);
    SAVEFREEPV(buf);
    return buf;
}

/* Every failure of the copy once the temp exists: the write's error (the
 * temp), the source's read error, or (err 0 on the read side) a source
 * that grew past max. croak runs $SIG{__DIE__} before the unwinding's
 * cleanup: the temp goes first, as croak_step removes it, so that hook
 * never sees one. */
static void S_croak_copy(pTHX_ struct ff_atomic *a, int err, enum ff_copy_side side, SV *src,
                         SV *dst)
{
    ff_atomic_remove_temp(a);
    if (side == FF_COPY_READ && !err)
        croak_too_long(src);
    if (side == FF_COPY_READ)
        croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(src));
    a->step = FF_STEP_WRITE;
    croak_step(a, err, dst);
}

/* The rest of the source read (into buf, up to a byte past max; got: read
 * already) and its error croaked, before one of the target's: the
 * reference reads the whole source before it opens the target, so a
 * source that fails, or holds more than max bytes, is what it reports.
 * Returns when the source is fine. */
static void S_source_first(pTHX_ int in, char *buf, size_t cap, size_t got, size_t max,
                           SV *src, const struct ff_eintr *intr)
{
    size_t n;
    int read_err;

    do {
        read_err = ff_read_some(in, buf, cap, &n, intr);
        if (read_err)
            croak_errno(read_err, "unable to read file '%" SVf "' - ", SVfARG(src));
        got += n;
    } while (n && got <= max);
    if (got > max)
        croak_too_long(src);
}

/* S_source_first before the target's name is refused (undef, "", tainted,
 * a NUL in it), from its start: nothing of it was read yet */
struct source_first {
    int in;
    size_t size, limit, max;
    SV *src;
    const struct ff_eintr *intr;
};

static void S_source_first_from_start(pTHX_ void *ctx)
{
    struct source_first *s = (struct source_first *)ctx;
    size_t cap;
    char *buf = S_copy_block(aTHX_ s->size, s->limit, &cap);

    S_source_first(aTHX_ s->in, buf, cap, 0, s->max, s->src, s->intr);
}

/* file_copy's intr callback: ffxs_on_eintr, and before the handlers first
 * run while the source is opened or read (no temp yet, so no atomic that
 * ffxs_on_eintr could make hold it), the working directory held in cwd_fd:
 * the source's open retried and the target made where the call started,
 * whatever chdir they make. Nothing held where no handler runs there. */
struct copy_eintr {
    struct ff_guard guard;
    int cwd_fd;             /* AT_FDCWD, or the working directory held */
    SV *dst;                /* the target's name (a snapshot), for the text */
};

static int S_copy_on_eintr(void *ctx)
{
    struct copy_eintr *c = (struct copy_eintr *)ctx;
    dTHXa(c->guard.perl ? (PerlInterpreter *)c->guard.perl : PERL_GET_THX);

    if (PL_sig_pending && !c->guard.atomic && c->cwd_fd == AT_FDCWD) {
        int fd, err = ff_open_cwd(&fd);

        if (FF_OUT_OF_FDS(err))
            croak_errno(err, "unable to hold the directory of '%" SVf "' while signal handlers run - ",
                        SVfARG(c->dst && SvOK(c->dst) ? c->dst : &PL_sv_no));
        if (!err) {
            c->cwd_fd = fd;
            close_read_at_leave(&c->cwd_fd);
        }
    }
    return ffxs_on_eintr(&c->guard);
}

int ffxs_file_copy(pTHX_ SV *src, SV *dst, SV *max_sv, SV *perm)
{
    const char *op = "file_copy";
    SV *src_path, *dst_path, *ors_sv = NULL;
    const char *ors = "";
    STRLEN ors_len = 0;
    bool force_utf8;
    struct ff_options opt;
    struct ff_atomic atomic, *a = &atomic;   /* this frame outlives its LEAVE */
    /* reading first: a child forked by a handler may not read on */
    struct copy_eintr copy = { { NULL, 0, FALSE, TRUE, FF_GUARD_PERL, NULL }, AT_FDCWD, NULL };
    struct ff_guard *const guard = &copy.guard;
    struct ff_eintr intr = { S_copy_on_eintr, &copy, FFXS_PENDING };
    size_t max, limit, size, total = 0, cap = 0, pending = 0;
    char *buf = NULL;
    struct ff_reread reread = { NULL, 0, 0, 0, NULL };
    unsigned reads = 0;                      /* of the source that brought bytes */
    int in = -1, err;
    struct ffxs_path dst_name;               /* dst_path, as start_write takes it */
    char suffix[FF_PID_SUFFIX_MAX];          /* ".tmp.<pid>" */
    size_t suffix_len;
    IV pid;

    ENTER;   /* its cleanups point into this frame: they run before it returns */
    /* as the reference's my (...) = @_: each argument's get-magic once, in
     * order, into a snapshot, then $\ (see file_set_contents) */
    {
        SV *const args[] = { src, dst, max_sv, perm };
        hold_args(args);
    }
    SvGETMAGIC(src);
    src = name_snapshot(src);
    if (dst) {
        SvGETMAGIC(dst);
        dst = name_snapshot(dst);
    }
    copy.dst = dst;
    if (max_sv) {
        SvGETMAGIC(max_sv);
        max_sv = snapshot(max_sv);
    }
    if (perm) {
        SvGETMAGIC(perm);
        perm = snapshot(perm);
    }
    if (PL_ors_sv && SvOK(PL_ors_sv))
        ors_sv = snapshot(PL_ors_sv);
    pid = ffxs_pid_suffix(aTHX_ suffix, &suffix_len);
    guard->pid = pid;

    /* the reader's part first, as the reference reads the whole source
     * before it writes: its errors come first */
    src_path = path_arg(src, NULL);
    max = max_arg(max_sv, op);
    limit = max + 1;
    close_read_at_leave(&in);
    reread.path = SvPVX(src_path);
    reread.at = &copy.cwd_fd;   /* where the call started, if a handler chdirs */
    err = safe_path(src_path, op) ? ff_open_read(&reread, &in, &intr) : ENOENT;
    if (err)
        croak_errno(err, "can't open '%" SVf "' - ", SVfARG(src_path));
    do                  /* again with the new file, if a writer replaced it */
        err = ff_size_hint(in, &size, &intr);
    while (err && ff_read_again(&reread, &in, err, &intr));
    if (err)
        croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(src_path));
    /* fstat's size is only a hint (sysfs says 4096 whatever a file holds):
     * one past max is too long when it holds a byte there (as the
     * reference would find reading it all), else it is read as a file of
     * unknown size, and the bytes decide */
    if (size > max) {
        if (ff_byte_at(in, max, &intr))
            croak_too_long(src_path);
        size = 0;
    }

    {
        struct source_first first = { in, size, limit, max, src_path, &intr };

        dst_path = path_arg_after(dst ? dst : &PL_sv_undef, op, S_source_first_from_start, &first);
        /* (a NUL: refused when the temp is named, with perl's warning) */
        if (memchr(SvPVX(dst_path), '\0', SvCUR(dst_path)))
            S_source_first_from_start(aTHX_ &first);
    }
    {
        struct ffxs_path of_sv = FFXS_PATH_OF(dst_path);

        dst_name = of_sv;
    }
    Zero(&opt, 1, struct ff_options);
    opt.perm = 0644;
    force_utf8 = FALSE;
    write_args(perm, NULL, FALSE, &opt, &force_utf8, op);

    if (opt.if_changed || force_utf8
        || (!ff_one_request_anywhere(size + 1) && ff_fd_on_fuse(in))) {
        /* the bytes themselves are needed: compared with the target, or
         * encoded (a private string, never the caller's), or read into
         * a page-aligned buffer and checked against a second read (a FUSE
         * source that may be more than one request: read_to_end) before
         * anything is written */
        SV *content = read_to_end(&in, size, max, limit, src_path, &reread, &intr);
        const char *bytes;
        STRLEN len;

        bytes = payload(content, force_utf8, &len, op);
        if (ors_sv && !force_utf8)
            ors = payload(ors_sv, FALSE, &ors_len, op);
        guard->atomic = a;
        guard->reading = FALSE;
        if (!start_write(a, &dst_name, &opt, &intr, pid, op, bytes, len, ors, ors_len,
                         NULL, suffix, suffix_len, &copy.cwd_fd)) {
            LEAVE;
            SETERRNO(len + ors_len ? 0 : ENOTTY, 0);
            return 0;
        }
        a->step = FF_STEP_WRITE;
        err = ff_write_tail_all(a->fd, bytes, len, ors, ors_len, &intr);
        if (err)
            croak_step(a, err, dst_path);
        total = len;
    } else {
        /* a source of unknown size (procfs, a pipe, an empty file) is read
         * once before the temp is made: a directory fails as the
         * reference's read fails, nothing created */
        if (!size) {
            size_t got;

            buf = S_copy_block(aTHX_ size, limit, &cap);
            do
                err = ff_read_some(in, buf, cap, &got, &intr);
            while (err && ff_read_again(&reread, &in, err, &intr));
            if (err)
                croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(src_path));
            if (got > max)
                croak_too_long(src_path);
            pending = got;
            reads = got > 0;
        }
        if (ors_sv)
            ors = payload(ors_sv, FALSE, &ors_len, op);
        guard->atomic = a;
        guard->reading = FALSE;
        err = make_temp(a, &dst_name, &opt, &intr, pid, op, suffix, suffix_len, &copy.cwd_fd);
        if (err) {
            guard->reading = TRUE;
            if (!buf)
                buf = S_copy_block(aTHX_ size, limit, &cap);
            S_source_first(aTHX_ in, buf, cap, pending, max, src_path, &intr);
            croak_step(a, err, dst_path);
        }
        a->step = FF_STEP_WRITE;
        /* the kernel moves the bytes where it can (never when the first
         * block is in buf already), read and write do the rest */
        if (pending || !size || !ff_copy_range(in, a->fd, limit, size, &total, &reads, &intr)) {
            enum ff_copy_side side = FF_COPY_READ;

            if (!buf)
                buf = S_copy_block(aTHX_ size, limit, &cap);
            while ((err = ff_copy_rw(in, a->fd, buf, cap, pending, limit, size, &total, &reads,
                                     &side, &intr))
                   && side == FF_COPY_READ && ff_read_again(&reread, &in, err, &intr)) {
                /* a writer replaced the source: the new one from its start,
                 * into the temp emptied */
                side = FF_COPY_WRITE;
                if ((err = ff_copy_restart(a->fd, &intr)))
                    break;
                total = pending = 0;
                reads = 0;
            }
            if (err)
                S_croak_copy(aTHX_ a, err, side, src_path, dst_path);
        }
        /* more than one read on FUSE (pmxcfs): a short one, and the rest
         * from the version that replaced the source meanwhile, may be in
         * the temp. Copy it again, read whole and checked (read_to_end) */
        if (reads > 1 && total <= max && ff_fd_on_fuse(in) && ff_fd_rereadable(in)) {
            SV *content;

            err = ff_copy_restart(a->fd, &intr);
            if (err)
                S_croak_copy(aTHX_ a, err, FF_COPY_WRITE, src_path, dst_path);
            if (lseek(in, 0, SEEK_SET) < 0)
                S_croak_copy(aTHX_ a, errno, FF_COPY_READ, src_path, dst_path);
            content = read_to_end(&in, total, max, limit, src_path, &reread, &intr);
            total = SvCUR(content);
            err = ff_write_all(a->fd, SvPVX(content), total, &intr);
            if (err)
                S_croak_copy(aTHX_ a, err, FF_COPY_WRITE, src_path, dst_path);
        }
        if (total > max)    /* it grew while it was copied */
            S_croak_copy(aTHX_ a, 0, FF_COPY_READ, src_path, dst_path);
        if (ors_len) {      /* $\, as the reference's print appends it */
            err = ff_write_all(a->fd, ors, ors_len, &intr);
            if (err)
                S_croak_copy(aTHX_ a, err, FF_COPY_WRITE, src_path, dst_path);
        }
    }
    err = ff_atomic_commit(a);
    if (err)
        croak_step(a, err, dst_path);
    LEAVE;
    /* $! as the reference's file_set_contents leaves it */
    SETERRNO(total + ors_len ? 0 : ENOTTY, 0);
    return 1;
}

/* The reference stops reading at the first 8 KiB sysread that brings the
 * total past max: on a regular file, after this many bytes (or at its
 * end). Reading no further leaves the handle where the reference leaves it,
 * also when it dies "too long". */
#define FF_SYSREAD_BLOCK 8192

/* The caller's handle while safe_read_from reads its fd: signal handlers
 * that run on EINTR may close or reopen it, and the fd number may then be
 * another file's. */
struct ff_handle_read {
    struct ff_guard guard;
    IO *io;
    PerlIO *fp;
    int fd;
    SV *name;       /* the file's name, or NULL: "input" */
};

/* The ff_on_eintr callback of read_regular: perl's signal handlers, then
 * EBADF, as the reference's next sysread fails, when they left the handle
 * on another fd (or closed). */
static int S_on_eintr_handle(void *ctx)
{
    dTHX;
    struct ff_handle_read *h = (struct ff_handle_read *)ctx;
    int signalled = ffxs_on_eintr(&h->guard);

    if (IoIFP(h->io) == h->fp && PerlIO_fileno(h->fp) == h->fd)
        return signalled;
    if (h->name)
        croak_errno(EBADF, "unable to read file '%" SVf "' - ", SVfARG(h->name));
    croak_errno(EBADF, "unable to read input - ");
}

SV *ffxs_read_regular(pTHX_ SV *fh, SV *max_sv, SV *name, bool *done)
{
    struct ff_handle_read handle = { { NULL, 0, FALSE, TRUE, NULL, NULL }, NULL, NULL, -1, NULL };
    struct ff_eintr intr = { S_on_eintr_handle, &handle, FFXS_PENDING };
    GV *gv = NULL;
    IO *io;
    PerlIO *fp;
    Stat_t st;
    size_t max, limit, got;
    int fd, err;
    SV *content;

    /* only what sysread reads straight from an fd: a glob or a reference
     * to one (IO::Handle objects), not tied, open for reading, no :utf8 */
    if (SvROK(fh) && isGV_with_GP(SvRV(fh)))
        gv = (GV *)SvRV(fh);
    else if (isGV_with_GP(fh))
        gv = (GV *)fh;
    if (!gv || !(io = GvIO(gv)) || !(fp = IoIFP(io)))
        return NULL;
    if (SvRMAGICAL(io) && mg_find((SV *)io, PERL_MAGIC_tiedscalar))
        return NULL;
    if ((IoTYPE(io) != IoTYPE_RDONLY && IoTYPE(io) != IoTYPE_RDWR) || PerlIO_isutf8(fp))
        return NULL;
    fd = PerlIO_fileno(fp);
    if (fd < 0)
        return NULL;

    max = max_arg(max_sv, "safe_read_from");
    limit = (max / FF_SYSREAD_BLOCK + 1) * FF_SYSREAD_BLOCK;
    ENTER;
    hold_in_scope((SV *)io);    /* a handler may drop the last reference */
    handle.io = io;
    handle.fp = fp;
    handle.fd = fd;
    handle.name = SvOK(name) ? name : NULL;
    /* a regular file: read whole, with one read(2) of fstat's size and a
     * byte more (the reference's 8 KiB sysreads, up to the one that
     * passes max; a short read at that size is the end, with no read of 0
     * after it); anything else: the reference's first sysread, and the
     * caller's sysreads go on unless it found the end */
    if (PerlLIO_fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        content = read_handle(fd, st.st_size > 0 ? (size_t)st.st_size : 0, max, limit,
                              handle.name, &intr);
        *done = TRUE;
    } else {
        content = sv_2mortal(newSV(FF_SYSREAD_BLOCK));
        err = ff_read_some(fd, SvPVX(content), FF_SYSREAD_BLOCK, &got, &intr);
        if (err)
            croak_errno(err, "unable to read %s%" SVf "%s - ", handle.name ? "file '" : "input",
                        SVfARG(handle.name ? handle.name : &PL_sv_no), handle.name ? "'" : "");
        if (got > max)
            croak_too_long(handle.name);
        SvCUR_set(content, got);
        *done = got == 0;
    }
    *SvEND(content) = '\0';
    SvPOK_only(content);
    if (TAINTING_get)
        SvTAINTED_on(content);
    LEAVE;
    SETERRNO(0, 0);     /* as the reference's sysread leaves it */
    return content;
}
