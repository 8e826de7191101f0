/* xs_common.c - the perl helpers shared by file_set_contents, the streaming
 * writer and file_set_contents_many (see xs_common.h): arguments read the
 * way perl reads them, the bytes a value writes as, errors and warnings in
 * perl's words, signal handlers on EINTR, the start of a write. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
/* perl 5.20's inline.h defines a static S_croak_memory_wrap that only Newx
 * and friends use: this file has none, so it would warn "defined but not used" */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include "perl.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"
#include <unistd.h>     /* lseek */

/* The reference's scope, which has no `use locale`, while perl formats a
 * value: PL_curcop pointing to a COP without hints and PL_hints cleared,
 * the two perl decides on `use locale` by (IN_LC). Nothing that runs in
 * between may run user code, warn or croak: both are put back directly. */
struct ffxs_plain_scope {
    COP *cop;
    U32 saved_hints;
    COP plain;
};

static void S_enter_plain_scope(pTHX_ struct ffxs_plain_scope *s)
{
    s->cop = PL_curcop;
    s->saved_hints = PL_hints;
    Zero(&s->plain, 1, COP);
    PL_curcop = &s->plain;
    PL_hints = 0;
}

static void S_leave_plain_scope(pTHX_ struct ffxs_plain_scope *s)
{
    PL_curcop = s->cop;
    PL_hints = s->saved_hints;
}

void ffxs_cat_errno(pTHX_ SV *msg, int err)
{
    struct ffxs_plain_scope scope;
    /* perl's $! magic on a private SV: the caller's $! may be tied or
     * localized, and its FETCH (user code) may not run in the plain scope */
    SV *text = sv_newmortal();

    sv_magic(text, NULL, PERL_MAGIC_sv, "!", 1);
    SETERRNO(err, 0);
    S_enter_plain_scope(aTHX_ &scope);
    sv_catsv(msg, text);
    S_leave_plain_scope(aTHX_ &scope);
    SETERRNO(err, 0);
}


/* "<formatted prefix><$! text>" for err, with "\n" or (without it, croak_sv
 * adds perl's " at FILE line N."), mortal; $! is left at err. */
static SV *S_errno_message(pTHX_ int err, bool newline, const char *fmt, va_list *args)
{
    SV *msg = sv_2mortal(newSVpvs(""));

    sv_vcatpvf(msg, fmt, args);
    ffxs_cat_errno(aTHX_ msg, err);
    if (newline)
        sv_catpvs(msg, "\n");
    SETERRNO(err, 0);
    return msg;
}

void ffxs_croak_errno(pTHX_ int err, const char *fmt, ...)
{
    va_list args;
    SV *msg;

    va_start(args, fmt);
    msg = S_errno_message(aTHX_ err, TRUE, fmt, &args);
    va_end(args);
    croak_sv(msg);
}

void ffxs_croak_errno_at(pTHX_ int err, const char *fmt, ...)
{
    va_list args;
    SV *msg;

    va_start(args, fmt);
    msg = S_errno_message(aTHX_ err, FALSE, fmt, &args);
    va_end(args);
    croak_sv(msg);
}

void ffxs_warn_soft(pTHX_ U32 cat, bool dflt, const char *fmt, ...)
{
    va_list args;
    SV *msg;

    if (!(dflt ? ckWARN_d(cat) : ckWARN(cat)))
        return;
    va_start(args, fmt);
    msg = vmess(fmt, &args);
    va_end(args);
    warn_sv(msg);    /* unlike Perl_warner, never dies for FATAL */
}

/* A plain number (no string form yet) formatted in place, in the
 * reference's scope (no `use locale`: 1.5 is "1.5"). */
static void S_stringify_number(pTHX_ SV *sv)
{
    struct ffxs_plain_scope scope;

    S_enter_plain_scope(aTHX_ &scope);
    (void)SvPV_nomg_nolen(sv);
    S_leave_plain_scope(aTHX_ &scope);
    /* perl leaves a number's string form uncached where the locale could
     * change it: this one is final, or the next SvPV would format it again
     * in the caller's locale */
    SvPOK_on(sv);
}

/* The string form of the reference sv (a snapshot) in a new mortal, as
 * perl's SvPV makes it - overloading's result, or "Class=HASH(0x...)" -
 * but with a number that "" returns formatted as in the reference's scope:
 * perl would format it in the caller's, under its `use locale`. */
