MODULE = FastFile    PACKAGE = FastFile::Writer

PROTOTYPES: DISABLE

#  FastFile::Writer: a streaming atomic writer. The temp file is made in
#  new; print, printf and write collect bytes in a C buffer that is written
#  with one write(2) each time it fills; commit writes the rest, closes and
#  renames; abort or destruction without commit removes the temp file.
#
#  xsubpp copies only preprocessor lines from an included .xsh into the C
#  output, so the C state is a struct spelled once as a macro and declared
#  in each XSUB, and the little shared logic lives in macros.
#
#  Each write(2) runs in a guarded scope: a croak or a die from a signal
#  handler (EINTR) unwinds through S_discard (temp closed and removed) and
#  a SAVEINT that leaves the state FF_W_ABORTED; on success the replacement
#  is moved out of the discard's reach before the scope is left.

#define FF_WRITER_CLASS "FastFile::Writer"
#define FF_WRITER_DEFAULT_SIZE (1024 * 1024)   /* one write(2) per MiB */
#define FF_WRITER_FIRST_CAP 8192               /* the buffer doubles from here */

#define FF_W_OPEN      0   /* accepting data */
#define FF_W_BUSY      1   /* inside write(2) or commit: signal handlers run here */
#define FF_W_COMMITTED 2
#define FF_W_ABORTED   3   /* abort, a failed step, or created in new and not done */

#define FF_WRITER_STRUCT                                                    \
    struct ff_writer {                                                      \
        struct ff_atomic a;   /* temp fd and paths; a.intr is &intr */      \
        struct ff_eintr intr; /* ctx: the SV written from, if any */        \
        SV *path;             /* the filename as given, for messages */     \
        char *buf;            /* grows by doubling up to size */            \
        size_t len;           /* bytes waiting in buf */                    \
        size_t cap;           /* bytes allocated for buf */                 \
        size_t size;          /* buffer_size: flush when len reaches it */  \
        IV pid;               /* $$ of the process that made the temp */    \
        int state;            /* FF_W_*, an int for SAVEINT */              \
        bool force_utf8;                                                    \
    }

#define FF_WRITER_PID() SvIV(get_sv("$", GV_ADD))

#define FF_WRITER_FETCH(w, self)                                            \
    STMT_START {                                                            \
        if (!SvROK(self) || !SvIOK(SvRV(self))                              \
            || !sv_derived_from(self, FF_WRITER_CLASS)                      \
            || !((w) = INT2PTR(struct ff_writer *, SvIVX(SvRV(self)))))     \
            croak(FF_WRITER_CLASS ": not a writer object\n");               \
    } STMT_END

#define FF_WRITER_USABLE(w)                                                 \
    STMT_START {                                                            \
        if ((w)->state != FF_W_OPEN)                                        \
            croak(FF_WRITER_CLASS ": %s\n",                                 \
                  (w)->state == FF_W_COMMITTED ? "already committed"        \
                  : (w)->state == FF_W_BUSY ? "busy (called while it writes)" \
                  : "already aborted");                                     \
    } STMT_END

#define FF_WRITER_OWN_PROCESS(w)                                            \
    STMT_START {                                                            \
        if (FF_WRITER_PID() != (w)->pid)                                    \
            croak(FF_WRITER_CLASS ": the writer belongs to process %" IVdf "\n", \
                  (w)->pid);                                                \
    } STMT_END

#  After a guarded step succeeded: nothing left for the scope's S_discard.
#define FF_WRITER_DISARM(a)                                                 \
    STMT_START {                                                            \
        (a)->fd = -1;                                                       \
        (a)->created = 0;                                                   \
        (a)->temp = (a)->target = NULL;                                     \
    } STMT_END

