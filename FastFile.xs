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

/* The bytes file_set_contents writes for data (the table in the contract).
 * Returns a pointer into data's own buffer unless new bytes are needed; a
 * converted copy is freed when the caller's scope is left. *owner is set to
 * the SV whose buffer is returned, so it can be protected while signal
 * handlers run. op names the function in warnings. */
static const char *S_payload(pTHX_ SV *data, bool force_utf8, STRLEN *len, SV **owner,
                             const char *op)
{
    const char *pv;

    *owner = NULL;
    if (!data || !SvOK(data)) {
        Perl_ck_warner(aTHX_ packWARN(WARN_UNINITIALIZED), "Use of uninitialized value in %s", op);
        *len = 0;
        return "";
    }
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
            Perl_ck_warner_d(aTHX_ packWARN(WARN_UTF8), "Wide character in %s", op);
        }
    } else if (force_utf8 && !is_utf8_invariant_string((const U8 *)pv, *len)) {
        U8 *utf8 = bytes_to_utf8((const U8 *)pv, len);   /* Latin-1 -> UTF-8 */
        SAVEFREEPV(utf8);
        return (const char *)utf8;
    }
    *owner = data;
    return pv;
}

/* EINTR: run perl's pending signal handlers (an alarm must still fire). While
 * they run, the SV we are writing from is read-only: a handler that changed
 * it could free the buffer under the write. */
static void S_on_eintr(void *ctx)
{
    dTHX;
    SV *owner = (SV *)ctx;

    ENTER;
    if (owner && !SvREADONLY(owner)) {
        SAVESETSVFLAGS(owner, SVf_READONLY, 0);
        SvREADONLY_on(owner);
    }
    PERL_ASYNC_CHECK();
    LEAVE;
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
    pv = SvPV_nomg_const(filename, len);
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
                NV mode = SvROK(val) || !looks_like_number(val) ? -1 : SvNV_nomg(val);
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
    SV *path, *owner;
    const char *buf;
    STRLEN len;
    bool force_utf8 = FALSE;
    struct ff_options opt;
    struct ff_atomic *a;
    struct ff_eintr intr;
    IV pid;
    int err;

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
    if (perm && SvROK(perm) && SvTYPE(SvRV(perm)) == SVt_PVHV) {
        if (force && SvOK(force))
            croak("force_utf8 argument given with an options hash: use its 'utf8' key\n");
        S_parse_options(aTHX_ (HV *)SvRV(perm), &opt, &force_utf8, NULL);
    } else {
        if (perm && SvOK(perm))
            opt.perm = (mode_t)SvIV_nomg(perm);
        force_utf8 = force && SvTRUE_nomg(force);
    }
    buf = S_payload(aTHX_ data, force_utf8, &len, &owner, FSC);

    intr.fn = S_on_eintr;
    intr.ctx = owner;
    Newxz(a, 1, struct ff_atomic);
    SAVEFREEPV(a);
    err = ff_atomic_init(a, SvPVX(path), &opt, &intr);
    if (err)
        croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));
    SAVEDESTRUCTOR_X(S_discard, a);

    pid = SvIV(get_sv("$", GV_ADD));
    if (!IS_SAFE_PATHNAME(SvPVX(path), SvCUR(path), FSC))   /* ENOENT, like open */
        croak_errno(errno, "unable to open file '%" SVf ".tmp.%" IVdf "' - ", SVfARG(path), pid);

    err = ff_atomic_prepare(a);
    if (err)
        croak_step(a, err, path);
    /* noclobber wins: an existing target is an error even when identical */
    if (opt.if_changed && !opt.noclobber && ff_atomic_unchanged(a, buf, len))
        return 0;
    err = ff_atomic_create(a, (long)pid);
    if (err)
        croak_step(a, err, path);
    a->step = FF_STEP_WRITE;
    err = ff_write_all(a->fd, buf, len, &intr);
    if (err)
        croak_step(a, err, path);
    err = ff_atomic_commit(a);
    if (err)
        croak_step(a, err, path);
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

    SvGETMAGIC(filename);
    if (max_arg)
        SvGETMAGIC(max_arg);
    path = S_path_arg(aTHX_ filename);
    if (max_arg && SvTRUE_nomg(max_arg)) {      /* a false max means the default */
        IV iv = SvIV_nomg(max_arg);
        max = iv < 0 ? 0 : (size_t)iv;
    }

    SAVEDESTRUCTOR_X(S_close_read_fd, &fd);
    err = IS_SAFE_PATHNAME(SvPVX(path), SvCUR(path), FGC)
              ? ff_open_read(SvPVX(path), &fd, &intr) : errno;
    if (err)
        croak_errno(err, "can't open '%" SVf "' - ", SVfARG(path));
    err = ff_size_hint(fd, &size);
    if (err)
        croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
    if (size > max)
        croak("file '%" SVf "' too long - aborting\n", SVfARG(path));

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
    return content;
}

static SV *S_file_read_firstline(pTHX_ SV *filename)
{
    SV *path, *line;
    size_t cap = FF_LINE_BLOCK, total = 0, got;
    struct ff_eintr intr = { S_on_eintr, NULL };
    int fd = -1, err;
    bool newline = FALSE;

    SvGETMAGIC(filename);
    path = S_path_arg(aTHX_ filename);

    SAVEDESTRUCTOR_X(S_close_read_fd, &fd);
    err = IS_SAFE_PATHNAME(SvPVX(path), SvCUR(path), FRF)
              ? ff_open_read(SvPVX(path), &fd, &intr) : errno;
    if (err == ENOENT) {
        SETERRNO(err, 0);
        return &PL_sv_undef;
    }
    if (err)
        croak_errno(err, "file '%" SVf "' exists but open for reading failed - ", SVfARG(path));

    line = sv_2mortal(newSV(cap));
    for (;;) {
        char *nl;

        err = ff_read_some(fd, SvPVX(line) + total, cap - total, &got, &intr);
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        if (got == 0)
            break;
        nl = (char *)memchr(SvPVX(line) + total, '\n', got);
        total += got;
        if (nl) {
            total = (size_t)(nl - SvPVX(line));  /* chomp: the line without "\n" */
            newline = TRUE;
            break;
        }
        if (total == cap) {                      /* a long line: keep reading */
            cap *= 2;
            SvGROW(line, cap + 1);
        }
    }
    if (total == 0 && !newline)
        return &PL_sv_undef;                     /* empty file */
    SvCUR_set(line, total);
    *SvEND(line) = '\0';
    SvPOK_only(line);
    if (TAINTING_get)
        SvTAINTED_on(line);
    return line;
}

MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

void
file_set_contents(SV *filename, SV *data = NULL, SV *perm = NULL, SV *force_utf8 = NULL)
  PREINIT:
    int wrote;
  PPCODE:
    ENTER;
    wrote = S_file_set_contents(aTHX_ filename, data, perm, force_utf8);
    LEAVE;
    mXPUSHi(wrote);

void
file_get_contents(SV *filename, SV *max = NULL)
  PREINIT:
    SV *content;
  PPCODE:
    ENTER;
    content = S_file_get_contents(aTHX_ filename, max);
    LEAVE;
    XPUSHs(content);

void
file_read_firstline(SV *filename)
  PREINIT:
    SV *line;
  PPCODE:
    ENTER;
    line = S_file_read_firstline(aTHX_ filename);
    LEAVE;
    XPUSHs(line);

INCLUDE: Writer.xsh
