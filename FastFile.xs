/* FastFile.xs - perl glue: reads the arguments the way perl does, picks the
 * bytes to write, reports errors in perl's words. The syscalls are in ff_io.c. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "ff_io.h"

#define FSC "file_set_contents"

/* Croak with "<formatted prefix><$! text>\n" and leave $! set to err. The
 * text comes from perl's own $! so it matches "$!" in the caller's locale. */
static void S_croak_errno(pTHX_ int err, const char *fmt, ...)
    __attribute__format__(__printf__, pTHX_2, pTHX_3) __attribute__noreturn__;
#define croak_errno(err, ...) S_croak_errno(aTHX_ err, __VA_ARGS__)

static void S_croak_errno(pTHX_ int err, const char *fmt, ...)
{
    SV *msg = sv_2mortal(newSVpvs(""));
    va_list args;

    va_start(args, fmt);
    sv_vcatpvf(msg, fmt, &args);
    va_end(args);
    SETERRNO(err, 0);
    sv_catsv(msg, get_sv("!", GV_ADD));
    sv_catpvs(msg, "\n");
    SETERRNO(err, 0);
    croak_sv(msg);
}

/* What S_on_eintr protects while perl's signal handlers run. */
struct ff_guard {
    SV *data;                 /* the SV whose buffer is being written (held), or NULL */
    struct ff_atomic *atomic; /* the replacement being made */
    IV pid;                   /* $$ of the call: a child forked by a handler
                               * must not remove or write to its parent's temp */
    bool forked;              /* this is such a child */
};

/* sv read-only until the current scope is left: user code that ran now and
 * changed it could free or move the buffer we point into. */
static void S_readonly_in_scope(pTHX_ SV *sv)
{
    if (!SvREADONLY(sv)) {
        SAVESETSVFLAGS(sv, SVf_READONLY, 0);
        SvREADONLY_on(sv);
    }
}

/* sv kept alive until the current scope is left: user code may drop the
 * caller's last reference to it while we write from its buffer. */
static void S_hold_in_scope(pTHX_ SV *sv)
{
    SAVEFREESV(SvREFCNT_inc_simple_NN(sv));
}

/* A warning in category cat (packWARN) when the caller's lexical warnings
 * enable it (by default too, with dflt), but never fatal: a caller's
 * `use warnings FATAL => ...` must not abort a write, as the reference's
 * warnings come from its own scope. Worded and delivered like perl's own
 * (" at FILE line N.", $SIG{__WARN__}). */
static void S_warn_soft(pTHX_ U32 cat, bool dflt, const char *fmt, ...)
    __attribute__format__(__printf__, pTHX_3, pTHX_4);
#define warn_soft(cat, dflt, ...) S_warn_soft(aTHX_ cat, dflt, __VA_ARGS__)

static void S_warn_soft(pTHX_ U32 cat, bool dflt, const char *fmt, ...)
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

/* sv itself when it has a string form, else a mortal copy of it to be
 * stringified: perl caches a number's (or a tied value's) string form in
 * the SV, and the caller's scalar must keep its type (JSON encoders look at
 * its flags). Its get-magic has run. */
static SV *S_stringable(pTHX_ SV *sv)
{
    SV *copy;

    if (SvPOKp(sv))
        return sv;
    copy = sv_newmortal();
    sv_setsv_nomg(copy, sv);
    return copy;
}
#define stringable(sv) S_stringable(aTHX_ sv)

/* sv as a number, as perl numifies it (overloading too), without caching
 * a number in the caller's scalar (a string perm '384' stays a string).
 * A string that is no number warns, never fatally, and counts as its
 * numeric prefix, as in perl. Its get-magic has run. */
static NV S_number_arg(pTHX_ SV *sv, const char *op)
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
#define number_arg(sv, op) S_number_arg(aTHX_ sv, op)

/* perl's IS_SAFE_PATHNAME, with a warning that is never fatal: FALSE (and
 * errno ENOENT, as open gives) for a path with a NUL byte. */
static bool S_safe_path(pTHX_ SV *path, const char *op)
{
    const char *pv = SvPVX(path), *nul = (const char *)memchr(pv, '\0', SvCUR(path));

    if (!nul)
        return TRUE;
    SETERRNO(ENOENT, LIB_INVARG);
    warn_soft(packWARN(WARN_SYSCALLS), FALSE, "Invalid \\0 character in %s for %s: %s\\0%s",
              "pathname", op, pv, nul + 1);
    return FALSE;
}
#define safe_path(path, op) S_safe_path(aTHX_ path, op)

/* The bytes file_set_contents writes for data (the table in the contract).
 * Returns a pointer into data's own buffer (or its copy's, see stringable)
 * unless new bytes are needed; a converted copy is freed when the caller's
 * scope is left. *owner is set to the SV whose buffer is returned, so it
 * can be held and protected while signal handlers run. op names the
 * function in warnings; a warning handler runs with data held and
 * read-only, so the pointer stays good. */
