/* xs_common.h - the perl helpers that file_set_contents (FastFile.xs), the
 * streaming writer (xs_writer.c) and file_set_contents_many (xs_batch.c)
 * share: reading arguments the way perl does, the bytes a value writes as,
 * errors and warnings in perl's words, perl's signal handlers on EINTR, and
 * the start of a write. Defined in xs_common.c.
 *
 * Include it after perl.h (with PERL_NO_GET_CONTEXT) and ppport.h. Every
 * helper that takes pTHX_ is called by its short name, as in perl's own
 * headers: ffxs_name(aTHX_ ...) here, S_name(aTHX_ ...) for one file's
 * static helpers, is name(...). Savestack destructors (S_discard and the
 * like) are only passed by address to SAVEDESTRUCTOR_X: they have none.
 */
#ifndef XS_COMMON_H
#define XS_COMMON_H

#include "ff_io.h"

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* Append the text of err to msg as perl's own $! gives it in the
 * reference's scope, which has no `use locale` (English from perl 5.22 on,
 * whatever the caller's locale), and leave $! set to err. No user code
 * runs (a tied $! is not read). */
void ffxs_cat_errno(pTHX_ SV *msg, int err);
#define cat_errno(msg, err) ffxs_cat_errno(aTHX_ msg, err)

/* Croak with "<formatted prefix><$! text>\n" (cat_errno's text) and leave
 * $! set to err. */
void ffxs_croak_errno(pTHX_ int err, const char *fmt, ...)
    __attribute__format__(__printf__, pTHX_2, pTHX_3) __attribute__noreturn__;
#define croak_errno(err, ...) ffxs_croak_errno(aTHX_ err, __VA_ARGS__)

/* The same without the "\n": perl's " at FILE line N." follows, as after a
 * reference's die without one. */
void ffxs_croak_errno_at(pTHX_ int err, const char *fmt, ...)
    __attribute__format__(__printf__, pTHX_2, pTHX_3) __attribute__noreturn__;
#define croak_errno_at(err, ...) ffxs_croak_errno_at(aTHX_ err, __VA_ARGS__)

/* Croak for the step of a that failed with err, naming the temp file or the
 * target as the reference does. */
void ffxs_croak_step(pTHX_ struct ff_atomic *a, int err, SV *path)
    __attribute__noreturn__;
#define croak_step(a, err, path) ffxs_croak_step(aTHX_ a, err, path)

/* What the check of a's temp before its rename found (a->step one of
 * FF_STEP_TEMP_*), as the message says it after "unable to replace
 * 'FILENAME' - " (a mortal SV, the temp's name in path's form); NULL for
 * other steps. */
SV *ffxs_temp_verdict(pTHX_ const struct ff_atomic *a, SV *path);
#define temp_verdict(a, path) ffxs_temp_verdict(aTHX_ a, path)

/* A warning in category cat (packWARN) when the caller's lexical warnings
 * enable it (by default too, with dflt), but never fatal: a caller's
 * `use warnings FATAL => ...` must not abort a write, as the reference's
 * warnings come from its own scope. Worded and delivered like perl's own
 * (" at FILE line N.", $SIG{__WARN__}). */
void ffxs_warn_soft(pTHX_ U32 cat, bool dflt, const char *fmt, ...)
    __attribute__format__(__printf__, pTHX_3, pTHX_4);
#define warn_soft(cat, dflt, ...) ffxs_warn_soft(aTHX_ cat, dflt, __VA_ARGS__)

/* sv as a number, as perl numifies it (overloading too), without caching
 * a number in the caller's scalar (a string perm '384' stays a string).
 * A string that is no number warns, never fatally, and counts as its
 * numeric prefix, as in perl. Its get-magic has run. */
NV ffxs_number_arg(pTHX_ SV *sv, const char *op);
#define number_arg(sv, op) ffxs_number_arg(aTHX_ sv, op)

/* perl's IS_SAFE_PATHNAME, with a warning that is never fatal: FALSE (and
 * errno ENOENT, as open gives) for a path with a NUL byte. */
bool ffxs_safe_path(pTHX_ SV *path, const char *op);
#define safe_path(path, op) ffxs_safe_path(aTHX_ path, op)