void
new(SV *klass, SV *filename, SV *opts = NULL)
  PREINIT:
    FF_WRITER_STRUCT *w;
    struct ff_options opt;
    struct ff_atomic ready;
    SV *path, *obj, *size_sv = NULL;
    HV *stash;
    bool force_utf8 = FALSE;
    size_t size = FF_WRITER_DEFAULT_SIZE;
    IV pid;
    int err;
  PPCODE:
    ENTER;
    /* every argument read once, before anything is touched */
    SvGETMAGIC(filename);
    if (opts)
        SvGETMAGIC(opts);
    path = S_path_arg(aTHX_ filename);
    if (SvTAINTED(filename)) {
        TAINT;
        taint_proper(NULL, FF_WRITER_CLASS "->new");
    }
    Zero(&opt, 1, struct ff_options);
    opt.perm = 0644;
    if (opts && SvOK(opts)) {
        HV *hv;

        if (!SvROK(opts) || SvTYPE(SvRV(opts)) != SVt_PVHV)
            croak(FF_WRITER_CLASS ": options must be a hash reference\n");
        hv = (HV *)SvRV(opts);
        if (hv_exists(hv, "if_changed", 10))
            croak(FF_WRITER_CLASS ": option 'if_changed' is not supported by the writer\n");
        S_parse_options(aTHX_ hv, &opt, &force_utf8, &size_sv);
        if (size_sv && SvOK(size_sv)) {     /* its get-magic ran in S_parse_options */
            IV iv;

            if (SvROK(size_sv) || !looks_like_number(size_sv)
                || (iv = SvIV_nomg(size_sv)) < 1 || (NV)iv != SvNV_nomg(size_sv))
                croak("invalid value for option 'buffer_size'\n");
            size = (size_t)iv;
        }
    }
    stash = SvROK(klass) && SvOBJECT(SvRV(klass)) ? SvSTASH(SvRV(klass))
                                                 : gv_stashsv(klass, GV_ADD);

    /* From here the object owns w: a croak frees it through DESTROY, after
     * S_discard (the savestack, not the tmps stack: die frees mortals first). */
    Newxz(w, 1, struct ff_writer);
    w->a.fd = -1;
    w->state = FF_W_ABORTED;
    obj = newRV_noinc(newSViv(PTR2IV(w)));
    SAVEFREESV(obj);
    sv_bless(obj, stash);
    SvREADONLY_on(SvRV(obj));
    w->path = SvREFCNT_inc_simple_NN(path);
    w->size = size;
    w->force_utf8 = force_utf8;
    w->intr.fn = S_on_eintr;
    w->intr.ctx = NULL;
    err = ff_atomic_init(&w->a, SvPVX(path), &opt, &w->intr);
    if (err)    /* as file_set_contents words it */
        croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(path));

    w->pid = pid = FF_WRITER_PID();
    if (!IS_SAFE_PATHNAME(SvPVX(path), SvCUR(path), FF_WRITER_CLASS "->new"))
        croak_errno(errno, "unable to open file '%" SVf ".tmp.%" IVdf "' - ", SVfARG(path), pid);

    SAVEDESTRUCTOR_X(S_discard, &w->a);
    err = ff_atomic_prepare(&w->a);
    if (err)
        croak_step(&w->a, err, path);
    err = ff_atomic_create(&w->a, (long)pid);
    if (err)
        croak_step(&w->a, err, path);
    ready = w->a;
    FF_WRITER_DISARM(&w->a);
    SvREFCNT_inc_simple_void_NN(obj);
    LEAVE;
    w->a = ready;
    w->state = FF_W_OPEN;
    XPUSHs(sv_2mortal(obj));

void
print(SV *self, ...)
  ALIAS:
    printf = 1
    write = 2
    PRINT = 3
    PRINTF = 4
  PREINIT:
    FF_WRITER_STRUCT *w;
    struct ff_atomic ready;
    SV *formatted = NULL;
    SSize_t slots, k;
    const int op = ix % 3;      /* 0 print, 1 printf, 2 write; tie names alike */
    int err;
  PPCODE:
    FF_WRITER_FETCH(w, self);
    ENTER;
    /* user code (magic, overloading, signal handlers) may drop the last
     * reference: w lives until this scope is left */
    SAVEFREESV(SvREFCNT_inc_simple_NN(SvRV(self)));
    FF_WRITER_USABLE(w);
    if (op == 1) {      /* printf: sprintf's own formatting */
        const char *pat;
        STRLEN patlen;

        if (items < 2)
            croak("Usage: " FF_WRITER_CLASS "::printf(self, format, ...)");
        pat = SvPV_const(ST(1), patlen);
        formatted = sv_newmortal();
        sv_setpvs(formatted, "");
        if (DO_UTF8(ST(1)))
            SvUTF8_on(formatted);
        sv_vsetpvfn(formatted, pat, patlen, NULL, &ST(2), (Size_t)(items - 2), NULL);
    }
    else if (op == 2 && items != 2)
        croak("Usage: " FF_WRITER_CLASS "::write(self, data)");

    /* print: arg, $, , arg, ..., arg, $\ ; printf and write: one chunk */
    slots = op != 0 ? 1 : items > 1 ? 2 * (items - 1) : 1;
    for (k = 0; k < slots; k++) {
        SV *sv, *owner;
        const char *p;
        STRLEN n;

        if (op == 1)
            sv = formatted;
        else if (op == 2)
            sv = ST(1);
        else if (k == slots - 1) {
            sv = PL_ors_sv;                 /* $\ */
            if (!sv || !SvOK(sv))
                continue;
        }
        else if (k % 2) {
            sv = GvSV(PL_ofsgv);            /* $, : read afresh, as print does */
            if (!sv || !(SvGMAGICAL(sv) || SvOK(sv)))
                continue;
        }
        else
            sv = ST(1 + k / 2);
        SvGETMAGIC(sv);
        if (k % 2 && !SvOK(sv))
            continue;
        p = S_payload(aTHX_ sv, w->force_utf8, &n, &owner,
                      op == 0 ? FF_WRITER_CLASS "::print"
                      : op == 1 ? FF_WRITER_CLASS "::printf" : FF_WRITER_CLASS "::write");
        FF_WRITER_USABLE(w);                /* overloading may have ended it */

        while (n > 0) {
            const char *wbuf;
            size_t wlen;
            SV *wowner;

            if (w->len == 0 && n >= w->size) {
                /* a chunk of a whole buffer or more: no copy */
                wbuf = p;
                wlen = n;
                wowner = owner;
                n = 0;
            }
            else {
                size_t take = w->size - w->len;

                if (take > n)
                    take = n;
                if (w->len + take > w->cap) {
                    size_t cap = w->cap ? w->cap : FF_WRITER_FIRST_CAP;

                    while (cap < w->len + take)
                        cap *= 2;
                    if (cap > w->size)
                        cap = w->size;
                    Renew(w->buf, cap, char);
                    w->cap = cap;
                }
                Copy(p, w->buf + w->len, take, char);
                w->len += take;
                p += take;
                n -= take;
                if (w->len < w->size)
                    continue;               /* n is 0: all of it is in */
                wbuf = w->buf;              /* full: one write(2) */
                wlen = w->len;
                wowner = NULL;
            }

            FF_WRITER_OWN_PROCESS(w);
            ENTER;
            w->state = FF_W_ABORTED;
            SAVEINT(w->state);              /* left aborted unless it succeeds */
            w->state = FF_W_BUSY;
            SAVEDESTRUCTOR_X(S_discard, &w->a);
            w->intr.ctx = wowner;           /* read-only while handlers run */
            w->a.step = FF_STEP_WRITE;
            err = ff_write_all(w->a.fd, wbuf, wlen, &w->intr);
            w->intr.ctx = NULL;
            if (err)
                croak_step(&w->a, err, w->path);
            ready = w->a;
            FF_WRITER_DISARM(&w->a);
            LEAVE;
            w->a = ready;
            w->state = FF_W_OPEN;
            if (wbuf == w->buf)
                w->len = 0;
        }
    }
    LEAVE;
    XSRETURN_YES;