static const char *S_payload(pTHX_ SV *data, bool force_utf8, STRLEN *len, SV **owner,
                             const char *op)
{
    const char *pv;

    *owner = NULL;
    if (!data || !SvOK(data)) {
        warn_soft(packWARN(WARN_UNINITIALIZED), FALSE, "Use of uninitialized value in %s", op);
        *len = 0;
        return "";
    }
    data = stringable(data);
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
            /* wide characters: written as UTF-8, as print does */
            S_hold_in_scope(aTHX_ data);
            ENTER;
            S_readonly_in_scope(aTHX_ data);
            warn_soft(packWARN(WARN_UTF8), TRUE, "Wide character in %s", op);
            LEAVE;
        }
    } else if (force_utf8 && !is_utf8_invariant_string((const U8 *)pv, *len)) {
        U8 *utf8 = bytes_to_utf8((const U8 *)pv, len);   /* Latin-1 -> UTF-8 */
        SAVEFREEPV(utf8);
        return (const char *)utf8;
    }
    *owner = data;
    return pv;
}

/* Savestack destructor at the end of S_on_eintr's scope, reached by the
 * handlers' return or by their die or exit: in a child forked by a handler
 * the temp is its parent's, so the child's unwinding (S_discard) must not
 * remove it. */
static void S_handlers_done(pTHX_ void *ctx)
{
    struct ff_guard *g = (struct ff_guard *)ctx;

    if (SvIV(get_sv("$", GV_ADD)) != g->pid) {
        g->forked = TRUE;
        ff_atomic_forget(g->atomic);
    }
}

/* EINTR, a short write, or the moment before the rename: run perl's pending
 * signal handlers (an alarm must still fire, and before the file is
 * published). ctx is a struct ff_guard, or NULL for the readers. While they
 * run, the SV we are writing from (held by the caller) is read-only: a
 * handler that changed it could free or move the buffer under the write. */
static void S_on_eintr(void *ctx)
{
    dTHX;
    struct ff_guard *g = (struct ff_guard *)ctx;

    if (!PL_sig_pending)
        return;
    ENTER;
    if (g) {
        SAVEDESTRUCTOR_X(S_handlers_done, g);
        if (g->data)
            S_readonly_in_scope(aTHX_ g->data);
    }
    PERL_ASYNC_CHECK();
    LEAVE;
    if (g && g->forked)
        croak("FastFile: a process forked by a signal handler may not go on with the "
              "write of process %" IVdf "\n", g->pid);
}

/* Savestack destructor: whatever of the replacement is still ours goes
 * away, on success (nothing left), croak or a die from a signal handler alike. */
static void S_discard(pTHX_ void *atomic)
{
    PERL_UNUSED_CONTEXT;
    ff_atomic_discard((struct ff_atomic *)atomic);
}

/* Croak for the step of a that failed with err, naming the temp file or the
 * target as the reference does. */
static void S_croak_step(pTHX_ const struct ff_atomic *a, int err, SV *path)
    __attribute__noreturn__;
#define croak_step(a, err, path) S_croak_step(aTHX_ a, err, path)

static void S_croak_step(pTHX_ const struct ff_atomic *a, int err, SV *path)
{
    const char *temp = a->temp ? a->temp : "";
    /* the temp name is made of the filename's bytes (or of a symlink's) */
    bool temp_utf8 = SvUTF8(path) && is_utf8_string((const U8 *)temp, 0);
#define TEMP UTF8fARG(temp_utf8, strlen(temp), temp)

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
    case FF_STEP_STAT:
        croak_errno(err, "unable to stat '%" SVf "' - ", SVfARG(path));
    case FF_STEP_RESOLVE:
        croak_errno(err, "unable to follow symlinks of '%" SVf "' - ", SVfARG(path));
    case FF_STEP_NONE:
        break;
    }
    croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));
#undef TEMP
}

/* The filename argument (its get-magic already run) as a private copy:
 * user code that runs later (overload, tie, signal handlers) cannot free it. */
static SV *S_path_arg(pTHX_ SV *filename)
{
    const char *pv;
    STRLEN len;

    if (!SvOK(filename))
        croak("file name is undefined or empty\n");
    pv = SvPV_nomg_const(stringable(filename), len);
    if (len == 0)
        croak("file name is undefined or empty\n");
    return sv_2mortal(newSVpvn_flags(pv, len, SvUTF8(filename)));
}

/* Savestack destructor for an fd that is only read. */
static void S_close_read_fd(pTHX_ void *fdp)
{
    int *fd = (int *)fdp;

    PERL_UNUSED_CONTEXT;
    if (*fd >= 0) {
        ff_close_read(*fd);
        *fd = -1;
    }
}

/* A boolean option's value: anything but a reference. */
static bool S_flag_value(pTHX_ const char *key, SV *val)
{
    if (SvROK(val))
        croak("invalid value for option '%s'\n", key);
    return SvTRUE_nomg(val);
}

/* Read the options hash: every value's get-magic once, unknown keys and
 * bad values refused before anything is touched. buffer_size is only known
 * where the caller asks for it (the streaming writer). */