static SV *S_stringified_ref(pTHX_ SV *sv)
{
    SV *str = sv_newmortal();

    if (SvAMAGIC(sv)) {
        SV *res = AMG_CALLunary(sv, string_amg);   /* "" (or its fallback) once */

        if (!res || (SvROK(res) && SvRV(res) == SvRV(sv))) {
            /* no string form of its own: perl's for a plain object (its
             * class, "__ANON__" for a deleted one, its type and address) */
            HV *stash = SvSTASH(SvRV(sv));
            const char *name = HvNAME_get(stash);

            if (name) {
                sv_setpvn(str, name, HvNAMELEN_get(stash));
                if (HvNAMEUTF8(stash))
                    SvUTF8_on(str);
            } else {
                sv_setpvs(str, "__ANON__");
            }
            sv_catpvf(str, "=%s(0x%" UVxf ")", sv_reftype(SvRV(sv), 0), PTR2UV(SvRV(sv)));
            return str;
        }
        sv_setsv_nomg(str, res);        /* (res may be anyone's) */
        if (SvTAINTED(res))             /* as perl's SvPV keeps it, for -T's checks */
            SvTAINTED_on(str);
        if (!SvOK(str)) {               /* undef: "", warned once as perl does */
            (void)SvPV_nomg_nolen(str);
            sv_setpvs(str, "");
            return str;
        }
        return stringified(str);        /* another object: its "" in turn, as perl does */
    }
    sv_copypv_nomg(str, sv);
    return str;
}

SV *ffxs_stringified(pTHX_ SV *sv)
{
    if (SvPOKp(sv))
        return sv;
    if (SvROK(sv))
        return S_stringified_ref(aTHX_ sv);
    if (SvNOKp(sv))
        S_stringify_number(aTHX_ sv);
    else
        (void)SvPV_nomg_nolen(sv);
    if (!SvPOKp(sv)) {
        /* a glob keeps no string form ("*main::G" is made anew each time):
         * a copy of it, so that SvPVX and SvCUR are the name's */
        SV *str = sv_newmortal();

        sv_copypv_nomg(str, sv);
        return str;
    }
    return sv;
}

NV ffxs_number_arg(pTHX_ SV *sv, const char *op)
{
    SV *copy;
    const char *pv;
    STRLEN len;

    if (!SvGMAGICAL(sv) && SvNOK(sv))
        return SvNVX(sv);
    if (!SvGMAGICAL(sv) && SvIOK(sv))
        return SvIsUV(sv) ? (NV)SvUVX(sv) : (NV)SvIVX(sv);
    copy = sv_newmortal();
    sv_setsv_nomg(copy, sv);
    if (SvROK(copy) || looks_like_number(copy))
        return SvNV_nomg(copy);
    pv = SvPV_nomg_const(copy, len);
    warn_soft(packWARN(WARN_NUMERIC), FALSE, "Argument \"%" SVf "\" isn't numeric in %s",
              SVfARG(copy), op);
    return Atof(pv);
}

bool ffxs_safe_path(pTHX_ SV *path, const char *op)
{
    const char *pv = SvPVX(path), *nul = (const char *)memchr(pv, '\0', SvCUR(path));

    if (!nul)
        return TRUE;
    SETERRNO(ENOENT, LIB_INVARG);
    warn_soft(packWARN(WARN_SYSCALLS), FALSE, "Invalid \\0 character in %s for %s: %s\\0%s",
              "pathname", op, pv, nul + 1);
    return FALSE;
}

void ffxs_croak_unless_safe(pTHX_ SV *path, const char *op, IV pid)
{
    /* ENOENT, like open; set here: the warning's handler may change errno */
    if (!safe_path(path, op))
        croak_errno(ENOENT, "unable to open file '%" SVf ".tmp.%" IVdf "' - ", SVfARG(path), pid);
}

void ffxs_options_arg(pTHX_ HV *hv, SV *force, bool force_ok, struct ff_options *opt,
                      bool *force_utf8, const char *op)
{
    if (force ? SvOK(force) : force_ok)
        croak("force_utf8 argument given with an options hash: use its 'utf8' key\n");
    parse_options(hv, opt, force_utf8, NULL, op);
}

void ffxs_write_args(pTHX_ SV *perm, SV *force, bool force_ok, struct ff_options *opt,
                     bool *force_utf8, const char *op)
{
    if (perm && FF_OPTIONS_REF(perm)) {
        options_arg((HV *)SvRV(perm), force, force_ok, opt, force_utf8, op);
        return;
    }
    if (perm && SvOK(perm)) {
        /* The reference's sysopen refuses a tainted perm: the value
         * counts, not only the scalar, so an object whose overloaded
         * number is tainted is refused too. Its 0+ or "" runs inside
         * number_arg and marks PL_tainted as any read of a tainted
         * value does: judged after it, from a clean flag, which is
         * put back afterwards (tainted data may have set it). */
        bool was_tainted = TAINT_get;

        TAINT_NOT;
        if (SvTAINTED(perm))
            TAINT;
        opt->perm = (mode_t)(SvIOK(perm) ? SvIVX(perm) : I_V(number_arg(perm, op)));
        taint_proper(NULL, op);
        TAINT_set(was_tainted);
    }
    if (force)
        *force_utf8 = SvTRUE_nomg(force);
}