/* A private copy of an argument (its get-magic already run), taken once
 * and owned by the call (mortal): what is written is this value, whatever
 * user code that runs later (signal and __WARN__ handlers, overloads,
 * FETCH) does to the caller's variable - assign, append, free it.
 *
 * A plain string (no magic) shares its buffer by perl's copy-on-write: no
 * byte is copied, and a later change to the caller's variable un-shares it
 * on the caller's side. The share is made here as sv_setsv makes it (the
 * share count in the buffer's last byte), but also where sv_setsv would
 * copy to spare a long-lived copy the string's unused allocation (more than
 * 80 bytes or half of it: any string built by appending); this copy lives
 * only for the call. Copied are the values perl cannot share: magical ones
 * (sv_setsv), a string with an offset (OOK), one whose buffer has no room
 * for the share count, a read-only one that is not shared already, one
 * shared 256 times already. */
/* The number forms a snapshot keeps besides the string: a dualvar ($!,
 * Scalar::Util::dualvar, a number whose string form is cached) is read as
 * perl reads it where it is used, its number where a number is wanted
 * (sysopen's perm, file_get_contents' max), its string where a string is. */
#define FF_NUM_FLAGS (SVf_IOK | SVp_IOK | SVf_NOK | SVp_NOK | SVf_IVisUV)

PERL_STATIC_INLINE SV *S_snapshot(pTHX_ SV *sv)
{
    /* a string's type already: sv_setsv need not upgrade it; a string
     * with a number form (a dualvar) has room for both */
    SV *copy = sv_2mortal(SvNIOKp(sv) ? newSV_type(SVt_PVNV)      /* (each type a constant: */
                                      : newSV_type(SVt_PV));      /* perl inlines it) */

#if defined(SvCANCOW) && defined(CowREFCNT)
    if (!SvMAGICAL(sv) && SvPOK(sv) && SvLEN(sv) && SvCANCOW(sv)) {
        if (!SvIsCOW(sv)) {
            SvIsCOW_on(sv);
            CowREFCNT(sv) = 0;          /* 0 means one owner */
        }
        CowREFCNT(sv)++;
        SvPV_set(copy, SvPVX(sv));
        SvCUR_set(copy, SvCUR(sv));
        SvLEN_set(copy, SvLEN(sv));
        SvFLAGS(copy) |= SVf_IsCOW | SVf_POK | SVp_POK
                         | (SvFLAGS(sv) & (SVf_UTF8 | FF_NUM_FLAGS));
        if (SvNIOKp(sv)) {
            if (SvIOKp(sv))
                SvIV_set(copy, SvIVX(sv));      /* (an UV in the same slot) */
            if (SvNOKp(sv))
                SvNV_set(copy, SvNVX(sv));
        }
        return copy;
    }
#endif
    /* (SV_DO_COW_SVSETSV is 0 outside the core: XS that writes into a
     * buffer without un-sharing it first would break a share. The copy is
     * only ever read, or changed through perl's API.) */
    sv_setsv_flags(copy, sv, SV_COW_SHARED_HASH_KEYS | SV_COW_OTHER_PVS);
    return copy;
}
#define snapshot(sv) S_snapshot(aTHX_ sv)

/* The snapshot of a file name: a plain string that cannot be shared is
 * copied (that is cheaper than sv_setsv for a string this short). */
PERL_STATIC_INLINE SV *S_name_snapshot(pTHX_ SV *sv)
{
#if defined(SvCANCOW) && defined(CowREFCNT)
    if (!SvMAGICAL(sv) && SvPOK(sv) && SvLEN(sv) && SvCANCOW(sv))
        return snapshot(sv);
#endif
    if (SvPOK(sv) && !SvGMAGICAL(sv))
        return sv_2mortal(newSVpvn_flags(SvPVX(sv), SvCUR(sv), SvUTF8(sv)));
    return snapshot(sv);
}
#define name_snapshot(sv) S_name_snapshot(aTHX_ sv)

/* The string form of a private value (a snapshot): the value itself when
 * it is a string, else its string form - cached in it, or for a reference
 * (overloading runs) or a glob ("*main::G") in a new mortal; always a
 * string (SvPOKp), so SvPVX and SvCUR are its. A number is formatted as in the
 * reference's scope, which has no `use locale`: 1.5 is "1.5" even when the
 * caller's locale has a comma radix. */
SV *ffxs_stringified(pTHX_ SV *sv);
#define stringified(sv) (SvPOKp(sv) ? (sv) : ffxs_stringified(aTHX_ sv))

/* The filename as a private string, from its snapshot name (undef and ""
 * croak). For a file to be written, write_op names the function, and a
 * tainted name is refused under -T, as the reference's sysopen refuses it;
 * NULL for a file to be read. */