static void S_parse_options(pTHX_ HV *hv, struct ff_options *opt, bool *force_utf8,
                            SV **buffer_size)
{
    HE *he;

    hv_iterinit(hv);
    while ((he = hv_iternext(hv))) {
        STRLEN klen;
        const char *key = HePV(he, klen);
        SV *val = hv_iterval(hv, he);
#define KEY_IS(name) (klen == sizeof(name) - 1 && memEQ(key, name, klen))

        SvGETMAGIC(val);
        if (KEY_IS("perm")) {
            if (SvOK(val)) {
                NV mode = SvROK(val) || !looks_like_number(val) ? -1 : number_arg(val, "perm");
                if (!(mode >= 0 && mode <= 07777 && mode == (NV)(IV)mode))  /* NaN fails too */
                    croak("invalid value for option 'perm'\n");
                opt->perm = (mode_t)mode;
            }
        }
        else if (KEY_IS("utf8"))            *force_utf8 = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("fsync"))           opt->fsync = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("preserve"))        opt->preserve = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("if_changed"))      opt->if_changed = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("mkdir"))           opt->mkdir = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("follow_symlinks")) opt->follow_symlinks = S_flag_value(aTHX_ key, val);
        else if (KEY_IS("noclobber"))       opt->noclobber = S_flag_value(aTHX_ key, val);
        else if (buffer_size && KEY_IS("buffer_size"))
            *buffer_size = val;
        else
            croak("unknown option '%" SVf "'\n", SVfARG(hv_iterkeysv(he)));
#undef KEY_IS
    }
}

/* Returns 1 when the file was written, 0 when if_changed found it the same. */
static int S_file_set_contents(pTHX_ SV *filename, SV *data, SV *perm, SV *force)
{
    SV *path, *owner, *ors_owner = NULL;
    const char *buf, *ors = "";
    STRLEN len, ors_len = 0;
    bool force_utf8 = FALSE;
    struct ff_options opt;
    struct ff_atomic atomic, *a = &atomic;   /* this frame outlives its LEAVE */
    struct ff_eintr intr;
    struct ff_guard guard;
    IV pid;
    int err;

    /* The scope is this function's own: its cleanups may point into this
     * frame, so they must run before it returns. */
    ENTER;
    /* every argument's get-magic runs once, before anything else happens */
    SvGETMAGIC(filename);
    if (data)
        SvGETMAGIC(data);
    if (perm)
        SvGETMAGIC(perm);
    if (force)
        SvGETMAGIC(force);

    path = S_path_arg(aTHX_ filename);
    if (SvTAINTED(filename)) {
        TAINT;
        taint_proper(NULL, FSC);
    }
    Zero(&opt, 1, struct ff_options);
    opt.perm = 0644;
    /* only a plain hash is options: an object numifies, as in the reference */
    if (perm && SvROK(perm) && SvTYPE(SvRV(perm)) == SVt_PVHV && !SvOBJECT(SvRV(perm))) {
        if (force && SvOK(force))
            croak("force_utf8 argument given with an options hash: use its 'utf8' key\n");
        S_parse_options(aTHX_ (HV *)SvRV(perm), &opt, &force_utf8, NULL);
    } else {
        if (perm && SvOK(perm)) {
            if (SvTAINTED(perm)) {        /* the reference's sysopen refuses it */
                TAINT;
                taint_proper(NULL, FSC);
            }
            opt.perm = (mode_t)(SvIOK(perm) && !SvGMAGICAL(perm) ? SvIVX(perm)   /* exact */
                                : I_V(number_arg(perm, FSC)));
        }
        force_utf8 = force && SvTRUE_nomg(force);
    }
    buf = S_payload(aTHX_ data, force_utf8, &len, &owner, FSC);
    if (owner)      /* signal handlers run during the write */
        S_hold_in_scope(aTHX_ owner);
    /* $\ : the reference prints the data, so print appends it (not to an
     * encoded copy). Held: a handler that sets $\ frees the old one. */
    if (!force_utf8 && PL_ors_sv && SvOK(PL_ors_sv)) {
        ors = S_payload(aTHX_ PL_ors_sv, FALSE, &ors_len, &ors_owner, FSC);
        if (ors_owner)
            S_hold_in_scope(aTHX_ ors_owner);
    }

    pid = SvIV(get_sv("$", GV_ADD));
    guard.data = owner;
    guard.atomic = a;
    guard.pid = pid;
    guard.forked = FALSE;
    intr.fn = S_on_eintr;
    intr.ctx = &guard;
    err = ff_atomic_init(a, SvPVX(path), &opt, &intr);
    if (err)
        croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));
    SAVEDESTRUCTOR_X(S_discard, a);

    /* ENOENT, like open; set here: the warning's handler may change errno */
    if (!safe_path(path, FSC))
        croak_errno(ENOENT, "unable to open file '%" SVf ".tmp.%" IVdf "' - ", SVfARG(path), pid);

    err = ff_atomic_prepare(a);
    if (err)
        croak_step(a, err, path);
    /* noclobber wins: an existing target is an error even when identical */
    if (opt.if_changed && !opt.noclobber && ff_atomic_unchanged(a, buf, len, ors, ors_len)) {
        LEAVE;
        return 0;
    }
    err = ff_atomic_create(a, (long)pid);
    if (err)
        croak_step(a, err, path);
    a->step = FF_STEP_WRITE;
    err = ff_write_tail_all(a->fd, buf, len, ors, ors_len, &intr);
    if (err)
        croak_step(a, err, path);
    err = ff_atomic_commit(a);
    if (err)
        croak_step(a, err, path);
    LEAVE;
    return 1;
}