size_t ffxs_max_arg(pTHX_ SV *max, const char *op)
{
    NV nv;

    if (!max || !SvTRUE_nomg(max))
        return FF_DEFAULT_MAX;
    nv = number_arg(max, op);
    return Perl_isnan(nv) || nv >= (NV)SSize_t_MAX ? (size_t)SSize_t_MAX
           : !(nv > 0) ? 0 : (size_t)nv;
}

/* "file '<name>'", or "input" for a NULL name: what the reference's
 * messages say they read */
static SV *S_subject(pTHX_ SV *name)
{
    SV *subject;

    if (!name)
        return sv_2mortal(newSVpvs("input"));
    subject = sv_2mortal(newSVpvs("file '"));
    sv_catsv(subject, name);
    sv_catpvs(subject, "'");
    return subject;
}

void ffxs_croak_too_long(pTHX_ SV *name)
{
    SV *msg = S_subject(aTHX_ name);

    sv_catpvs(msg, " too long - aborting\n");
    SETERRNO(0, 0);
    croak_sv(msg);
}

SV *ffxs_read_buffer(pTHX_ size_t cap, int fd, int *on_fuse)
{
    SV *sv = newSV_type(SVt_PV);
    char *pv;

    /* perl's own block (glibc reuses a freed one: an aligned one it maps
     * afresh each time, a page fault for each page the read fills) unless
     * alignment makes the read one FUSE request, on FUSE: above 128 KiB a
     * read is more than one anyway (untorn checks it) */
    if (!ff_one_request_anywhere(cap) && cap <= FF_FUSE_REQUEST && *on_fuse < 0)
        *on_fuse = ff_fd_on_fuse(fd);
    if (ff_one_request_anywhere(cap) || cap > FF_FUSE_REQUEST || !*on_fuse) {
        Newx(pv, cap + 1, char);
        SvPV_set(sv, pv);
        SvLEN_set(sv, cap + 1);
        return sv;
    }
    {
        /* perl's block with room to start on a page, the start moved with
         * sv_chop (OOK): it stays on the heap, which glibc reuses, where
         * posix_memalign's block is mapped afresh on every call (a page
         * fault for each page the read fills: 147-224 us a 127 KiB read on
         * t/fusefs, this 113-116, perl's copy of it on assignment included).
         * sv_chop keeps the offset in the bytes before the new start: a
         * byte, or a 0 and a STRLEN */
        const size_t room = 1 + sizeof(STRLEN), len = room + FF_PAGE - 1 + cap + 1;
        size_t skip;

        Newx(pv, len, char);
        /* room <= skip < room + FF_PAGE, pv + skip on a page */
        skip = room + (FF_PAGE - ((size_t)(pv + room) & (FF_PAGE - 1))) % FF_PAGE;
        /* the bytes before the start stay in the string's buffer (perl
         * shows them: Devel::Peek, a core dump): none of another string's
         * that glibc's block held before */
        Zero(pv, skip, char);
        SvPV_set(sv, pv);
        SvLEN_set(sv, len);
        SvCUR_set(sv, skip);
        SvPOK_only(sv);
        sv_chop(sv, pv + skip);
        SvCUR_set(sv, 0);
    }
    return sv;
}

/* read_on's loop, reading with read(2) at *fd's offset (at < 0) or pread(2)
 * from at; *several: more than one read returned bytes, or one read may
 * have been more than one FUSE request. rr (NULL: none): *fd is rr->path's,
 * opened by the caller at offset 0, and a read that a concurrent replace
 * failed starts over with the new file (ff_read_again). */
