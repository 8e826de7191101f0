/* xs_batch.c - file_set_contents_many's perl side (its XSUB is in
 * Batch.xsh, the syscalls in ff_batch.c): the pairs and options read, the
 * bytes of each file picked as file_set_contents picks them, errors in
 * perl's words. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "ff_batch.h"
#include "xs_common.h"
#include "xs_batch.h"

/* Savestack destructor: temps and new directories of the batch still ours
 * go away. Ours means this process's: a child forked by a signal handler
 * that unwinds its copy of this cleanup must leave them to the parent, at
 * every step (new directories before any temp exists too). $$ is compared,
 * not getpid(): a script may have assigned $$, and perl sets the child's
 * own. Asked only when there is something to remove. */
static void S_batch_discard(pTHX_ void *batch)
{
    struct ff_batch *b = (struct ff_batch *)batch;

    if (dollar_pid() != (IV)b->pid && ff_batch_has_work(b))
        ff_batch_forget(b);
    ff_batch_discard(b);
}

/* The batch's ff_on_eintr callbacks: before any handler runs, the
 * identity of each temp is noted (ff_batch_note_temps); nothing is done
 * when no signal is pending. */
struct batch_guard {
    struct ff_guard guard;      /* what is written are snapshots; the guard
                                 * only stops a child forked by a handler
                                 * from going on with this batch */
    struct ff_held held;        /* the renames: a handler's die held */
    struct ff_batch *b;
};

static int S_batch_handlers(struct batch_guard *bg, bool renaming)
{
    dTHX;

    if (!PL_sig_pending)
        return 0;
    ff_batch_note_temps(bg->b);
    return renaming ? ffxs_on_eintr_held(&bg->held) : ffxs_on_eintr(&bg->guard);
}

static int S_batch_on_eintr(void *ctx)
{
    return S_batch_handlers((struct batch_guard *)ctx, FALSE);
}

static int S_batch_on_eintr_renaming(void *ctx)
{
    return S_batch_handlers((struct batch_guard *)ctx, TRUE);
}

/* elems[0..n) (NULL: none) held until the scope is left, in one mortal
 * array: a handler that runs while they are read may free them. */
static void S_hold_elems(pTHX_ SV **elems, SSize_t n)
{
    AV *held = (AV *)sv_2mortal((SV *)newAV());
    SSize_t k, kept = 0;

    av_extend(held, n - 1);
    for (k = 0; k < n; k++)
        if (elems[k])
            AvARRAY(held)[kept++] = SvREFCNT_inc_simple_NN(elems[k]);
    AvFILLp(held) = kept - 1;
}

/* Croak for a directory that failed: "unable to open directory 'D' - $!",
 * after "file_set_contents_many: replaced 'A', then " when targets were. */
static void S_dir_croak(pTHX_ const struct ff_batch *b, int err, SV **paths, SV *replaced)
    __attribute__noreturn__;
#define dir_croak(b, err, paths, replaced) S_dir_croak(aTHX_ b, err, paths, replaced)

static void S_dir_croak(pTHX_ const struct ff_batch *b, int err, SV **paths, SV *replaced)
{
    const struct ff_batch_dir *d = &b->dirs[b->failed_dir];
    const char *dir = b->failed_path ? b->failed_path : d->path;
    /* the directory's name is made of a target's bytes */
    bool utf8 = SvUTF8(paths[b->order[d->first]]) && is_utf8_string((const U8 *)dir, 0);
    const char *what = b->dir_step == FF_DIR_MKDIR ? "unable to create directory '%" UTF8f "' - "
        : b->dir_step == FF_DIR_SYNC ? "unable to sync directory '%" UTF8f "' - "
        : b->dir_step == FF_DIR_CHANGED ? "unable to open directory '%" UTF8f "' again, it was "
                                          "moved or replaced during the call - "
        : "unable to open directory '%" UTF8f "' - ";
    SV *msg = sv_2mortal(SvCUR(replaced) ? newSVpvf("file_set_contents_many: replaced %" SVf ", then ",
                                                    SVfARG(replaced)) : newSVpvs(""));

    sv_catpvf(msg, what, UTF8fARG(utf8, strlen(dir), dir));
    croak_errno(err, "%" SVf, SVfARG(msg));
}

/* Croak for the failure err of b; paths[i] is file i's name as given. */
static void S_batch_croak(pTHX_ struct ff_batch *b, int err, SV **paths)
    __attribute__noreturn__;