void
commit(SV *self)
  ALIAS:
    CLOSE = 1
  PREINIT:
    FF_WRITER_STRUCT *w;
    int err = 0;
  PPCODE:
    PERL_UNUSED_VAR(ix);
    FF_WRITER_FETCH(w, self);
    ENTER;
    SAVEFREESV(SvREFCNT_inc_simple_NN(SvRV(self)));
    FF_WRITER_USABLE(w);
    FF_WRITER_OWN_PROCESS(w);
    ENTER;
    w->state = FF_W_ABORTED;
    SAVEINT(w->state);
    w->state = FF_W_BUSY;
    /* on failure it removes the temp; on success it only frees the paths */
    SAVEDESTRUCTOR_X(S_discard, &w->a);
    w->intr.ctx = NULL;
    if (w->len > 0) {
        w->a.step = FF_STEP_WRITE;
        err = ff_write_all(w->a.fd, w->buf, w->len, &w->intr);
    }
    if (!err)
        err = ff_atomic_commit(&w->a);
    if (err)
        croak_step(&w->a, err, w->path);
    LEAVE;
    w->state = FF_W_COMMITTED;
    Safefree(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    LEAVE;
    XSRETURN_YES;

void
abort(SV *self)
  PREINIT:
    FF_WRITER_STRUCT *w;
  PPCODE:
    FF_WRITER_FETCH(w, self);
    if (w->state == FF_W_BUSY)
        FF_WRITER_USABLE(w);
    if (w->state != FF_W_OPEN)
        XSRETURN_NO;
    if (FF_WRITER_PID() != w->pid)
        w->a.created = 0;       /* a forked copy: the temp is the parent's */
    ff_atomic_discard(&w->a);
    w->state = FF_W_ABORTED;
    Safefree(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    XSRETURN_YES;

void
DESTROY(SV *self)
  PREINIT:
    FF_WRITER_STRUCT *w;
  PPCODE:
    if (!SvROK(self) || !SvIOK(SvRV(self))
        || !(w = INT2PTR(struct ff_writer *, SvIVX(SvRV(self)))))
        XSRETURN_EMPTY;
    SvIV_set(SvRV(self), 0);
    if (FF_WRITER_PID() != w->pid)
        w->a.created = 0;       /* a forked copy: only its fd is its own */
    ff_atomic_discard(&w->a);   /* uncommitted: close and remove the temp */
    Safefree(w->buf);
    SvREFCNT_dec(w->path);
    Safefree(w);
    XSRETURN_EMPTY;

#  Threads: a clone would share w with its parent; clones are left undef.
int
CLONE_SKIP(...)
  CODE:
    PERL_UNUSED_VAR(items);
    RETVAL = 1;
  OUTPUT:
    RETVAL
