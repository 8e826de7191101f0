/* xs_writer.c - FastFile::Writer, the streaming atomic writer (its XSUBs
 * are in Writer.xsh, the typemap's T_FF_WRITER fetches the object).
 * The temp file is made in new; print, printf and write collect bytes in a
 * struct ff_wbuf (ff_io.c) that is written with one write(2) each time it
 * fills; commit writes the rest, closes and renames; abort or destruction
 * without commit removes the temp file. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"
#include "xs_writer.h"

#define FF_WRITER_CLASS "FastFile::Writer"
#define FF_WRITER_DEFAULT_SIZE (1024 * 1024)   /* one write(2) per MiB */

#define FF_W_OPEN      0   /* accepting data */
#define FF_W_BUSY      1   /* inside write(2) or commit: signal handlers run here */
#define FF_W_COMMITTED 2
#define FF_W_ABORTED   3   /* abort, a failed step, or created in new and not done */

struct ff_writer {
    struct ff_atomic a;   /* temp fd and paths; a.intr is &intr */
    struct ff_eintr intr; /* ctx: &guard */
    struct ff_guard guard;/* pid, the replacement */
    struct ff_wbuf wb;    /* the bytes not written yet */
    SV *self;             /* the object's SV (not counted: it owns w) */
    SV *path;             /* the filename as given, for messages */
    IV pid;               /* $$ of the process that made the temp */
    int state;            /* FF_W_*, an int for SAVEINT */
    bool force_utf8;
    bool destroyed;       /* DESTROY was called: no writer any more */
};

static int S_writer_free(pTHX_ SV *sv, MAGIC *mg);
static int S_writer_dup(pTHX_ MAGIC *mg, CLONE_PARAMS *param);

/* Tags the object's SV and holds the writer's address (mg_ptr): its
 * identity is this table's address, so no other object passes for a
 * writer, and checking it costs no lookup by class name. Its free callback
 * cleans the writer up when the object goes, whatever class it is blessed
 * into and whatever that class's DESTROY does; its dup callback leaves a
 * new thread's copy of the object (one that CLONE_SKIP does not stop: a
 * writer blessed into another class) holding no writer, so that only the
 * thread that made it can write, remove the temp or free it. */
static const MGVTBL writer_tag = { NULL, NULL, NULL, NULL, S_writer_free, NULL, S_writer_dup, NULL };

/* The writer held by the object's SV obj, or NULL (no writer object, or a
 * thread's copy of one). */
static struct ff_writer *S_writer_of(pTHX_ SV *obj)
{
    MAGIC *mg = mg_findext(obj, PERL_MAGIC_ext, &writer_tag);

    return mg ? (struct ff_writer *)mg->mg_ptr : NULL;
}
#define writer_of(obj) S_writer_of(aTHX_ obj)

struct ff_writer *ffxs_writer_fetch(pTHX_ SV *self)
{
    struct ff_writer *w = SvROK(self) ? writer_of(SvRV(self)) : NULL;

    if (!w || w->destroyed)
        croak(FF_WRITER_CLASS ": not a writer object\n");
    return w;
}

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
    if (dollar_pid() != w->pid)
        croak(FF_WRITER_CLASS ": the writer belongs to process %" IVdf "\n", w->pid);
}
#define writer_own_process(w) S_writer_own_process(aTHX_ w)

/* The temp closed and removed (unless committed, or another process's),
 * the paths freed, the working directory held for them closed. */
static void S_writer_release(struct ff_writer *w)
{
    ff_atomic_discard(&w->a);
    ff_atomic_release_cwd(&w->a);
}

/* w, ready for data. Call it inside a scope (ENTER .. LEAVE, or saved_ix ..
 * LEAVE_SCOPE): user code (magic, overloading, signal handlers) may drop
 * the last reference, so w is kept alive until that scope is left;
 * converted payloads are freed there too. */
static void S_writer_hold(pTHX_ struct ff_writer *w)
{
    hold_in_scope(w->self);
    writer_usable(w);
}
#define writer_hold(w) S_writer_hold(aTHX_ w)

/* Savestack destructor of a writer step: one cut short (a croak, a die
 * from a signal handler run on EINTR) leaves the writer aborted, its temp
 * closed and removed; one that succeeded (the writer open again) is left
 * alone. */