#define batch_croak(b, err, paths) S_batch_croak(aTHX_ b, err, paths)

static void S_batch_croak(pTHX_ struct ff_batch *b, int err, SV **paths)
{
    struct ff_batch_file *failed;
    SV *replaced, *verdict;
    size_t i;

    /* croak runs user code ($SIG{__DIE__}): the temps go first, as the
     * cleanup would remove them (same syscalls), so that code never sees
     * them */
    ff_batch_remove_temps(b);
    if (ff_batch_has_work(b))   /* directories made: that code may chdir */
        ff_batch_note_temps(b);

    if (b->dup_second != (size_t)-1) {
        SV *first = paths[b->dup_first], *second = paths[b->dup_second];

        SETERRNO(EINVAL, 0);
        if (sv_eq(first, second))
            croak("file_set_contents_many: '%" SVf "' is given twice\n", SVfARG(first));
        croak("file_set_contents_many: '%" SVf "' and '%" SVf "' are the same file\n",
              SVfARG(first), SVfARG(second));
    }
    /* some targets may be new already (a rename, or the directory of the
     * next one, failed): say which, the rest are untouched */
    replaced = sv_2mortal(newSVpvs(""));
    for (i = 0; i < b->renamed; i++)
        if (!b->files[i].unchanged)
            sv_catpvf(replaced, "%s'%" SVf "'", SvCUR(replaced) ? ", " : "", SVfARG(paths[i]));
    if (b->dir_step != FF_DIR_NONE)
        dir_croak(b, err, paths, replaced);
    if (b->failed == (size_t)-1)
        croak_errno(err, "file_set_contents_many: ");
    failed = &b->files[b->failed];
    if (SvCUR(replaced) && (verdict = temp_verdict(&failed->a, paths[b->failed])))
        croak_errno(err, "file_set_contents_many: replaced %" SVf ", then unable to replace '%" SVf
                    "' - %" SVf " - ", SVfARG(replaced), SVfARG(paths[b->failed]), SVfARG(verdict));
    if (failed->a.step != FF_STEP_RENAME || !SvCUR(replaced))
        croak_step(&failed->a, err, paths[b->failed]);
    croak_errno(err, "file_set_contents_many: replaced %" SVf ", then close (rename) atomic "
                "file '%" SVf "' failed: ", SVfARG(replaced), SVfARG(paths[b->failed]));
}

/* A plain name: a plain string (FF_PLAIN_STRING), not empty. Its snapshot
 * is a copy of its bytes (a struct ffxs_path without an SV), not an SV: the
 * SV a message needs is made then (name_sv). */
#define PLAIN_NAME(sv) (FF_PLAIN_STRING(sv) && SvCUR(sv))

/* paths[i], made (mortal) from names[i] for a plain name. */
#define name_sv(paths, names, i) ((paths)[i] ? (paths)[i] : ((paths)[i] = path_sv(&(names)[i])))

/* The seed of the batch's name hashes (ff_batch_group.c): perl's own hash
 * secret, through PERL_HASH of two fixed strings. As random per process as
 * perl's hashes (a list of names made to collide needs the secret that
 * would flood perl's hashes too); fixed where PERL_HASH_SEED fixes perl's
 * (bench/instr.pl: the same count every run). No syscall, no clock. */
static uint64_t S_hash_seed(void)
{
    U32 lo, hi;

    PERL_HASH(lo, "FastFile batch names, low", 25);
    PERL_HASH(hi, "FastFile batch names, high", 26);
    return (uint64_t)hi << 32 | lo | 1;     /* never 0: 0 asks commit for one */
}