static SV *S_read_on(pTHX_ SV *content, int *fd, off_t at, size_t size, size_t max,
                     size_t read_limit, SV *name, struct ff_reread *rr,
                     const struct ff_eintr *intr, bool *several)
{
    /* one read of the whole file plus a byte that would show it grew */
    size_t total = SvCUR(content), cap = size ? size + 1 : FF_GROW_START, got;
    unsigned reads = 0;

    if (cap < total + 1)
        cap = total + 1;
    if (cap > read_limit)
        cap = read_limit;
    SvGROW(content, cap + 1);
    /* false only for one read that is one FUSE request */
    *several = total || ff_more_than_one_request(SvPVX(content), cap);
    for (;;) {
        size_t eof_at = size > total ? size - total : 0;
        int err = at < 0
                  ? ff_read_full(*fd, SvPVX(content) + total, cap - total, eof_at, &got, &reads,
                                 intr)
                  : ff_pread_full(*fd, SvPVX(content) + total, cap - total, at + (off_t)total,
                                  eof_at, &got, &reads, intr);

        if (err && rr && ff_read_again(rr, fd, err, intr)) {
            /* a writer replaced the file: the new one, from its start */
            do
                err = ff_size_hint(*fd, &size, intr);
            while (err && ff_read_again(rr, fd, err, intr));
            if (!err) {
                total = 0;
                reads = 0;
                cap = size ? size + 1 : FF_GROW_START;
                if (cap > read_limit)
                    cap = read_limit;
                SvGROW(content, cap + 1);
                *several = ff_more_than_one_request(SvPVX(content), cap);
                continue;
            }
        }
        if (err)
            croak_errno(err, "unable to read %" SVf " - ", SVfARG(S_subject(aTHX_ name)));
        total += got;
        if (total > max)
            croak_too_long(name);
        if (total < cap || total == read_limit)
            break;                              /* end of file */
        cap = cap > read_limit / 2 ? read_limit : cap * 2;
        SvGROW(content, cap + 1);
        *several = TRUE;    /* (its end a read of 0 found, which another version may answer) */
    }
    if (reads > 1)
        *several = TRUE;    /* (a short read, and the rest from another version) */
    SvCUR_set(content, total);
    *SvEND(content) = '\0';
    SvPOK_only(content);
    if (TAINTING_get)
        SvTAINTED_on(content);
    return content;
}

/* read_to_end and read_handle: start and rr as untorn takes them */
static SV *S_read_all(pTHX_ int *fd, off_t start, size_t size, size_t max, size_t read_limit,
                      SV *name, struct ff_reread *rr, const struct ff_eintr *intr)
{
    /* the buffer read_on asks for, at once (read_limit > max >= 0) */
    size_t cap = size ? size + 1 : FF_GROW_START;
    int on_fuse = -1;
    bool several;
    SV *content;

    if (cap > read_limit)
        cap = read_limit;
    content = S_read_on(aTHX_ sv_2mortal(read_buffer(cap, *fd, &on_fuse)), fd, -1, size, max,
                        read_limit, name, rr, intr, &several);
    return several ? untorn(content, fd, on_fuse, start, max, read_limit, name, rr, intr)
                   : content;
}

SV *ffxs_read_to_end(pTHX_ int *fd, size_t size, size_t max, size_t read_limit, SV *name,
                     struct ff_reread *rr, const struct ff_eintr *intr)
{
    return S_read_all(aTHX_ fd, 0, size, max, read_limit, name, rr, intr);
}

SV *ffxs_read_handle(pTHX_ int fd, size_t size, size_t max, size_t read_limit, SV *name,
                     const struct ff_eintr *intr)
{
    return S_read_all(aTHX_ &fd, -1, size, max, read_limit, name, NULL, intr);
}

SV *ffxs_untorn(pTHX_ SV *content, int *fd, int on_fuse, off_t start, size_t max,
                size_t read_limit, SV *name, struct ff_reread *rr, const struct ff_eintr *intr)
{
    bool handle = start < 0;
    int tries;

    if (on_fuse < 0)
        on_fuse = ff_fd_on_fuse(*fd);
    if (!on_fuse || !ff_fd_rereadable(*fd))
        return content;
    if (handle) {
        off_t end = lseek(*fd, 0, SEEK_CUR);     /* (never EINTR) */

        if (end < 0)
            croak_errno(errno, "unable to read %" SVf " - ", SVfARG(S_subject(aTHX_ name)));
        start = end - (off_t)SvCUR(content);
    }
    /* reads in all: the first, each check, each read again */
    for (tries = 2;; tries += 2) {
        size_t len = SvCUR(content);
        bool several;
        int same, err = ff_file_matches(*fd, start, SvPVX(content), len, 1, &same, intr);

        if (err && rr && ff_read_again(rr, fd, err, intr))
            same = err = 0;     /* replaced meanwhile: the new file, read below */
        if (err)
            croak_errno(err, "unable to read %" SVf " - ", SVfARG(S_subject(aTHX_ name)));
        if (same)
            break;
        if (tries + 2 > FF_TORN_TRIES)
            croak_errno(EAGAIN, "unable to read %" SVf " - changed while read, %d reads: ",
                        SVfARG(S_subject(aTHX_ name)), tries);
        /* another version came: read it whole (the size asked as for the
         * first read), then check that one */
        content = S_read_on(aTHX_ sv_2mortal(read_buffer(len + 1 < read_limit ? len + 1
                                                                                : read_limit,
                                                           *fd, &on_fuse)),
                            fd, start, len, max, read_limit, name, rr, intr, &several);
    }
    if (handle && tries > 2 && lseek(*fd, start + (off_t)SvCUR(content), SEEK_SET) < 0)
        croak_errno(errno, "unable to read %" SVf " - ", SVfARG(S_subject(aTHX_ name)));
    return content;
}