static void S_step_unwound(pTHX_ void *writer)
{
    struct ff_writer *w = (struct ff_writer *)writer;

    PERL_UNUSED_CONTEXT;
    if (w->state == FF_W_BUSY) {
        w->state = FF_W_ABORTED;
        S_writer_release(w);
    }
}

/* One step that writes: append buf[0..n) (a snapshot's buffer or a
 * converted copy: nothing user code can reach), or with buf NULL, write
 * the rest and commit. Call it with w held (writer_hold): the step's
 * destructor uses w. Its scope is its own, without ENTER (no local() is
 * made in it): the destructor runs as it returns, or while a croak
 * unwinds. */
static void S_writer_step(pTHX_ struct ff_writer *w, const char *buf, size_t n)
{
    const I32 saved_ix = PL_savestack_ix;
    int err;

    writer_own_process(w);
    SAVEDESTRUCTOR_X(S_step_unwound, w);
    w->state = FF_W_BUSY;
    w->a.step = FF_STEP_WRITE;
    if (buf) {
        err = ff_wbuf_append(&w->wb, w->a.fd, buf, n, &w->intr);
        /* one print of many items writes many times before perl runs
         * the handlers itself */
        if (!err)
            ff_poll_signals(&w->intr);
    } else if (!(err = ff_wbuf_flush(&w->wb, w->a.fd, &w->intr))
               /* the bytes are not kept to compare: the temp's size is */
               && !(err = ff_atomic_expect_fd_end(&w->a))) {
        ff_wbuf_free(&w->wb);           /* now: nothing slow after the rename */
        err = ff_atomic_commit_held(&w->a);
    }
    if (err)
        croak_step(&w->a, err, w->path);
    w->state = FF_W_OPEN;
    LEAVE_SCOPE(saved_ix);
}
#define writer_step(w, buf, n) S_writer_step(aTHX_ w, buf, n)

/* Append the bytes file_set_contents would write for sv (its get-magic
 * already run); op names the method in warnings. A plain byte string
 * that fits in the buffer (and needs no encoding) is copied at once: no
 * user code can run before the copy. Anything else is written from a
 * snapshot: a warning, an overload or a signal handler on EINTR may run
 * before the bytes are out. */
static void S_writer_chunk(pTHX_ struct ff_writer *w, SV *sv, const char *op)
{
    STRLEN n;
    const char *buf;

    writer_usable(w);                   /* user code for an earlier item may have ended it */
    if (SvPOK(sv) && !SvUTF8(sv) && !w->force_utf8
        && (ff_wbuf_copy_in(&w->wb, SvPVX(sv), SvCUR(sv))
            || (!ff_wbuf_fills(&w->wb, SvCUR(sv))
                && !ff_wbuf_append(&w->wb, w->a.fd, SvPVX(sv), SvCUR(sv), &w->intr))))
        return;
    buf = payload(snapshot(sv), w->force_utf8, &n, op);
    writer_usable(w);                   /* overloading may have ended it */
    /* the usual case: a copy into the buffer, no write(2), nothing to guard */
    if (!ff_wbuf_fills(&w->wb, n) && !ff_wbuf_append(&w->wb, w->a.fd, buf, n, &w->intr))
        return;
    /* it fills the buffer, or the copy found no memory: the guarded step
     * writes, or tries again and reports it */
    writer_step(w, buf, n);
}
#define writer_chunk(w, sv, op) S_writer_chunk(aTHX_ w, sv, op)

/* The items ST(1) .. ST(items - 1) kept alive until the scope is left: the
 * stack does not own them, and user code that runs for one item (FETCH,
 * overloading, a warning's handler) may free the others (clear the array
 * they came from). */
static void S_hold_items(pTHX_ I32 ax, I32 items)
{
    I32 i;

    for (i = 1; i < items; i++)
        hold_in_scope(ST(i));
}
#define hold_items(ax, items) S_hold_items(aTHX_ ax, items)

/* The items, $, and $\ are taken on entry: with more than one item, each
 * into a snapshot (get-magic once each, in order) before user code for any
 * of them (an overload, a warning's handler, a signal handler while the
 * buffer is written) could change or free the others; a single item is
 * copied into the buffer at once, or snapshotted by writer_chunk. */