SV *ffxs_path_arg(pTHX_ SV *name, const char *write_op);
#define path_arg(name, write_op) ffxs_path_arg(aTHX_ name, write_op)

/* path_arg with a step before its refusal: before it croaks, first(ctx)
 * runs (file_copy: the source read to its end, whose errors come first),
 * and may croak itself. */
SV *ffxs_path_arg_after(pTHX_ SV *name, const char *write_op, void (*first)(pTHX_ void *),
                        void *ctx);
#define path_arg_after(name, write_op, first, ctx) \
    ffxs_path_arg_after(aTHX_ name, write_op, first, ctx)

/* A path to be written that holds a NUL byte: croak with ENOENT, as open
 * does (after safe_path's warning, whatever its handler did to errno). */
void ffxs_croak_unless_safe(pTHX_ SV *path, const char *op, IV pid);
#define croak_unless_safe(path, op, pid) ffxs_croak_unless_safe(aTHX_ path, op, pid)

/* Read the options hash: every value's get-magic once, unknown keys and
 * bad values refused before anything is touched. buffer_size is only known
 * where the caller asks for it (the streaming writer: a mortal copy of
 * the value). Under -T a tainted
 * perm dies as sysopen's does, "Insecure dependency in <op>". */
void ffxs_parse_options(pTHX_ HV *hv, struct ff_options *opt, bool *force_utf8,
                        SV **buffer_size, const char *op);
#define parse_options(hv, opt, force_utf8, buffer_size, op) \
    ffxs_parse_options(aTHX_ hv, opt, force_utf8, buffer_size, op)

/* The write's third argument (file_set_contents' $perm, file_copy's) and
 * its $force_utf8, snapshots, or NULL where the caller took a plain value
 * at once: *opt (zeroed, its perm 0644 or that plain integer) and
 * *force_utf8 (a plain force_utf8's truth; force_ok: it was defined) come
 * set. An unblessed HASH reference is the options (parse_options;
 * force_utf8 then refused), else a mode numified as perl does (undef: the
 * default; tainted: dies under -T as the reference's sysopen does). */
void ffxs_write_args(pTHX_ SV *perm, SV *force, bool force_ok, struct ff_options *opt,
                     bool *force_utf8, const char *op);
#define write_args(perm, force, force_ok, opt, force_utf8, op) \
    ffxs_write_args(aTHX_ perm, force, force_ok, opt, force_utf8, op)

/* write_args for an options hash hv (the perm argument's referent, taken
 * as a plain hash): force_utf8 refused beside it, the options parsed. */
void ffxs_options_arg(pTHX_ HV *hv, SV *force, bool force_ok, struct ff_options *opt,
                      bool *force_utf8, const char *op);
#define options_arg(hv, force, force_ok, opt, force_utf8, op) \
    ffxs_options_arg(aTHX_ hv, force, force_ok, opt, force_utf8, op)

/* The readers' $max (a snapshot, or NULL): false means 1 MiB (the pmxcfs
 * file size limit); compared as a number, as the reference's
 * "$total > $max": one that is no number (NaN) or huge means no limit
 * (capped so that max + 1 cannot wrap). */
#define FF_DEFAULT_MAX ((size_t)1024 * 1024)
size_t ffxs_max_arg(pTHX_ SV *max, const char *op);
#define max_arg(max, op) ffxs_max_arg(aTHX_ max, op)

/* Croak "file '<name>' too long - aborting" ("input too long - aborting"
 * for a NULL name), with $! 0, as the reference leaves it (its last
 * sysread succeeded, and perl's sysread clears $!). */
void ffxs_croak_too_long(pTHX_ SV *name) __attribute__noreturn__;
#define croak_too_long(name) ffxs_croak_too_long(aTHX_ name)

/* The first read's size for files whose size fstat can't tell */
#define FF_GROW_START (64 * 1024)

/* A new string (not mortal) with room for cap bytes and a NUL, for reads
 * of fd. Its buffer starts on a page where that makes a read of cap bytes
 * one FUSE request instead of two (124-128 KiB: an unaligned buffer's first
 * request ends at its 32nd page) and fd is on FUSE: a file of up to 128 KiB
 * is then one request, one version on pmxcfs. *on_fuse: -1 unknown (fstatfs asked
 * when it matters, the answer left there), 0 or 1. The aligned start is
 * moved there with sv_chop (OOK): perl copies such a string on assignment
 * (at most 128 KiB, on FUSE only) instead of taking its buffer. */