IV ffxs_file_set_contents_many(pTHX_ SV *list, SV *opts)
{
    const char *op = "file_set_contents_many";
    struct ff_options opt;
    struct ff_batch batch, *b = &batch;   /* this frame outlives its LEAVE */
    struct batch_guard bg = { { NULL, 0, FALSE, FALSE, FF_GUARD_PERL, NULL }, { NULL, NULL, NULL }, &batch };
    struct ff_eintr intr = { S_batch_on_eintr, &bg, FFXS_PENDING };
    struct ff_eintr renaming = { S_batch_on_eintr_renaming, &bg, FFXS_PENDING };
    bool force_utf8 = FALSE;
    SV **paths, **datas, **elems, *ors_sv = NULL, *last_data = NULL;
    struct ffxs_path *names = NULL;   /* names[i]: pair i's name where paths[i] is NULL */
    char *name_bytes = NULL;
    size_t names_size = 0, names_left = 0;
    AV *av;
    SSize_t npairs, i, first_magic;
    IV pid, written;
    int err;

    ENTER;
    {
        SV *const args[] = { list, opts };
        hold_args(args);
    }
    SvGETMAGIC(list);
    list = snapshot(list);          /* holds the array */
    if (opts) {
        SvGETMAGIC(opts);
        opts = snapshot(opts);
    }
    if (!SvROK(list) || SvTYPE(SvRV(list)) != SVt_PVAV)
        croak("file_set_contents_many: expects an array reference of file => data pairs\n");
    av = (AV *)SvRV(list);
    if ((av_top_index(av) + 1) % 2)
        croak("file_set_contents_many: odd number of elements: expects file => data pairs\n");
    npairs = (av_top_index(av) + 1) / 2;

    Zero(&opt, 1, struct ff_options);
    opt.perm = 0644;
    if (opts && SvOK(opts)) {
        if (!SvROK(opts) || SvTYPE(SvRV(opts)) != SVt_PVHV || SvOBJECT(SvRV(opts)))
            croak("file_set_contents_many: options must be a hash reference\n");
        parse_options((HV *)SvRV(opts), &opt, &force_utf8, NULL, op);
    }
    pid = dollar_pid();
    bg.guard.pid = pid;
    bg.held.guard = &bg.guard;

    err = ff_batch_init(b, (size_t)npairs, &opt, &intr);
    b->renaming = &renaming;
    SAVEDESTRUCTOR_X(S_batch_discard, b);
    if (err)
        croak_errno(err, "file_set_contents_many: ");
    /* $\ after each file's data, as file_set_contents appends it */
    if (!force_utf8 && PL_ors_sv && SvOK(PL_ors_sv))
        ors_sv = snapshot(PL_ors_sv);
    /* Every name and data: get-magic once each, in order, into a snapshot,
     * before user code (overloading, warnings) runs for any of them. The
     * elements are taken out of the array first (a tied array's as proxies,
     * whose FETCH has not run yet) and held from the first magical one on:
     * an element's FETCH may clear, shrink or grow the array (moving it),
     * and the elements after it are still the ones passed. */
    /* One data for many files (a list built from one $data): each element
     * shares the same immutable copy-on-write buffer, which perl can share
     * only 255 times, so that later snapshots would copy it. A plain string
     * whose bytes are the last data snapshot's shared buffer (same bytes,
     * same length and form: no user code can change a shared buffer) has
     * that snapshot as its own. */
#define SHARES_SNAPSHOT(sv, snap) \
    ((SvFLAGS(sv) & FF_PLAIN_MASK) == (SVf_POK | SVp_POK | SVf_IsCOW) \
     && (SvFLAGS(snap) & FF_PLAIN_MASK) == (SVf_POK | SVp_POK | SVf_IsCOW) \
     && SvPVX(sv) == SvPVX(snap) && SvCUR(sv) == SvCUR(snap))
#define FF_PLAIN_MASK (SVs_GMG | SVs_SMG | SVs_RMG | SVf_ROK | FF_NUM_FLAGS | SVf_POK | SVp_POK \
                       | SVf_UTF8 | SVf_IsCOW)
    Newx(paths, 4 * npairs + 1, SV *);
    SAVEFREEPV(paths);
    datas = paths + npairs;
    elems = paths + 2 * npairs;
    if (SvMAGICAL(av)) {
        for (i = 0; i < 2 * npairs; i++) {
            SV **elem = av_fetch(av, i, 0);

            elems[i] = elem ? *elem : NULL;
        }
    } else if (npairs) {    /* what av_fetch returns for a plain array, directly
                             * (an empty one may have no AvARRAY) */
        Copy(AvARRAY(av), elems, 2 * npairs, SV *);
    }
    /* The elements held from the first one with get-magic on (as
     * hold_arg_array holds them); the plain names before it (see
     * PLAIN_NAME) are measured: no user code runs before they are copied. */
    first_magic = 2 * npairs;
    for (i = 0; i < npairs; i++) {
        SV *name = elems[2 * i], *data = elems[2 * i + 1];

        if (name && SvGMAGICAL(name)) {
            first_magic = 2 * i;
            break;
        }
        if (name && PLAIN_NAME(name))
            names_size += SvCUR(name) + 1;
        if (data && SvGMAGICAL(data)) {
            first_magic = 2 * i + 1;
            break;
        }
        if (UNLIKELY(PL_sig_pending)) {
            /* handlers are due (see below): every element held, each
             * read as a magical one would be */
            first_magic = 0;
            names_size = 0;
            break;
        }
    }
    if (first_magic < 2 * npairs)
        S_hold_elems(aTHX_ elems + first_magic, 2 * npairs - first_magic);
    if (names_size) {
        /* mortal: it lives as long as the name snapshots it stands for */
        SV *block = sv_2mortal(newSV(npairs * sizeof *names + names_size));

        names = (struct ffxs_path *)SvPVX(block);
        name_bytes = (char *)(names + npairs);
        names_left = names_size;
    }
    for (i = 0; i < npairs; i++) {
        SV *name = elems[2 * i], *data = elems[2 * i + 1];

        if (!name) {
            paths[i] = &PL_sv_undef;
        } else if (2 * i < first_magic && PLAIN_NAME(name)
                   && SvCUR(name) < names_left) {   /* (it was measured: always) */
            struct ffxs_path *n = &names[i];

            n->pv = name_bytes;
            n->len = SvCUR(name);
            n->utf8 = cBOOL(SvUTF8(name));
            n->sv = NULL;
            Copy(SvPVX(name), name_bytes, n->len, char);
            name_bytes[n->len] = '\0';
            name_bytes += n->len + 1;
            names_left -= n->len + 1;
            paths[i] = NULL;
        } else {
            SvGETMAGIC(name);
            paths[i] = name_snapshot(name);
        }
        if (data) {
            SvGETMAGIC(data);
            if (last_data && SHARES_SNAPSHOT(data, last_data))
                data = last_data;
            else if (((SvFLAGS(data = snapshot(data)) & FF_PLAIN_MASK)
                      == (SVf_POK | SVp_POK | SVf_IsCOW)))
                last_data = data;       /* a share: the next may be the same */
        }
        datas[i] = data;
        /* No handler runs here, pending or not: what is written is what
         * was passed, and a handler run between two pairs could change the
         * pairs not copied yet (perl's own list copy is one op, which no
         * handler interrupts either). They run at the first poll after. */
    }
    if (ors_sv)
        b->tail = payload(ors_sv, FALSE, &b->tail_len, op);
    for (i = 0; i < npairs; i++) {
        SV *data = datas[i];
        const char *buf, *pv;
        STRLEN len, pv_len;

        if (paths[i]) {
            paths[i] = path_arg(paths[i], op);
            pv = SvPVX(paths[i]);
            pv_len = SvCUR(paths[i]);
        } else {                /* a plain name: a string, not empty, untainted */
            pv = names[i].pv;
            pv_len = names[i].len;
        }
        /* a byte string without magic is its own bytes (as payload finds) */
        if (!force_utf8 && data && FF_PLAIN_BYTES(data)) {
            buf = SvPVX(data);
            len = SvCUR(data);
        } else {
            buf = payload(data, force_utf8, &len, op);
        }
        if (memchr(pv, '\0', pv_len))
            croak_unless_safe(name_sv(paths, names, i), op, pid);
        err = ff_batch_add_len(b, pv, pv_len, buf, len);
        if (err)
            croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(name_sv(paths, names, i)));
        if (UNLIKELY(PL_sig_pending))   /* what is added are snapshots */
            (void)S_batch_on_eintr(&bg);
    }

    b->seed = S_hash_seed();
    err = ff_batch_commit(b, (long)pid);
    if (err) {                  /* it names what was replaced: it wins */
        for (i = 0; i < npairs; i++)
            (void)name_sv(paths, names, i);
        batch_croak(b, err, paths);
    }
    if (bg.held.error) {        /* a handler died during the renames */
        /* its die ran $SIG{__DIE__} already, as many times as perl's own
         * signal handling runs it: not once more for this throw */
        SAVESPTR(PL_diehook);
        PL_diehook = NULL;
        croak_sv(bg.held.error);
    }
    written = (IV)b->written;
    LEAVE;
    SETERRNO(0, 0);             /* as file_set_contents leaves it (data written) */
    return written;
}
