/* Batch.h - perl glue of file_set_contents_many (its XSUB is in Batch.xsh,
 * which includes this; the syscalls are in ff_batch.c). It uses FastFile.xs's
 * helpers: S_path_arg, S_parse_options, S_payload, S_on_eintr, croak_step. */

#include "ff_batch.h"

#define FSCM "file_set_contents_many"

/* Savestack destructor: temps of the batch still ours go away. */
static void S_batch_discard(pTHX_ void *batch)
{
    PERL_UNUSED_CONTEXT;
    ff_batch_discard((struct ff_batch *)batch);
}

/* The data SV whose buffer is written from: kept alive and read-only until
 * the call's scope is left, so user code that runs meanwhile (a warning
 * handler while a later file's data is read, a signal handler on EINTR)
 * can neither free nor move the buffer. */
static void S_batch_hold(pTHX_ SV *owner)
{
    if (!owner)
        return;
    SAVEFREESV(SvREFCNT_inc_simple_NN(owner));
    if (!SvREADONLY(owner)) {
        SAVESETSVFLAGS(owner, SVf_READONLY, 0);
        SvREADONLY_on(owner);
    }
}

/* Croak for the failure err of b; paths[i] is file i's name as given. */
static void S_batch_croak(pTHX_ const struct ff_batch *b, int err, SV **paths)
    __attribute__noreturn__;

static void S_batch_croak(pTHX_ const struct ff_batch *b, int err, SV **paths)
{
    const struct ff_batch_file *failed;
    SV *replaced;
    size_t i;

    if (b->dup_second != (size_t)-1) {
        SV *first = paths[b->dup_first], *second = paths[b->dup_second];

        SETERRNO(EINVAL, 0);
        if (sv_eq(first, second))
            croak(FSCM ": '%" SVf "' is given twice\n", SVfARG(first));
        croak(FSCM ": '%" SVf "' and '%" SVf "' are the same file\n",
              SVfARG(first), SVfARG(second));
    }
    if (b->failed == (size_t)-1)
        croak_errno(err, FSCM ": ");
    failed = &b->files[b->failed];
    if (failed->a.step != FF_STEP_RENAME || b->renamed == 0)
        croak_step(&failed->a, err, paths[b->failed]);
    /* some targets are new already: say which, the rest are untouched */
    replaced = sv_2mortal(newSVpvs(""));
    for (i = 0; i < b->renamed; i++)
        if (!b->files[i].unchanged)
            sv_catpvf(replaced, "%s'%" SVf "'", SvCUR(replaced) ? ", " : "", SVfARG(paths[i]));
    if (!SvCUR(replaced))
        croak_step(&failed->a, err, paths[b->failed]);
    croak_errno(err, FSCM ": replaced %" SVf ", then close (rename) atomic file '%" SVf
                "' failed: ", SVfARG(replaced), SVfARG(paths[b->failed]));
}
#define batch_croak(b, err, paths) S_batch_croak(aTHX_ b, err, paths)

/* file_set_contents_many([ file => data, ... ], \%options): the number of
 * files written. Every argument is read (get-magic once) before anything
 * is touched. */
static IV S_file_set_contents_many(pTHX_ SV *list, SV *opts)
{
    struct ff_options opt;
    struct ff_batch batch, *b = &batch;   /* this frame outlives its LEAVE */
    struct ff_eintr intr = { S_on_eintr, NULL };  /* the data is held read-only */
    bool force_utf8 = FALSE;
    SV **paths, *ors_owner = NULL;
    AV *av;
    SSize_t npairs, i;
    IV pid, written;
    int err;

    ENTER;
    SvGETMAGIC(list);
    if (opts)
        SvGETMAGIC(opts);
    if (!SvROK(list) || SvTYPE(SvRV(list)) != SVt_PVAV)
        croak(FSCM ": expects an array reference of file => data pairs\n");
    av = (AV *)SvRV(list);
    SAVEFREESV(SvREFCNT_inc_simple_NN(av));
    if ((av_top_index(av) + 1) % 2)
        croak(FSCM ": odd number of elements: expects file => data pairs\n");
    npairs = (av_top_index(av) + 1) / 2;

    Zero(&opt, 1, struct ff_options);
    opt.perm = 0644;
    if (opts && SvOK(opts)) {
        if (!SvROK(opts) || SvTYPE(SvRV(opts)) != SVt_PVHV || SvOBJECT(SvRV(opts)))
            croak(FSCM ": options must be a hash reference\n");
        S_parse_options(aTHX_ (HV *)SvRV(opts), &opt, &force_utf8, NULL);
    }
    pid = SvIV(get_sv("$", GV_ADD));

    err = ff_batch_init(b, (size_t)npairs, &opt, &intr);
    SAVEDESTRUCTOR_X(S_batch_discard, b);
    if (err)
        croak_errno(err, FSCM ": ");
    /* $\ after each file's data, as file_set_contents appends it. Held: a
     * handler that sets $\ frees the old one. */
    if (!force_utf8 && PL_ors_sv && SvOK(PL_ors_sv)) {
        b->tail = S_payload(aTHX_ PL_ors_sv, FALSE, &b->tail_len, &ors_owner, FSCM);
        if (ors_owner)
            SAVEFREESV(SvREFCNT_inc_simple_NN(ors_owner));
    }
    Newx(paths, npairs ? npairs : 1, SV *);
    SAVEFREEPV(paths);
    for (i = 0; i < npairs; i++) {
        SV **name = av_fetch(av, 2 * i, 0), **data = av_fetch(av, 2 * i + 1, 0);
        SV *filename = name ? *name : &PL_sv_undef, *owner;
        const char *buf;
        STRLEN len;

        SvGETMAGIC(filename);
        paths[i] = S_path_arg(aTHX_ filename);
        if (SvTAINTED(filename)) {
            TAINT;
            taint_proper(NULL, FSCM);
        }
        if (data)
            SvGETMAGIC(*data);
        buf = S_payload(aTHX_ data ? *data : NULL, force_utf8, &len, &owner, FSCM);
        S_batch_hold(aTHX_ owner);
        if (!safe_path(paths[i], FSCM))   /* ENOENT, like open: whatever a warning handler did */
            croak_errno(ENOENT, "unable to open file '%" SVf ".tmp.%" IVdf "' - ",
                        SVfARG(paths[i]), pid);
        err = ff_batch_add(b, SvPVX(paths[i]), buf, len);
        if (err)
            croak_errno(err, "unable to replace '%" SVf "' - ", SVfARG(paths[i]));
    }

    err = ff_batch_commit(b, (long)pid);
    if (err)
        batch_croak(b, err, paths);
    written = (IV)b->written;
    LEAVE;
    return written;
}