SV *ffxs_read_buffer(pTHX_ size_t cap, int fd, int *on_fuse);
#define read_buffer(cap, fd, on_fuse) ffxs_read_buffer(aTHX_ cap, fd, on_fuse)

/* content, read from fd at start (-1: it ends at fd's offset, the caller's
 * handle, moved to the end of what is returned when that changes), with a
 * read that may have taken more than one FUSE request: on FUSE (on_fuse:
 * as read_buffer's, fstatfs asked when -1), returned
 * only when a second read from start gives the same bytes; when not, read
 * again until two reads in a row agree, FF_TORN_TRIES reads in all, then
 * croak "unable to read <subject> - changed while read, N times: " $!
 * EAGAIN. Elsewhere (fstatfs says) content as it is. rr (NULL: none):
 * *fd is rr->path's, read from 0, and a read that a concurrent replace
 * failed (ENOENT, ESTALE) goes on with the new file (ff_read_again), *fd
 * then the new fd. */
SV *ffxs_untorn(pTHX_ SV *content, int *fd, int on_fuse, off_t start, size_t max,
                size_t read_limit, SV *name, struct ff_reread *rr, const struct ff_eintr *intr);
#define untorn(content, fd, on_fuse, start, max, read_limit, name, rr, intr) \
    ffxs_untorn(aTHX_ content, fd, on_fuse, start, max, read_limit, name, rr, intr)

/* The rest of fd as a new mortal byte string (tainted under -T): one read
 * of size + 1 bytes (size: fstat's hint, 0 when unknown), growing for a
 * file longer than that, never reading past read_limit bytes (> max).
 * Croaks "unable to read file '<name>' - $!" ("unable to read input - ")
 * on a read error, croak_too_long once more than max bytes are read.
 * *fd and rr as untorn's (a file its caller opened by name, at offset 0). */
SV *ffxs_read_to_end(pTHX_ int *fd, size_t size, size_t max, size_t read_limit, SV *name,
                     struct ff_reread *rr, const struct ff_eintr *intr);
#define read_to_end(fd, size, max, read_limit, name, rr, intr) \
    ffxs_read_to_end(aTHX_ fd, size, max, read_limit, name, rr, intr)
/* The same from the caller's handle (safe_read_from), at its offset: its
 * offset is left at the end of what is returned. */
SV *ffxs_read_handle(pTHX_ int fd, size_t size, size_t max, size_t read_limit, SV *name,
                     const struct ff_eintr *intr);
#define read_handle(fd, size, max, read_limit, name, intr) \
    ffxs_read_handle(aTHX_ fd, size, max, read_limit, name, intr)

/* Close *fd (an fd that is only read; -1: none) when the current scope is
 * left, by return or croak. */
void ffxs_close_read_at_leave(pTHX_ int *fd);
#define close_read_at_leave(fd) ffxs_close_read_at_leave(aTHX_ fd)

/* The bytes file_set_contents writes for data, a snapshot (or NULL when
 * no data was given): the table in the contract. Returns a pointer into
 * data's own buffer unless new bytes are needed; a converted copy is freed
 * when the caller's scope is left. op names the function in warnings. */
const char *ffxs_payload(pTHX_ SV *data, bool force_utf8, STRLEN *len, const char *op);
#define payload(data, force_utf8, len, op) ffxs_payload(aTHX_ data, force_utf8, len, op)

/* sv kept alive until the current scope is left: user code may drop the
 * caller's last reference to it while we use it. */
PERL_STATIC_INLINE void S_hold_in_scope(pTHX_ SV *sv)
{
    SAVEFREESV(SvREFCNT_inc_simple_NN(sv));
}
#define hold_in_scope(sv) S_hold_in_scope(aTHX_ sv)

/* The arguments args[0..n) (NULL for one not given) kept alive until the
 * current scope is left, from the first one with get-magic on: its FETCH
 * is user code that runs before the later ones are snapshotted, and may
 * free them (clear the array they are aliases of). Call it before the first
 * get-magic; without magic, no user code runs until every snapshot is
 * taken, and nothing is held. */
PERL_STATIC_INLINE void S_hold_args(pTHX_ SV *const *args, size_t n)
{
    size_t i = 0;

    while (i < n && !(args[i] && SvGMAGICAL(args[i])))
        i++;
    for (; i < n; i++)
        if (args[i])
            hold_in_scope(args[i]);
}
#define hold_arg_array(args, n) S_hold_args(aTHX_ args, n)
#define hold_args(args) hold_arg_array(args, sizeof(args) / sizeof(args[0]))