#define FGC "file_get_contents"
#define FRF "file_read_firstline"
#define FF_DEFAULT_MAX (1024 * 1024)      /* the pmxcfs file size limit */
#define FF_GROW_START (64 * 1024)         /* for files whose size fstat can't tell */
#define FF_LINE_BLOCK 8192

static SV *S_file_get_contents(pTHX_ SV *filename, SV *max_arg)
{
    SV *path, *content;
    size_t max = FF_DEFAULT_MAX, size, cap, total = 0, got;
    struct ff_eintr intr = { S_on_eintr, NULL };
    int fd = -1, err;

    ENTER;   /* closes fd when this function returns or croaks */
    SvGETMAGIC(filename);
    if (max_arg)
        SvGETMAGIC(max_arg);
    path = S_path_arg(aTHX_ filename);
    if (max_arg && SvTRUE_nomg(max_arg)) {      /* a false max means the default */
        /* compared as a number, like the reference's "$total > $max": a
         * huge max or one that is no number (NaN) means no limit (capped
         * so that max + 1 cannot wrap) */
        NV nv = number_arg(max_arg, FGC);
        max = Perl_isnan(nv) || nv >= (NV)SSize_t_MAX ? (size_t)SSize_t_MAX
              : !(nv > 0) ? 0 : (size_t)nv;
    }

    SAVEDESTRUCTOR_X(S_close_read_fd, &fd);
    err = safe_path(path, FGC)
              ? ff_open_read(SvPVX(path), &fd, &intr) : ENOENT;   /* as open: whatever a
                                                                    * warning handler did */
    if (err)
        croak_errno(err, "can't open '%" SVf "' - ", SVfARG(path));
    /* fstat's size is only a hint: "too long" is decided on the bytes read
     * (sysfs files say 4096 whatever they hold) */
    err = ff_size_hint(fd, &size);
    if (err)
        croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));

    /* one read of the whole file plus a byte that would show it grew */
    cap = size ? size + 1 : FF_GROW_START;
    if (cap > max + 1)
        cap = max + 1;
    content = sv_2mortal(newSV(cap));
    for (;;) {
        err = ff_read_full(fd, SvPVX(content) + total, cap - total, &got, &intr);
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        total += got;
        if (total > max)
            croak("file '%" SVf "' too long - aborting\n", SVfARG(path));
        if (total < cap)
            break;                              /* end of file */
        cap = cap > max / 2 ? max + 1 : cap * 2;
        SvGROW(content, cap + 1);
    }
    SvCUR_set(content, total);
    *SvEND(content) = '\0';
    SvPOK_only(content);
    if (TAINTING_get)
        SvTAINTED_on(content);
    LEAVE;
    return content;
}

/* Where the first record under $/ (rs) ends in buf[0..total): its length
 * with the separator, or 0 while it has not ended. *begin is moved past
 * the newlines that paragraph mode skips. */
static size_t S_record_end(SV *rs, const char *sep, STRLEN sep_len, const char *buf,
                           size_t *begin, size_t scanned, size_t total)
{
    const char *end = buf + total, *hit;

    if (!SvOK(rs))
        return 0;                                   /* undef: the whole file */
    if (SvROK(rs))                                  /* \N: N bytes */
        return total >= sep_len ? sep_len : 0;
    if (sep_len == 0) {                             /* '': paragraph mode */
        while (*begin < total && buf[*begin] == '\n')
            (*begin)++;
        sep = "\n\n";
        sep_len = 2;
    }
    if (scanned < *begin + sep_len - 1)
        scanned = *begin + sep_len - 1;
    if (scanned > total)
        return 0;
    /* the separator may straddle what was read before */
    hit = ninstr(buf + scanned - (sep_len - 1), end, sep, sep + sep_len);
    return hit ? (size_t)(hit - buf) + sep_len : 0;
}

/* The first record of fd under $/ when it is not "\n" (undef, '', \N, any
 * string), chomped: what the reference's <$fh> + chomp give. */