/* Savestack destructor of close_read_at_leave. */
static void S_close_read_fd(pTHX_ void *fdp)
{
    int *fd = (int *)fdp;

    PERL_UNUSED_CONTEXT;
    if (*fd >= 0) {
        ff_close_read(*fd);
        *fd = -1;
    }
}

void ffxs_close_read_at_leave(pTHX_ int *fd)
{
    SAVEDESTRUCTOR_X(S_close_read_fd, fd);
}

const char *ffxs_payload(pTHX_ SV *data, bool force_utf8, STRLEN *len, const char *op)
{
    const char *pv;

    if (!data || !SvOK(data)) {
        warn_soft(packWARN(WARN_UNINITIALIZED), FALSE, "Use of uninitialized value in %s", op);
        *len = 0;
        return "";
    }
    data = stringified(data);
    pv = SvPV_nomg_const(data, *len);
    if (SvUTF8(data)) {
        if (!force_utf8 && !is_utf8_invariant_string((const U8 *)pv, *len)) {
            bool still_utf8 = TRUE;
            STRLEN bytes_len = *len;
            U8 *bytes = bytes_from_utf8((const U8 *)pv, &bytes_len, &still_utf8);

            if (!still_utf8) {          /* every char fits in a byte: Latin-1 */
                SAVEFREEPV(bytes);
                *len = bytes_len;
                return (const char *)bytes;
            }
            /* wide characters: written as UTF-8, as print does (the
             * warning's handler cannot reach data, a snapshot) */
            warn_soft(packWARN(WARN_UTF8), TRUE, "Wide character in %s", op);
        }
    } else if (force_utf8 && !is_utf8_invariant_string((const U8 *)pv, *len)) {
        U8 *utf8 = bytes_to_utf8((const U8 *)pv, len);   /* Latin-1 -> UTF-8 */
        SAVEFREEPV(utf8);
        return (const char *)utf8;
    }
    return pv;
}

/* Savestack destructor at the end of ffxs_on_eintr's scope, reached by the
 * handlers' return or by their die or exit: in a child forked by a handler
 * the temp is its parent's, so the child's unwinding (S_discard) must not
 * remove it. */
static void S_handlers_done(pTHX_ void *ctx)
{
    struct ff_guard *g = (struct ff_guard *)ctx;

    if (dollar_pid() != g->pid) {
        g->forked = TRUE;
        if (g->atomic)      /* a batch's own discard checks $$ itself */
            ff_atomic_forget(g->atomic);
    }
}

/* Savestack destructor: a reader's fd closed (unless closed already). */
static void S_close_unwound_fd(pTHX_ void *fdp)
{
    int *fd = (int *)fdp;

    PERL_UNUSED_CONTEXT;
    if (*fd >= 0) {
        ff_close_read(*fd);
        *fd = -1;
    }
}

/* ff_atomic_pin_cwd, or the call fails (before its handlers run: they run
 * once it is done): with no fd to hold the working directory, their chdir
 * would move the call's rest, and its temp would be left behind. */
static void S_pin_cwd(pTHX_ struct ff_atomic *a)
{
    int err = ff_atomic_pin_cwd(a);

    if (!err)
        return;
    ff_atomic_remove_temp(a);   /* before a __DIE__ handler's chdir */
    croak_errno(err, "unable to hold the directory of '%s' while signal handlers run - ",
                a->target);
}

FF_HOT int ffxs_on_eintr(void *ctx)
{
    struct ff_guard *g = (struct ff_guard *)ctx;
#ifdef MULTIPLICITY
    dTHXa(g && g->perl ? (PerlInterpreter *)g->perl : PERL_GET_THX);
#endif

    if (!PL_sig_pending)
        return 0;
    if (g && g->unwind_fd) {
        /* in the reader's scope, before this one's: closes it however
         * the reader ends from here on */
        SAVEDESTRUCTOR_X(S_close_unwound_fd, g->unwind_fd);
        g->unwind_fd = NULL;
    }
    ENTER;
    if (g) {
        if (!g->pid)
            g->pid = dollar_pid();
        SAVEDESTRUCTOR_X(S_handlers_done, g);
        if (g->atomic)      /* the handlers could chdir */
            S_pin_cwd(aTHX_ g->atomic);
        if (g->atomic)      /* the handlers could replace the temp by name */
            ff_atomic_note_temp(g->atomic, AT_FDCWD, g->atomic->temp);
    }
    PERL_ASYNC_CHECK();
    LEAVE;
    if (g && g->forked)
        croak("FastFile: a process forked by a signal handler may not go on with the "
              "%s of process %" IVdf "\n", g->reading ? "read" : "write", g->pid);
    return 1;
}