/* $$, what temp files are named after, without a getpid(2) a call: kept
 * in a page every fork's child gets zeroed (xs_pid.c). boot and clone set
 * up an interpreter's (BOOT, CLONE); cached says whether it has one. */
IV ffxs_pid(pTHX);
/* The same, and ".tmp.<pid>" copied to suffix (FF_PID_SUFFIX_MAX bytes),
 * its length in *suffix_len: made once per process. */
IV ffxs_pid_suffix(pTHX_ char *suffix, size_t *suffix_len);
void ffxs_pid_boot(pTHX);
void ffxs_pid_clone(pTHX);
bool ffxs_pid_cached(pTHX);
#define dollar_pid() ffxs_pid(aTHX)

/* What ffxs_on_eintr protects while perl's signal handlers run. */
struct ff_guard {
    struct ff_atomic *atomic; /* the replacement being made (NULL: a batch, a read) */
    IV pid;                   /* $$ of the call: a child forked by a handler
                               * must not remove or write to its parent's temp,
                               * nor read from its fd; 0: taken when the
                               * handlers first run (a reader need not ask) */
    bool forked;              /* this is such a child */
    bool reading;             /* a reader: "read" in the child's message */
    /* The interpreter (aTHX) of a guard that lives in one call's frame:
     * spares the callback its thread-local look-up. NULL: looked up (a
     * writer's guard goes with the writer into a new thread's clone). */
    void *perl;
    /* A reader's fd (file_get_contents) that no savestack entry closes yet:
     * the first time the handlers run, its close is registered in the
     * caller's scope (a handler may die), so that a call no signal reaches
     * spends nothing on it. NULL: none. */
    int *unwind_fd;
};
#ifdef MULTIPLICITY
#define FF_GUARD_PERL ((void *)aTHX)
#else
#define FF_GUARD_PERL NULL
#endif

/* The ff_on_eintr callback (ff_io.h) of every call: EINTR, a short write,
 * or the moment before the rename run perl's pending signal handlers (an
 * alarm must still fire, and before the file is published). ctx is a
 * struct ff_guard. What is written is a private snapshot (snapshot): the
 * handlers cannot reach it. Returns 1 when a signal was pending (ff_io.h
 * bounds the EINTRs that come without). */
int ffxs_on_eintr(void *ctx);

/* An ff_eintr's pending (ff_io.h): perl's count of signals caught, not
 * yet handled, which the loops of a call poll. */
#define FFXS_PENDING ((const volatile int *)&PL_sig_pending)

/* ffxs_on_eintr for steps that must not be cut short (a batch's renames):
 * the pending handlers run (perl dies once 120 caught signals wait for
 * their handlers, so they cannot wait), but a die of theirs is caught and kept
 * in error, to be thrown once the step is done. A child forked by a
 * handler still croaks at once. ctx is a struct ff_held, zeroed but for
 * guard; what it holds is freed when the caller's scope is left. */
struct ff_held {
    struct ff_guard *guard;
    CV *runner;               /* the XSUB that runs the handlers, under G_EVAL */
    SV *error;                /* the first die of a handler, or NULL */
};
int ffxs_on_eintr_held(void *ctx);

/* Remove whatever of a is still ours when the current scope is left: on
 * success (nothing left), a croak or a die from a signal handler alike. */
void ffxs_discard_at_leave(pTHX_ struct ff_atomic *a);
#define discard_at_leave(a) ffxs_discard_at_leave(aTHX_ a)

/* A file name to be written, as start_write takes it: its bytes (pv,
 * NUL-terminated, len) and UTF-8 flag, and sv, the same as a string SV -
 * or NULL where the caller holds the bytes in a buffer of its own (the
 * single call's plain name), until a message needs one (path_sv). */
struct ffxs_path {
    const char *pv;
    STRLEN len;
    bool utf8;
    SV *sv;
};
#define FFXS_PATH_OF(sv) { SvPVX(sv), SvCUR(sv), cBOOL(SvUTF8(sv)), (sv) }

/* The name as a string SV (mortal, made once). */
SV *ffxs_path_sv(pTHX_ struct ffxs_path *path);
#define path_sv(path) ((path)->sv ? (path)->sv : ffxs_path_sv(aTHX_ path))

/* A string with no magic (so no user code reaches it, not tainted) and no
 * reference; FF_PLAIN_BYTES: and not UTF-8, its bytes are what it holds. */