void ffxs_writer_print(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    const char *op = FF_WRITER_CLASS "::print";
    SV *ofs, *ors = NULL;
    I32 i;
    const I32 saved_ix = PL_savestack_ix;   /* no ENTER: no local() is made here */

    /* The usual line: one plain byte string (no magic, so no FETCH), no $\,
     * and room for it in the buffer: a copy, and no user code can run, so
     * nothing is held. */
    if (items == 2 && w->state == FF_W_OPEN && !w->force_utf8
        && FF_PLAIN_BYTES(ST(1))
        && !(PL_ors_sv && SvOK(PL_ors_sv))
        && ff_wbuf_copy_in(&w->wb, SvPVX(ST(1)), SvCUR(ST(1))))
        return;
    ofs = GvSV(PL_ofsgv);
    writer_hold(w);
    if (items > 2) {
        hold_items(ax, items);
        for (i = 1; i < items; i++) {
            SvGETMAGIC(ST(i));
            ST(i) = snapshot(ST(i));
        }
        if (ofs) {
            SvGETMAGIC(ofs);
            ofs = SvOK(ofs) ? snapshot(ofs) : NULL;
        }
    } else if (items == 2) {
        SvGETMAGIC(ST(1));
    }
    if (PL_ors_sv && SvOK(PL_ors_sv))                /* $\ */
        ors = snapshot(PL_ors_sv);
    for (i = 1; i < items; i++) {
        if (i > 1 && ofs)
            writer_chunk(w, ofs, op);
        writer_chunk(w, ST(i), op);
    }
    if (ors)
        writer_chunk(w, ors, op);
    LEAVE_SCOPE(saved_ix);
}

void ffxs_writer_printf(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    SV *formatted;
    const char *pat;
    STRLEN len;
    I32 i;
    const I32 saved_ix = PL_savestack_ix;   /* no ENTER: no local() is made here */

    writer_hold(w);
    if (items < 2)
        croak("Usage: " FF_WRITER_CLASS "::printf(self, format, ...)");
    hold_items(ax, items);
    /* formatted from snapshots (get-magic once each): sprintf would cache
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
    LEAVE_SCOPE(saved_ix);
}

void ffxs_writer_write(pTHX_ struct ff_writer *w, I32 ax, I32 items)
{
    const I32 saved_ix = PL_savestack_ix;   /* no ENTER: no local() is made here */

    writer_hold(w);
    if (items != 2)
        croak("Usage: " FF_WRITER_CLASS "::write(self, data)");
    SvGETMAGIC(ST(1));
    writer_chunk(w, ST(1), FF_WRITER_CLASS "::write");
    LEAVE_SCOPE(saved_ix);
}

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
    parse_options(hv, opt, force_utf8, &size_sv, FF_WRITER_CLASS "->new");
    if (!size_sv || !SvOK(size_sv))     /* its get-magic ran in parse_options */
        return;
    if (SvROK(size_sv) || !(SvNIOK(size_sv) || looks_like_number(size_sv))
        || !((nv = number_arg(size_sv, "buffer_size")) >= 1 && nv <= (NV)SSize_t_MAX
             && nv == (NV)(size_t)nv))       /* NaN fails too */
        croak("invalid value for option 'buffer_size'\n");
    *size = (size_t)nv;
}
#define writer_options(opts, opt, force_utf8, size) \
    S_writer_options(aTHX_ opts, opt, force_utf8, size)

/* The stash klass (its get-magic run) names, as gv_stashsv(klass,
 * GV_ADD) finds it, or its object's class. own is the XSUB's package
 * (its glob's stash): a plain name that is its effective name (which perl keeps
 * where the package is now reachable, also after a glob assignment moves
 * it, and clears when it is deleted) is that stash, without a look-up. */
static HV *S_class_stash(pTHX_ SV *klass, HV *own)
{
    const char *name;

    if (SvROK(klass))
        return SvOBJECT(SvRV(klass)) ? SvSTASH(SvRV(klass)) : gv_stashsv(klass, GV_ADD);
    if (own && SvPOK(klass) && (name = HvENAME_get(own)) && SvCUR(klass) == (STRLEN)HvENAMELEN_get(own)
        && !SvUTF8(klass) == !HvENAMEUTF8(own) && memEQ(SvPVX(klass), name, SvCUR(klass)))
        return own;
    return gv_stashsv(klass, GV_ADD);
}
#define class_stash(klass, own) S_class_stash(aTHX_ klass, own)