/* The pending handlers, as a sub: called with G_EVAL, their die is caught */
static XS(S_run_pending_handlers)
{
    dXSARGS;
    PERL_UNUSED_VAR(cv);
    PERL_UNUSED_VAR(items);
    PERL_ASYNC_CHECK();
    XSRETURN_EMPTY;
}

int ffxs_on_eintr_held(void *ctx)
{
    dTHX;
    struct ff_held *h = (struct ff_held *)ctx;
    struct ff_guard *g = h->guard;

    if (!PL_sig_pending)
        return 0;
    if (!h->runner) {       /* freed with the caller's scope */
        h->runner = newXS(NULL, S_run_pending_handlers, __FILE__);
        SAVEFREESV((SV *)h->runner);
    }
    ENTER;
    if (!g->pid)
        g->pid = dollar_pid();
    SAVEDESTRUCTOR_X(S_handlers_done, g);
    save_scalar(PL_errgv);  /* the caller's $@ stays as it was */
    {
        dSP;
        PUSHMARK(SP);
        call_sv((SV *)h->runner, G_EVAL | G_DISCARD | G_NOARGS);
    }
    if (!h->error && SvTRUE(ERRSV)) {
        h->error = newSVsv(ERRSV);
        LEAVE;
        SAVEFREESV(h->error);
    } else {
        LEAVE;
    }
    if (g->forked)
        croak("FastFile: a process forked by a signal handler may not go on with the "
              "%s of process %" IVdf "\n", g->reading ? "read" : "write", g->pid);
    return 1;
}

/* Savestack destructor of discard_at_leave. */
static void S_discard(pTHX_ void *atomic)
{
    PERL_UNUSED_CONTEXT;
    ff_atomic_discard((struct ff_atomic *)atomic);
    ff_atomic_release_cwd((struct ff_atomic *)atomic);     /* (a handler's pin) */
}

void ffxs_discard_at_leave(pTHX_ struct ff_atomic *a)
{
    SAVEDESTRUCTOR_X(S_discard, a);
}

SV *ffxs_temp_verdict(pTHX_ const struct ff_atomic *a, SV *path)
{
    const char *temp = a->temp ? a->temp : "";
    bool temp_utf8 = SvUTF8(path) && is_utf8_string((const U8 *)temp, 0);
#define TEMP UTF8fARG(temp_utf8, strlen(temp), temp)

    switch (a->step) {
    case FF_STEP_TEMP_GONE:
        return sv_2mortal(newSVpvf("its temporary file '%" UTF8f "' was replaced or removed "
                                   "during the call", TEMP));
    case FF_STEP_TEMP_WRITTEN:
        return sv_2mortal(newSVpvf("its temporary file '%" UTF8f "' was written to during the call",
                                   TEMP));
    case FF_STEP_TEMP_CHECK:    /* a look or read that failed: no verdict */
        return sv_2mortal(newSVpvf("unable to check its temporary file '%" UTF8f "'", TEMP));
    default:
        return NULL;
    }
#undef TEMP
}