#define FF_PLAIN_STRING(sv) \
    ((SvFLAGS(sv) & (SVs_GMG | SVs_SMG | SVs_RMG | SVf_POK | SVf_ROK)) == SVf_POK)
#define FF_PLAIN_BYTES(sv) \
    ((SvFLAGS(sv) & (SVs_GMG | SVs_SMG | SVs_RMG | SVf_POK | SVf_ROK | SVf_UTF8)) == SVf_POK)

/* A reference to an options hash: only a plain hash is one (an object
 * numifies as a perm, as in the reference) */
#define FF_OPTIONS_REF(sv) \
    (SvROK(sv) && SvTYPE(SvRV(sv)) == SVt_PVHV && !SvOBJECT(SvRV(sv)))

/* A plain string file name (no magic, so not tainted, no reference) of 1
 * to FF_NAME_BUF - 1 bytes copied to buf (FF_NAME_BUF bytes): its private
 * snapshot without an SV. FALSE for any other name (then name_snapshot). */
#define FF_NAME_BUF 4096    /* PATH_MAX: a longer name is an SV (open refuses it) */
PERL_STATIC_INLINE bool S_name_copy(SV *sv, char *buf, struct ffxs_path *path)
{
    STRLEN len;

    if (!FF_PLAIN_STRING(sv))
        return FALSE;
    len = SvCUR(sv);
    if (len - 1 >= FF_NAME_BUF - 1)     /* "" (it croaks) or too long */
        return FALSE;
    memcpy(buf, SvPVX(sv), len);
    buf[len] = '\0';
    path->pv = buf;
    path->len = len;
    path->utf8 = cBOOL(SvUTF8(sv));
    path->sv = NULL;
    return TRUE;
}
#define name_copy(sv, buf, path) S_name_copy(sv, buf, path)

/* The start of a write, as file_set_contents and the writer's new do it:
 * a set up for path (opt, intr), a path with a NUL refused as open refuses
 * it, the old target looked at, and unless if_changed finds it holding buf
 * then tail already, the temp created. FALSE when the target is unchanged
 * (nothing created). op names the caller in warnings; pid is $$ of the
 * call. Croaks for every failure.
 * temp_buf (FF_TEMP_BUF bytes): a caller whose path string and buffer
 * outlive the replacement (file_set_contents' frame, the writer's own
 * block) lends them: path's string is the target and the temp name is
 * made in temp_buf where it fits (ff_atomic_init_lent), no heap; that
 * caller has made sure a's discard runs however it ends (file_set_contents:
 * one destructor for all it holds, a->target NULL until a is set up here;
 * the writer: its object's free magic). NULL: path is copied and a's
 * discard registered in the caller's scope (a croak from here on leaves
 * nothing behind).
 * suffix: ".tmp.<pid>" made already (ffxs_pid_suffix), or NULL.
 * held_cwd: NULL, or the working directory the caller held (>= 0) before
 * a existed, for a relative path taken over by a (ff_atomic_adopt_cwd). */
bool ffxs_start_write(pTHX_ struct ff_atomic *a, struct ffxs_path *path,
                      const struct ff_options *opt,
                      const struct ff_eintr *intr, IV pid, const char *op,
                      const char *buf, STRLEN len, const char *tail, STRLEN tail_len,
                      char *temp_buf, const char *suffix, size_t suffix_len, int *held_cwd);
#define start_write(a, path, opt, intr, pid, op, buf, len, tail, tail_len, temp_buf, \
                    suffix, suffix_len, held_cwd) \
    ffxs_start_write(aTHX_ a, path, opt, intr, pid, op, buf, len, tail, tail_len, temp_buf, \
                     suffix, suffix_len, held_cwd)

/* start_write without if_changed (a plain write's temp, named with
 * suffix), the target's error returned with a->step instead of croaked,
 * so that the caller may report another first (file_copy: its source's).
 * Returns 0 with the temp made. */
int ffxs_make_temp(pTHX_ struct ff_atomic *a, struct ffxs_path *path,
                   const struct ff_options *opt, const struct ff_eintr *intr, IV pid,
                   const char *op, const char *suffix, size_t suffix_len, int *held_cwd);
#define make_temp(a, path, opt, intr, pid, op, suffix, suffix_len, held_cwd) \
    ffxs_make_temp(aTHX_ a, path, opt, intr, pid, op, suffix, suffix_len, held_cwd)

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