SV *ffxs_writer_new(pTHX_ HV *own, SV *klass, SV *filename, SV *opts)
{
    struct ff_writer *w;
    struct ff_options opt;
    SV *path, *obj;
    MAGIC *mg;
    HV *stash;
    char *block, suffix[FF_PID_SUFFIX_MAX];
    bool force_utf8 = FALSE;
    size_t size = FF_WRITER_DEFAULT_SIZE, first_cap, suffix_len;
    /* a scope of its own, without ENTER (no local() is made here) */
    const I32 saved_ix = PL_savestack_ix;

    /* snapshots, before user code (overloading) runs */
    {
        SV *const args[] = { klass, filename, opts };
        hold_args(args);
    }
    /* the class is all klass is read for: its stash, taken at once (no
     * user code runs for it; an object klass's overloading is not used).
     * A plain string or an object is read as it is; anything else from a
     * snapshot: the look-up's SvPV would run get-magic again, or cache a
     * string form in the caller's scalar. */
    SvGETMAGIC(klass);
    if (SvMAGICAL(klass) || !(SvPOK(klass) || (SvROK(klass) && SvOBJECT(SvRV(klass)))))
        klass = snapshot(klass);
    stash = class_stash(klass, own);
    /* The object, blessed at once: it holds the stash while user code runs
     * (the name's overloading, the options' FETCH may delete the package,
     * or free the object that kept it). A croak frees it (on the
     * savestack, so at once, whatever catches the die); from when its
     * magic holds w below, its free magic removes whatever the writer
     * made (start_write's lent mode: nothing else discards w->a). */
    obj = newRV_noinc(newSV_type(SVt_PVMG));     /* magic's type: no upgrade */
    SAVEFREESV(obj);
    sv_bless(obj, stash);   /* not read-only: the writer is in the magic, and a
                             * subclass may rebless the object */
    SvGETMAGIC(filename);
    filename = name_snapshot(filename);
    if (opts) {
        SvGETMAGIC(opts);
        opts = snapshot(opts);
    }
    path = path_arg(filename, FF_WRITER_CLASS "->new");
    writer_options(opts, &opt, &force_utf8, &size);
    /* A relative name means the working directory of new: user code
     * (between the calls, or run by one: a signal handler, an overload, a
     * DESTROY; another thread) may chdir before the commit or the cleanup,
     * which then rename or remove there, in the directory held from
     * before the temp is made. */
    opt.hold_cwd = 1;

    /* One block for all the writer keeps: the struct, the temp's name
     * (FF_TEMP_BUF, as start_write's lent mode takes it: a temp too long
     * for it, after symlinks, is allocated) and the buffer's first memory
     * (up to FF_WBUF_FIRST_CAP, the first allocation it would make). The
     * target is path's own string: w->path holds it, private (a snapshot
     * or overloading's result), unchanged. */
    first_cap = size < FF_WBUF_FIRST_CAP ? size : FF_WBUF_FIRST_CAP;
    Newx(block, sizeof(struct ff_writer) + FF_TEMP_BUF + first_cap, char);
    w = (struct ff_writer *)block;
    Zero(w, 1, struct ff_writer);
    w->a.fd = w->a.step_fd = -1;        /* nothing to close until start_write sets it up */
    w->state = FF_W_ABORTED;
    /* from here the object owns w */
    mg = sv_magicext(SvRV(obj), NULL, PERL_MAGIC_ext, &writer_tag, NULL, 0);
    mg->mg_ptr = (char *)w;             /* mg_len 0: perl neither copies nor frees it */
    mg->mg_flags |= MGf_DUP;
    w->self = SvRV(obj);
    w->path = SvREFCNT_inc_simple_NN(path);
    ff_wbuf_init(&w->wb, size, block + sizeof(struct ff_writer) + FF_TEMP_BUF, first_cap);
    w->force_utf8 = force_utf8;
    w->pid = ffxs_pid_suffix(aTHX_ suffix, &suffix_len);
    w->guard.pid = w->pid;
    w->guard.atomic = &w->a;
    w->intr.fn = ffxs_on_eintr;
    w->intr.ctx = &w->guard;
    w->intr.pending = FFXS_PENDING;     /* (a new thread's copy has no writer) */
    {
        struct ffxs_path wpath = FFXS_PATH_OF(path);

        start_write(&w->a, &wpath, &opt, &w->intr, w->pid, FF_WRITER_CLASS "->new", NULL, 0,
                    NULL, 0, block + sizeof(struct ff_writer), suffix, suffix_len, NULL);
    }
    /* any code may run before commit: it checks the temp is still this
     * file (one fstat here, one fstatat there) */
    ff_atomic_note_temp(&w->a, AT_FDCWD, w->a.temp);
    w->state = FF_W_OPEN;
    SvREFCNT_inc_simple_void_NN(obj);
    LEAVE_SCOPE(saved_ix);
    return sv_2mortal(obj);
}