static SV *S_read_record(pTHX_ int fd, SV *path, const struct ff_eintr *intr)
{
    SV *rs = PL_rs, *line, *sep_sv = NULL;
    const char *sep = NULL;
    STRLEN sep_len = 0;
    size_t cap = FF_LINE_BLOCK, total = 0, begin = 0, end = 0, got;
    int err;

    if (SvROK(rs)) {
        IV n = SvIV(SvRV(rs));          /* perl refuses \0 and negatives in $/ */
        sep_len = n > 0 ? (STRLEN)n : 1;
        if (cap > sep_len)
            cap = sep_len;
    } else if (SvOK(rs)) {
        sep_sv = sv_mortalcopy(rs);
        if (!sv_utf8_downgrade(sep_sv, TRUE))       /* the file is read as bytes */
            croak("Wide character in $/");
        sep = SvPV_const(sep_sv, sep_len);
    }
    line = sv_2mortal(newSV(cap));
    for (;;) {
        size_t scanned = total;

        err = ff_read_some(fd, SvPVX(line) + total, cap - total, &got, intr);
        if (err == EISDIR)
            return NULL;
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        if (got == 0)
            break;
        total += got;
        end = S_record_end(rs, sep, sep_len, SvPVX(line), &begin, scanned, total);
        if (end)
            break;
        if (total == cap) {
            cap *= 2;
            SvGROW(line, cap + 1);
        }
    }
    if (!end)                                       /* end of file */
        end = total;
    if (end <= begin && SvOK(rs))
        return NULL;                                /* nothing: empty file */
    /* (undef: an empty file reads as "", once, as readline gives it) */
    /* chomp: paragraph mode removes every trailing newline, a string its
     * one separator, undef and \N nothing */
    if (SvOK(rs) && !SvROK(rs)) {
        if (sep_len == 0) {
            while (end > begin && SvPVX(line)[end - 1] == '\n')
                end--;
        } else if (end - begin >= sep_len && memEQ(SvPVX(line) + end - sep_len, sep, sep_len)) {
            end -= sep_len;
        }
    }
    if (begin)
        Move(SvPVX(line) + begin, SvPVX(line), end - begin, char);
    SvCUR_set(line, end - begin);
    return line;
}

/* The first line of fd without its "\n" (the default $/, the fast path:
 * one 8 KiB read for a short line); NULL for an empty file. */
static SV *S_read_line(pTHX_ int fd, SV *path, const struct ff_eintr *intr)
{
    SV *line;
    size_t cap = FF_LINE_BLOCK, total = 0, got;
    int err;

    line = sv_2mortal(newSV(cap));
    for (;;) {
        char *nl;

        err = ff_read_some(fd, SvPVX(line) + total, cap - total, &got, intr);
        if (err == EISDIR)
            return NULL;
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        if (got == 0) {
            if (total == 0)
                return NULL;
            break;
        }
        nl = (char *)memchr(SvPVX(line) + total, '\n', got);
        total += got;
        if (nl) {
            total = (size_t)(nl - SvPVX(line));  /* chomp: the line without "\n" */
            break;
        }
        if (total == cap) {                      /* a long line: keep reading */
            cap *= 2;
            SvGROW(line, cap + 1);
        }
    }
    SvCUR_set(line, total);
    return line;
}

static SV *S_file_read_firstline(pTHX_ SV *filename)
{
    SV *path, *line;
    struct ff_eintr intr = { S_on_eintr, NULL };
    int fd = -1, err;

    ENTER;   /* closes fd when this function returns or croaks */
    SvGETMAGIC(filename);
    /* no name: undef, as the reference's open of it fails */
    if (!SvOK(filename) || (SvPOKp(filename) && SvCUR(filename) == 0)) {
        if (!SvOK(filename))
            warn_soft(packWARN(WARN_UNINITIALIZED), FALSE, "Use of uninitialized value in %s", FRF);
        LEAVE;
        SETERRNO(ENOENT, LIB_INVARG);
        return &PL_sv_undef;
    }
    path = S_path_arg(aTHX_ filename);

    SAVEDESTRUCTOR_X(S_close_read_fd, &fd);
    err = safe_path(path, FRF)
              ? ff_open_read(SvPVX(path), &fd, &intr) : ENOENT;   /* as open: whatever a
                                                                    * warning handler did */
    if (err == ENOENT) {
        LEAVE;
        SETERRNO(err, 0);
        return &PL_sv_undef;
    }
    if (err)
        croak_errno(err, "file '%" SVf "' exists but open for reading failed - ", SVfARG(path));

    /* NULL: an empty file, or a directory (the reference reads nothing
     * from it; $! stays EISDIR) */
    line = SvPOK(PL_rs) && SvCUR(PL_rs) == 1 && *SvPVX(PL_rs) == '\n'
               ? S_read_line(aTHX_ fd, path, &intr)
               : S_read_record(aTHX_ fd, path, &intr);
    LEAVE;
    if (!line)
        return &PL_sv_undef;
    *SvEND(line) = '\0';
    SvPOK_only(line);
    if (TAINTING_get)
        SvTAINTED_on(line);
    return line;
}

/* FastFile::Writer, the streaming atomic writer (its XSUBs are in Writer.xsh).
 * The temp file is made in new; print, printf and write collect bytes in a
 * struct ff_wbuf that is written with one write(2) each time it fills;
 * commit writes the rest, closes and renames; abort or destruction without
 * commit removes the temp file. */

#define FF_WRITER_CLASS "FastFile::Writer"
#define FF_WRITER_DEFAULT_SIZE (1024 * 1024)   /* one write(2) per MiB */