void ffxs_croak_step(pTHX_ struct ff_atomic *a, int err, SV *path)
{
    const char *temp = a->temp ? a->temp : "";
    /* the temp name is made of the filename's bytes (or of a symlink's) */
    bool temp_utf8 = SvUTF8(path) && is_utf8_string((const U8 *)temp, 0);
#define TEMP UTF8fARG(temp_utf8, strlen(temp), temp)

    /* croak runs user code ($SIG{__DIE__}): the temp goes first, as the
     * cleanup would remove it (same syscalls), so that code never sees it */
    ff_atomic_remove_temp(a);

    switch (a->step) {
    case FF_STEP_OPEN:
        croak_errno(err, "unable to open file '%" UTF8f "' - ", TEMP);
    case FF_STEP_WRITE:
        croak_errno(err, "unable to write '%" UTF8f "' - ", TEMP);
    case FF_STEP_CLOSE:
        croak_errno(err, "closing file '%" UTF8f "' failed - ", TEMP);
    case FF_STEP_SYNC:
        croak_errno(err, "unable to sync '%" UTF8f "' - ", TEMP);
    case FF_STEP_OWNER:
        croak_errno(err, "unable to set owner of '%" UTF8f "' - ", TEMP);
    case FF_STEP_MODE:
        croak_errno(err, "unable to set mode of '%" UTF8f "' - ", TEMP);
    case FF_STEP_RENAME:
        croak_errno(err, "close (rename) atomic file '%" SVf "' failed: ", SVfARG(path));
    case FF_STEP_NOCLOBBER:
        croak_errno(err, "noclobber is not supported by the filesystem of '%" SVf "' - ",
                    SVfARG(path));
    case FF_STEP_SYNC_DIR:
        croak_errno(err, "unable to sync directory of '%" SVf "' - ", SVfARG(path));
    case FF_STEP_MKDIR:
        croak_errno(err, "unable to create parent directories of '%" SVf "' - ", SVfARG(path));
    case FF_STEP_PRESERVE:
        croak_errno(err, "unable to preserve owner and mode of '%" SVf "' - ", SVfARG(path));
    case FF_STEP_STAT:
        croak_errno(err, "unable to stat '%" SVf "' - ", SVfARG(path));
    case FF_STEP_RESOLVE:
        croak_errno(err, "unable to follow symlinks of '%" SVf "' - ", SVfARG(path));
    case FF_STEP_TEMP_GONE:
    case FF_STEP_TEMP_WRITTEN:
    case FF_STEP_TEMP_CHECK:
        croak_errno(err, "unable to replace '%" SVf "' - %" SVf " - ", SVfARG(path),
                    SVfARG(temp_verdict(a, path)));
    case FF_STEP_NONE:
        break;
    }
    croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));
#undef TEMP
}

SV *ffxs_path_arg_after(pTHX_ SV *name, const char *write_op, void (*first)(pTHX_ void *),
                        void *ctx)
{
    SV *path = SvOK(name) ? stringified(name) : NULL;
    /* the name, or the string overloading made of it, as sysopen checks it */
    bool is_tainted = write_op && path && (SvTAINTED(name) || SvTAINTED(path));

    if (path && SvCUR(path) && !is_tainted)
        return path;
    if (first)
        first(aTHX_ ctx);
    if (!path || !SvCUR(path))
        croak("file name is undefined or empty\n");
    TAINT;
    taint_proper(NULL, write_op);
    return path;
}

SV *ffxs_path_arg(pTHX_ SV *name, const char *write_op)
{
    return ffxs_path_arg_after(aTHX_ name, write_op, NULL, NULL);
}

/* A boolean option's value: anything but a reference. */
static bool S_flag_value(pTHX_ const char *key, SV *val)
{
    if (SvROK(val))
        croak("invalid value for option '%s'\n", key);
    return SvTRUE_nomg(val);
}
#define flag_value(key, val) S_flag_value(aTHX_ key, val)

/* One option: key[0..klen) of he, its value val (get-magic run). */
static void S_option(pTHX_ HE *he, const char *key, STRLEN klen, SV *val, struct ff_options *opt,
                     bool *force_utf8, SV **buffer_size, const char *op)
{
#define KEY_IS(name) (klen == sizeof(name) - 1 && memEQ(key, name, klen))
    if (KEY_IS("perm")) {
        if (SvOK(val) && SvTAINTED(val)) {  /* as the positional $perm, as sysopen */
            TAINT;
            taint_proper(NULL, op);
        }
        if (SvOK(val)) {
            /* a number is one (a dualvar by its number, as sysopen
             * reads it); a string must look like one */
            NV mode = SvROK(val) || !(SvNIOK(val) || looks_like_number(val))
                          ? -1 : number_arg(val, "perm");
            if (!(mode >= 0 && mode <= 07777 && mode == (NV)(IV)mode))  /* NaN fails too */
                croak("invalid value for option 'perm'\n");
            opt->perm = (mode_t)mode;
        }
    }
    else if (KEY_IS("utf8"))            *force_utf8 = flag_value(key, val);
    else if (KEY_IS("fsync"))           opt->fsync = flag_value(key, val);
    else if (KEY_IS("preserve"))        opt->preserve = flag_value(key, val);
    else if (KEY_IS("if_changed"))      opt->if_changed = flag_value(key, val);
    else if (KEY_IS("mkdir"))           opt->mkdir = flag_value(key, val);
    else if (KEY_IS("follow_symlinks")) opt->follow_symlinks = flag_value(key, val);
    else if (KEY_IS("noclobber"))       opt->noclobber = flag_value(key, val);
    else if (buffer_size && KEY_IS("buffer_size"))
        /* a copy (get-magic ran already): a later FETCH may delete the
         * key, freeing val, and the caller's scalar gets no number form */
        *buffer_size = sv_mortalcopy_flags(val, SV_NOSTEAL);
    else
        croak("unknown option '%" SVf "'\n", SVfARG(hv_iterkeysv(he)));
#undef KEY_IS
}