void ffxs_writer_commit(pTHX_ struct ff_writer *w)
{
    const I32 saved_ix = PL_savestack_ix;

    writer_hold(w);
    writer_step(w, NULL, 0);
    w->state = FF_W_COMMITTED;
    S_writer_release(w);        /* only an allocated path and the held directory are left */
    ff_wbuf_free(&w->wb);
    LEAVE_SCOPE(saved_ix);
}

/* Close the temp and free the buffer. Only the process that made the temp
 * removes it: a forked copy closes its fd and leaves the file alone. */
static void S_writer_discard(pTHX_ struct ff_writer *w)
{
    /* In global destruction $$'s context (xs_pid.c) may be freed already:
     * a writer whose object outlives sv_clean_objs (its scalar held by
     * other than a reference) is freed after perl's exit list, as every
     * thread's interpreter does at its end; the process is getpid()'s. */
    IV now = PL_phase == PERL_PHASE_DESTRUCT ? (IV)getpid() : dollar_pid();

    if (now != w->pid)
        w->a.created = 0;
    S_writer_release(w);        /* (a forked copy closes its copy of the directory) */
    ff_wbuf_free(&w->wb);
}
#define writer_discard(w) S_writer_discard(aTHX_ w)

bool ffxs_writer_abort(pTHX_ struct ff_writer *w)
{
    if (w->state == FF_W_BUSY)
        writer_usable(w);       /* croaks: a signal handler inside one of its writes */
    if (w->state != FF_W_OPEN)
        return FALSE;
    writer_discard(w);
    w->state = FF_W_ABORTED;
    return TRUE;
}

/* writer_tag's free callback: the object's SV is being freed (never while
 * busy: the methods hold the object while they run). The writer goes, its
 * temp removed unless committed. */
static int S_writer_free(pTHX_ SV *sv, MAGIC *mg)
{
    struct ff_writer *w = (struct ff_writer *)mg->mg_ptr;

    PERL_UNUSED_ARG(sv);
    if (!w)
        return 0;
    mg->mg_ptr = NULL;
    writer_discard(w);
    SvREFCNT_dec(w->path);
    Safefree(w);
    return 0;
}

/* writer_tag's dup callback: a new thread's copy of the object holds no
 * writer (the C writer, its fd and temp are the parent thread's). */
static int S_writer_dup(pTHX_ MAGIC *mg, CLONE_PARAMS *param)
{
    PERL_UNUSED_CONTEXT;
    PERL_UNUSED_ARG(param);
    mg->mg_ptr = NULL;
    return 0;
}

void ffxs_writer_destroy(pTHX_ SV *self)
{
    struct ff_writer *w;

    if (!SvROK(self) || !(w = writer_of(SvRV(self))))
        return;
    /* called by hand from a signal handler inside one of its writes: the
     * write goes on, the writer is cleaned up when its object is freed */
    if (w->state == FF_W_BUSY)
        return;
    /* The temp goes now; the memory when the object is freed (free magic):
     * DESTROY called by hand from user code that a method runs (a warning's
     * handler, an overload) leaves that method a writer that croaks
     * "already aborted" instead of freed memory. */
    writer_discard(w);
    w->state = FF_W_ABORTED;
    w->destroyed = TRUE;
}