#define FF_W_OPEN      0   /* accepting data */
#define FF_W_BUSY      1   /* inside write(2) or commit: signal handlers run here */
#define FF_W_COMMITTED 2
#define FF_W_ABORTED   3   /* abort, a failed step, or created in new and not done */

struct ff_writer {
    struct ff_atomic a;   /* temp fd and paths; a.intr is &intr */
    struct ff_eintr intr; /* ctx: &guard */
    struct ff_guard guard;/* the SV written from, if any, and pid */
    struct ff_wbuf wb;    /* the bytes not written yet */
    SV *path;             /* the filename as given, for messages */
    IV pid;               /* $$ of the process that made the temp */
    int state;            /* FF_W_*, an int for SAVEINT */
    bool force_utf8;
};

/* $$, not getpid(): the temp file is named after it. */
static IV S_writer_pid(pTHX)
{
    return SvIV(get_sv("$", GV_ADD));
}
#define writer_pid() S_writer_pid(aTHX)

/* Tags the SV that holds a writer's address: its identity is this table's
 * address, so no other object passes for a writer, and checking it costs no
 * lookup by class name. */
static const MGVTBL S_writer_tag = { NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };

/* The writer behind self; croaks for anything else. */
static struct ff_writer *S_writer_fetch(pTHX_ SV *self)
{
    struct ff_writer *w = NULL;

    if (SvROK(self) && mg_findext(SvRV(self), PERL_MAGIC_ext, &S_writer_tag))
        w = INT2PTR(struct ff_writer *, SvIVX(SvRV(self)));
    if (!w)
        croak(FF_WRITER_CLASS ": not a writer object\n");
    return w;
}
#define writer_fetch(self) S_writer_fetch(aTHX_ self)

/* Croak unless w accepts data. */
static void S_writer_usable(pTHX_ const struct ff_writer *w)
{
    if (w->state != FF_W_OPEN)
        croak(FF_WRITER_CLASS ": %s\n",
              w->state == FF_W_COMMITTED ? "already committed"
              : w->state == FF_W_BUSY ? "busy (called while it writes)"
              : "already aborted");
}
#define writer_usable(w) S_writer_usable(aTHX_ w)

/* A forked child's copy may buffer but never write: the temp is the parent's. */
static void S_writer_own_process(pTHX_ const struct ff_writer *w)
{
    if (writer_pid() != w->pid)
        croak(FF_WRITER_CLASS ": the writer belongs to process %" IVdf "\n", w->pid);
}
#define writer_own_process(w) S_writer_own_process(aTHX_ w)

/* The writer behind self, ready for data. Call it inside ENTER/LEAVE: user
 * code (magic, overloading, signal handlers) may drop the last reference,
 * so w is kept alive until that scope is left. */
static struct ff_writer *S_writer_hold(pTHX_ SV *self)
{
    struct ff_writer *w = writer_fetch(self);

    SAVEFREESV(SvREFCNT_inc_simple_NN(SvRV(self)));
    writer_usable(w);
    return w;
}
#define writer_hold(self) S_writer_hold(aTHX_ self)

/* A guarded step succeeded: leave its S_discard nothing to remove, and
 * return the replacement, to be put back once the scope is left. */
static struct ff_atomic S_disarm(struct ff_atomic *a)
{
    struct ff_atomic ready = *a;

    a->fd = -1;
    a->created = 0;
    a->temp = a->target = NULL;
    return ready;
}

/* One step that writes: append buf[0..n) (from owner's buffer, if owner),
 * or with buf NULL, write the rest and commit. A croak, or a die from a
 * signal handler run on EINTR, unwinds through S_discard (temp closed and
 * removed) and a SAVEINT that leaves the writer aborted. */
static void S_writer_step(pTHX_ struct ff_writer *w, const char *buf, size_t n, SV *owner)
{
    struct ff_atomic ready;
    int err;

    writer_own_process(w);
    ENTER;
    w->state = FF_W_ABORTED;
    SAVEINT(w->state);                  /* left aborted unless it succeeds */
    w->state = FF_W_BUSY;
    SAVEDESTRUCTOR_X(S_discard, &w->a);
    if (owner)      /* held, and read-only while handlers run */
        S_hold_in_scope(aTHX_ owner);
    w->guard.data = owner;
    w->a.step = FF_STEP_WRITE;
    if (buf)
        err = ff_wbuf_append(&w->wb, w->a.fd, buf, n, &w->intr);
    else if (!(err = ff_wbuf_flush(&w->wb, w->a.fd, &w->intr))) {
        ff_wbuf_free(&w->wb);           /* now: nothing slow after the rename */
        err = ff_atomic_commit(&w->a);
    }
    w->guard.data = NULL;
    if (err)
        croak_step(&w->a, err, w->path);
    ready = S_disarm(&w->a);
    LEAVE;
    w->a = ready;
    w->state = FF_W_OPEN;
}
#define writer_step(w, buf, n, owner) S_writer_step(aTHX_ w, buf, n, owner)

/* Append the bytes file_set_contents would write for sv (its get-magic
 * already run); op names the method in warnings. */