void ffxs_parse_options(pTHX_ HV *hv, struct ff_options *opt, bool *force_utf8,
                        SV **buffer_size, const char *op)
{
    HE *he;

    /* A plain hash: its entries read where they are, without perl's
     * iterator (nor resetting the caller's each), as long as their values
     * have no magic: nothing read then runs user code (no FETCH; a
     * reference value is refused before it is used, so no overloading),
     * so the hash cannot change under the walk. At the first value with
     * magic, the iterator reads them all: those read already again, which
     * sets the same options (their reading has no side effect). */
    if (!SvMAGICAL(hv) && HvARRAY(hv)) {
        HE **b = HvARRAY(hv), **last = b + HvMAX(hv);
        STRLEN left = HvTOTALKEYS(hv);       /* (placeholders too: the walk sees them) */

        for (; left && b <= last; b++)
            for (he = *b; he; he = HeNEXT(he)) {
                left--;
                if (HeVAL(he) == &PL_sv_placeholder)    /* a restricted hash's deleted key */
                    continue;
                if (SvMAGICAL(HeVAL(he)))
                    goto iterate;
                S_option(aTHX_ he, HeKEY(he), HeKLEN(he), HeVAL(he), opt, force_utf8,
                         buffer_size, op);
            }
        return;
    }
  iterate:
    hv_iterinit(hv);
    while ((he = hv_iternext(hv))) {
        STRLEN klen;
        const char *key = HePV(he, klen);
        SV *val = hv_iterval(hv, he);

        SvGETMAGIC(val);
        S_option(aTHX_ he, key, klen, val, opt, force_utf8, buffer_size, op);
    }
}

SV *ffxs_path_sv(pTHX_ struct ffxs_path *path)
{
    if (!path->sv)
        path->sv = newSVpvn_flags(path->pv, path->len, SVs_TEMP | (path->utf8 ? SVf_UTF8 : 0));
    return path->sv;
}

/* start_write's steps before the old target is compared: a set up (and
 * its discard registered, unless temp_buf), the caller's held directory
 * adopted, a NUL refused, the target prepared. Returns 0, or the error of
 * a->step. */
static inline int S_setup_write(pTHX_ struct ff_atomic *a, struct ffxs_path *path,
                                const struct ff_options *opt, const struct ff_eintr *intr, IV pid,
                                const char *op, char *temp_buf, int *held_cwd)
{
    int err;

    if (temp_buf) {
        ff_atomic_init_lent(a, path->pv, path->len, opt, intr, temp_buf);
    } else {
        err = ff_atomic_init(a, path->pv, opt, intr);
        if (err)
            croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path_sv(path)));
        discard_at_leave(a);
    }
    if (held_cwd && *held_cwd >= 0)
        ff_atomic_adopt_cwd(a, held_cwd);
    /* ENOENT, like open; set here: the warning's handler may change errno */
    if (memchr(path->pv, '\0', path->len))
        croak_unless_safe(path_sv(path), op, pid);
    return ff_atomic_prepare(a);
}

FF_HOT bool ffxs_start_write(pTHX_ struct ff_atomic *a, struct ffxs_path *path,
                      const struct ff_options *opt,
                      const struct ff_eintr *intr, IV pid, const char *op,
                      const char *buf, STRLEN len, const char *tail, STRLEN tail_len,
                      char *temp_buf, const char *suffix, size_t suffix_len, int *held_cwd)
{
    int err = S_setup_write(aTHX_ a, path, opt, intr, pid, op, temp_buf, held_cwd);

    if (err)
        croak_step(a, err, path_sv(path));
    /* noclobber wins: an existing target is an error even when identical */
    if (opt->if_changed && !opt->noclobber && ff_atomic_unchanged(a, buf, len, tail, tail_len))
        return FALSE;
    err = suffix ? ff_atomic_create_named(a, (long)pid, suffix, suffix_len)
                 : ff_atomic_create(a, (long)pid);
    if (err)
        croak_step(a, err, path_sv(path));
    return TRUE;
}

int ffxs_make_temp(pTHX_ struct ff_atomic *a, struct ffxs_path *path,
                   const struct ff_options *opt, const struct ff_eintr *intr, IV pid,
                   const char *op, const char *suffix, size_t suffix_len, int *held_cwd)
{
    int err = S_setup_write(aTHX_ a, path, opt, intr, pid, op, NULL, held_cwd);

    return err ? err : ff_atomic_create_named(a, (long)pid, suffix, suffix_len);
}