static void S_writer_chunk(pTHX_ struct ff_writer *w, SV *sv, const char *op)
{
    SV *owner;
    STRLEN n;
    const char *buf = S_payload(aTHX_ sv, w->force_utf8, &n, &owner, op);

    writer_usable(w);                   /* overloading may have ended it */
    /* the usual case: a copy into the buffer, no write(2), nothing to guard */
    if (!ff_wbuf_fills(&w->wb, n) && !ff_wbuf_append(&w->wb, w->a.fd, buf, n, &w->intr))
        return;
    /* it fills the buffer, or the copy found no memory: the guarded step
     * writes, or tries again and reports it */
    writer_step(w, buf, n, owner);
}
#define writer_chunk(w, sv, op) S_writer_chunk(aTHX_ w, sv, op)

/* print: each item, then $, between items and $\ at the end, is a chunk.
 * ST() reads the stack afresh: user code runs between the items. */
static void S_writer_print(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    const char *op = FF_WRITER_CLASS "::print";
    I32 i;

    for (i = 1; i < items; i++) {
        SV *ofs = i > 1 ? GvSV(PL_ofsgv) : NULL;     /* $, : read afresh, as print does */

        if (ofs && (SvGMAGICAL(ofs) || SvOK(ofs))) {
            SvGETMAGIC(ofs);
            if (SvOK(ofs))
                writer_chunk(w, ofs, op);
        }
        SvGETMAGIC(ST(i));
        writer_chunk(w, ST(i), op);
    }
    if (PL_ors_sv && SvOK(PL_ors_sv))                /* $\ */
        writer_chunk(w, PL_ors_sv, op);
}
#define writer_print(w, ax, items) S_writer_print(aTHX_ w, ax, items)

/* printf: sprintf's own formatting, one chunk. */
static void S_writer_printf(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    SV *formatted;
    const char *pat;
    STRLEN len;
    I32 i;

    if (items < 2)
        croak("Usage: " FF_WRITER_CLASS "::printf(self, format, ...)");
    /* formatted from copies (get-magic once each): sprintf would cache
     * string and number forms in the caller's scalars */
    for (i = 1; i < items; i++)
        ST(i) = sv_mortalcopy(ST(i));
    pat = SvPV_nomg_const(ST(1), len);
    formatted = sv_newmortal();
    sv_setpvs(formatted, "");
    if (DO_UTF8(ST(1)))
        SvUTF8_on(formatted);
    sv_vsetpvfn(formatted, pat, len, NULL, &ST(2), (Size_t)(items - 2), NULL);
    writer_chunk(w, formatted, FF_WRITER_CLASS "::printf");
}
#define writer_printf(w, ax, items) S_writer_printf(aTHX_ w, ax, items)

/* write: one chunk, no $, or $\ . */
static void S_writer_write(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    if (items != 2)
        croak("Usage: " FF_WRITER_CLASS "::write(self, data)");
    SvGETMAGIC(ST(1));
    writer_chunk(w, ST(1), FF_WRITER_CLASS "::write");
}
#define writer_write(w, ax, items) S_writer_write(aTHX_ w, ax, items)

/* new's options: file_set_contents's but if_changed, plus buffer_size. */
static void S_writer_options(pTHX_ SV *opts, struct ff_options *opt, bool *force_utf8,
                             size_t *size)
{
    SV *size_sv = NULL;
    HV *hv;
    NV nv;

    Zero(opt, 1, struct ff_options);
    opt->perm = 0644;
    if (!opts || !SvOK(opts))
        return;
    if (!SvROK(opts) || SvTYPE(SvRV(opts)) != SVt_PVHV)
        croak(FF_WRITER_CLASS ": options must be a hash reference\n");
    hv = (HV *)SvRV(opts);
    if (hv_exists(hv, "if_changed", 10))
        croak(FF_WRITER_CLASS ": option 'if_changed' is not supported by the writer\n");
    S_parse_options(aTHX_ hv, opt, force_utf8, &size_sv);
    if (!size_sv || !SvOK(size_sv))     /* its get-magic ran in S_parse_options */
        return;
    if (SvROK(size_sv) || !looks_like_number(size_sv)
        || !((nv = number_arg(size_sv, "buffer_size")) >= 1 && nv <= (NV)SSize_t_MAX
             && nv == (NV)(size_t)nv))       /* NaN fails too */
        croak("invalid value for option 'buffer_size'\n");
    *size = (size_t)nv;
}
#define writer_options(opts, opt, force_utf8, size) \
    S_writer_options(aTHX_ opts, opt, force_utf8, size)

/* CLASS->new(filename, opts): the temp file made, the object returned
 * (mortal). Every argument is read once, before anything is touched. */
static SV *S_writer_new(pTHX_ SV *klass, SV *filename, SV *opts)
{
    struct ff_writer *w;
    struct ff_options opt;
    struct ff_atomic ready;
    SV *path, *obj;
    HV *stash;
    bool force_utf8 = FALSE;
    size_t size = FF_WRITER_DEFAULT_SIZE;
    int err;

    ENTER;
    SvGETMAGIC(filename);
    if (opts)
        SvGETMAGIC(opts);
    path = S_path_arg(aTHX_ filename);
    if (SvTAINTED(filename)) {
        TAINT;
        taint_proper(NULL, FF_WRITER_CLASS "->new");
    }
    writer_options(opts, &opt, &force_utf8, &size);
    stash = SvROK(klass) && SvOBJECT(SvRV(klass)) ? SvSTASH(SvRV(klass))
                                                 : gv_stashsv(klass, GV_ADD);

    /* From here the object owns w: a croak frees it through DESTROY, after
     * S_discard (the savestack, not the tmps stack: die frees mortals first). */
    Newxz(w, 1, struct ff_writer);
    w->a.fd = -1;
    w->state = FF_W_ABORTED;
    obj = newRV_noinc(newSViv(PTR2IV(w)));
    sv_magicext(SvRV(obj), NULL, PERL_MAGIC_ext, &S_writer_tag, NULL, 0);
    SAVEFREESV(obj);
    sv_bless(obj, stash);
    SvREADONLY_on(SvRV(obj));
    w->path = SvREFCNT_inc_simple_NN(path);
    w->wb.size = size;
    w->force_utf8 = force_utf8;
    w->pid = writer_pid();
    w->guard.pid = w->pid;
    w->guard.atomic = &w->a;
    w->intr.fn = S_on_eintr;
    w->intr.ctx = &w->guard;
    err = ff_atomic_init(&w->a, SvPVX(path), &opt, &w->intr);
    if (err)    /* as file_set_contents words it */
        croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));

    /* ENOENT, like open; set here: the warning's handler may change errno */
    if (!safe_path(path, FF_WRITER_CLASS "->new"))
        croak_errno(ENOENT, "unable to open file '%" SVf ".tmp.%" IVdf "' - ",
                    SVfARG(path), w->pid);

    SAVEDESTRUCTOR_X(S_discard, &w->a);
    err = ff_atomic_prepare(&w->a);
    if (!err)
        err = ff_atomic_create(&w->a, (long)w->pid);
    if (err)
        croak_step(&w->a, err, path);
    ready = S_disarm(&w->a);
    SvREFCNT_inc_simple_void_NN(obj);
    LEAVE;
    w->a = ready;
    w->state = FF_W_OPEN;
    return sv_2mortal(obj);
}
#define writer_new(klass, filename, opts) S_writer_new(aTHX_ klass, filename, opts)

/* Write the rest, close, rename. Call it inside writer_hold's scope. */
static void S_writer_commit(pTHX_ struct ff_writer *w)
{
    writer_step(w, NULL, 0, NULL);
    w->state = FF_W_COMMITTED;
    ff_atomic_discard(&w->a);   /* only the paths are left to free */
    ff_wbuf_free(&w->wb);
}
#define writer_commit(w) S_writer_commit(aTHX_ w)

/* Close the temp and free the buffer. Only the process that made the temp
 * removes it: a forked copy closes its fd and leaves the file alone. */
static void S_writer_discard(pTHX_ struct ff_writer *w)
{
    if (writer_pid() != w->pid)
        w->a.created = 0;
    ff_atomic_discard(&w->a);
    ff_wbuf_free(&w->wb);
}
#define writer_discard(w) S_writer_discard(aTHX_ w)

/* FALSE when there is nothing to abort (committed or aborted already). */
static bool S_writer_abort(pTHX_ struct ff_writer *w)
{
    if (w->state == FF_W_BUSY)
        writer_usable(w);       /* croaks: a signal handler inside one of its writes */
    if (w->state != FF_W_OPEN)
        return FALSE;
    writer_discard(w);
    w->state = FF_W_ABORTED;
    return TRUE;
}
#define writer_abort(w) S_writer_abort(aTHX_ w)

/* DESTROY: an uncommitted temp is removed. Quiet on anything but a writer. */
static void S_writer_destroy(pTHX_ SV *self)
{
    struct ff_writer *w;

    if (!SvROK(self) || !mg_findext(SvRV(self), PERL_MAGIC_ext, &S_writer_tag)
        || !(w = INT2PTR(struct ff_writer *, SvIVX(SvRV(self)))))
        return;
    SvIV_set(SvRV(self), 0);
    writer_discard(w);
    SvREFCNT_dec(w->path);
    Safefree(w);
}
#define writer_destroy(self) S_writer_destroy(aTHX_ self)

MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

void
file_set_contents(SV *filename, SV *data = NULL, SV *perm = NULL, SV *force_utf8 = NULL, ...)
  PREINIT:
    int wrote;
  PPCODE:
    wrote = S_file_set_contents(aTHX_ filename, data, perm, force_utf8);
    mXPUSHi(wrote);

void
file_get_contents(SV *filename, SV *max = NULL, ...)
  PREINIT:
    SV *content;
  PPCODE:
    content = S_file_get_contents(aTHX_ filename, max);
    XPUSHs(content);

void
file_read_firstline(SV *filename, ...)
  PREINIT:
    SV *line;
  PPCODE:
    line = S_file_read_firstline(aTHX_ filename);
    XPUSHs(line);

INCLUDE: Writer.xsh

INCLUDE: Batch.xsh
