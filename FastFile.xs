/* FastFile.xs - the XSUBs, and the glue of file_set_contents and the two
 * readers: arguments read the way perl reads them, errors in perl's words.
 * The streaming writer is in xs_writer.c (XSUBs in Writer.xsh),
 * file_set_contents_many in xs_batch.c (XSUB in Batch.xsh), file_copy in
 * xs_copy.c (XSUB in Copy.xsh), the perl
 * helpers they all share in xs_common.c; the syscalls, without perl, in
 * ff_io.c and ff_batch.c. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"
#include "xs_writer.h"
#include "xs_batch.h"
#include "xs_helpers.h"
#include "xs_copy.h"

/* The data's snapshot when it is a plain byte string, without a new SV:
 * its buffer shared by copy-on-write as snapshot() shares it (the same
 * conditions, the same share count in the buffer's last byte), and given
 * back when the call's scope is left, however it is left. Whatever user
 * code does to the caller's scalar then un-shares it on the caller's side
 * and leaves these bytes alone; if the caller's scalar let go of them
 * meanwhile, they are freed here. */
struct ff_share {
    char *pv;        /* the shared buffer, or NULL */
    STRLEN size;     /* its allocation: the count is its last byte */
};

/* The share given back. */
FF_HOT static void S_unshare(struct ff_share *share)
{
    U8 *count;

    if (!share->pv)
        return;
    count = (U8 *)share->pv + share->size - 1;
    if (*count)
        --*count;                   /* the caller's scalar still has it */
    else
        Safefree(share->pv);        /* ours alone: the caller's let go */
    share->pv = NULL;
}

/* sv's bytes shared into *share (given back by the call's destructor):
 * TRUE, or FALSE when sv is not a plain byte string perl can share (then
 * snapshot()). */
FF_HOT static bool S_share_bytes(SV *sv, struct ff_share *share)
{
#if defined(SvCANCOW) && defined(CowREFCNT)
    if (!SvMAGICAL(sv) && SvPOK(sv) && !SvUTF8(sv) && SvLEN(sv) && SvCANCOW(sv)) {
        if (!SvIsCOW(sv)) {
            SvIsCOW_on(sv);
            CowREFCNT(sv) = 0;          /* 0 means one owner */
        }
        CowREFCNT(sv)++;
        share->pv = SvPVX(sv);
        share->size = SvLEN(sv);
        return TRUE;
    }
#endif
    PERL_UNUSED_ARG(sv);
    PERL_UNUSED_ARG(share);
    return FALSE;
}

/* What a file_set_contents call holds until it returns or unwinds, given
 * back by one savestack destructor: the replacement (its discard), then
 * the data's share. */
struct ff_call {
    struct ff_atomic atomic;    /* target NULL until start_write sets it up */
    struct ff_share share;      /* plain data: its bytes, shared */
};

FF_HOT static void S_call_done(pTHX_ void *p)
{
    struct ff_call *call = (struct ff_call *)p;

    PERL_UNUSED_CONTEXT;
    if (call->atomic.target) {
        ff_atomic_discard(&call->atomic);
        ff_atomic_release_cwd(&call->atomic);   /* held where a handler ran */
    }
    S_unshare(&call->share);
}

/* Returns 1 when the file was written, 0 when if_changed found it the same. */
FF_HOT static int S_file_set_contents(pTHX_ SV *filename, SV *data, SV *perm, SV *force)
{
    const char *op = "file_set_contents";
    SV *ors_sv = NULL;
    const char *buf, *ors = "";
    STRLEN len, ors_len = 0;
    bool force_utf8 = FALSE;
    struct ff_options opt;
    struct ff_call call;                     /* this frame outlives its scope */
    struct ff_atomic *a = &call.atomic;
    IV perm_iv = 0644;                       /* a plain integer perm, read at once */
    HV *opts_hv = NULL;                      /* a plain options hash, taken at once */
    bool force_ok = FALSE, force_true = FALSE;  /* a plain force_utf8, read at once */
    STRLEN shared_len = 0;
    struct ffxs_path path;
    char name_buf[FF_NAME_BUF];              /* a plain name's snapshot */
    char temp_buf[FF_TEMP_BUF];              /* the temp's name, as long */
    char suffix[FF_PID_SUFFIX_MAX];          /* ".tmp.<pid>" */
    size_t suffix_len;
    struct ff_eintr intr;
    struct ff_guard guard;
    IV pid;
    int err, wrote;
    /* The scope is this function's own: its cleanups point into this
     * frame, so they run before it returns (LEAVE_SCOPE), or while a croak
     * unwinds, before the frame is left. No ENTER: no local() is made here,
     * only savestack entries, so the index is all that must be restored. */
    const I32 saved_ix = PL_savestack_ix;
    I32 call_ix, done_ix;                    /* where S_call_done's entry starts, ends */

    /* As the reference's my (...) = @_: each argument's get-magic once, in
     * order, into a snapshot, before any user code (overloading) can run;
     * then $\. From here nothing of the caller's is used. */
    if ((SvFLAGS(filename) | (data ? SvFLAGS(data) : 0) | (perm ? SvFLAGS(perm) : 0)
         | (force ? SvFLAGS(force) : 0)) & SVs_GMG) {      /* (hold_args' own test, unrolled) */
        SV *const args[] = { filename, data, perm, force };
        hold_args(args);
    }
    a->target = NULL;
    call.share.pv = NULL;
    call_ix = PL_savestack_ix;
    SAVEDESTRUCTOR_X(S_call_done, &call);
    done_ix = PL_savestack_ix;
    SvGETMAGIC(filename);
    /* a plain name: copied, no SV; else an SV snapshot (path_arg below) */
    if (name_copy(filename, name_buf, &path))
        filename = NULL;
    else
        filename = name_snapshot(filename);
    if (data) {
        SvGETMAGIC(data);
        if (S_share_bytes(data, &call.share)) {
            shared_len = SvCUR(data);
            data = NULL;                /* from here: call.share */
        } else {
            data = snapshot(data);
        }
    }
    if (perm) {
        SvGETMAGIC(perm);
        /* a plain integer (no magic, so not tainted, no other form) is
         * its value, taken now: no snapshot needed */
        if (!SvMAGICAL(perm) && (SvFLAGS(perm) & (SVf_IOK | SVf_NOK | SVf_POK | SVf_ROK
                                                   | SVp_NOK | SVp_POK | SVf_IVisUV)) == SVf_IOK) {
            perm_iv = SvIVX(perm);
            perm = NULL;
        } else if (!SvMAGICAL(perm) && FF_OPTIONS_REF(perm)) {
            /* the options hash, taken now (its reference is all a
             * snapshot would keep): held, as the reference would hold it,
             * until the call ends */
            opts_hv = (HV *)SvRV(perm);
            hold_in_scope((SV *)opts_hv);
            perm = NULL;
        } else {
            perm = snapshot(perm);
        }
    }
    if (force) {
        SvGETMAGIC(force);
        /* no magic and no reference (no overloaded bool): its truth and
         * definedness are all that is used, taken now */
        if (!SvMAGICAL(force) && !SvROK(force)) {
            force_ok = SvOK(force);
            force_true = SvTRUE_nomg(force);
            force = NULL;
        } else {
            force = snapshot(force);
        }
    }
    if (PL_ors_sv && SvOK(PL_ors_sv))
        ors_sv = snapshot(PL_ors_sv);

    if (filename) {
        SV *name = path_arg(filename, op);
        struct ffxs_path of_sv = FFXS_PATH_OF(name);

        path = of_sv;
    }
    Zero(&opt, 1, struct ff_options);
    opt.perm = (mode_t)perm_iv;
    force_utf8 = force_true;
    if (opts_hv)
        options_arg(opts_hv, force, force_ok, &opt, &force_utf8, op);
    else if (perm || force)     /* not plain values, read above */
        write_args(perm, force, force_ok, &opt, &force_utf8, op);
    if (call.share.pv) {
        /* a byte string: written as it is, or as UTF-8 (Latin-1) with
         * force_utf8, as payload() does */
        buf = call.share.pv;
        len = shared_len;
        if (force_utf8 && !is_utf8_invariant_string((const U8 *)buf, len)) {
            U8 *utf8 = bytes_to_utf8((const U8 *)buf, &len);
            SAVEFREEPV(utf8);
            buf = (const char *)utf8;
        }
    } else {
        buf = payload(data, force_utf8, &len, op);
    }
    /* $\ : the reference prints the data, so print appends it (not to an
     * encoded copy) */
    if (ors_sv && !force_utf8)
        ors = payload(ors_sv, FALSE, &ors_len, op);

    pid = ffxs_pid_suffix(aTHX_ suffix, &suffix_len);
    guard.atomic = a;
    guard.pid = pid;
    guard.forked = FALSE;
    guard.reading = FALSE;
    guard.perl = FF_GUARD_PERL;
    guard.unwind_fd = NULL;
    intr.fn = ffxs_on_eintr;
    intr.ctx = &guard;
    intr.pending = NULL;        /* no loop of syscalls to poll in */
    wrote = start_write(a, &path, &opt, &intr, pid, op, buf, len, ors, ors_len, temp_buf,
                        suffix, suffix_len, NULL);
    if (wrote) {
        /* read back before the rename if a handler ran: not published
         * when it wrote into the temp by name */
        ff_atomic_verify_data(a, buf, len, ors, ors_len, a->opt.preserve);
        a->step = FF_STEP_WRITE;
        err = ff_write_tail_all(a->fd, buf, len, ors, ors_len, &intr);
        if (err)
            croak_step(a, err, path_sv(&path));
        err = ff_atomic_commit(a);
        if (err)
            croak_step(a, err, path_sv(&path));
    }
    /* The scope left as LEAVE_SCOPE(saved_ix) would, with S_call_done's
     * own entry run here instead of by leave_scope's general loop (which
     * a plain call then never enters): what was pushed after it (the
     * options hash's hold, an encoded copy), then it, then hold_args'
     * holds from before it. */
    LEAVE_SCOPE(done_ix);
    PL_savestack_ix = call_ix;
    S_call_done(aTHX_ &call);
    LEAVE_SCOPE(saved_ix);
    /* $! as the reference leaves it: its sysopen's ENOTTY (perl asks
     * isatty), cleared by syswrite when there were bytes to write */
    SETERRNO(len + ors_len ? 0 : ENOTTY, 0);
    return wrote;
}
#define file_set_contents(filename, data, perm, force) \
    S_file_set_contents(aTHX_ filename, data, perm, force)

#define FF_LINE_BLOCK 8192

static SV *S_file_get_contents(pTHX_ SV *filename, SV *max_arg)
{
    const char *op = "file_get_contents";
    SV *content;
    size_t max, size, cap, first_cap, total = 0, got;
    unsigned reads;     /* that returned bytes */
    /* a child forked by a handler may not read on from the shared offset */
    struct ff_guard guard = { NULL, 0, FALSE, TRUE, FF_GUARD_PERL, NULL };
    struct ff_eintr intr = { ffxs_on_eintr, &guard, FFXS_PENDING };
    struct ffxs_path path;
    char name_buf[FF_NAME_BUF];         /* a plain name's snapshot */
    struct ff_reread reread = { NULL, 0, 0, 0, NULL };
    int fd = -1, err, on_fuse = -1;
    /* this function's own scope, without ENTER (see file_set_contents).
     * fd is closed here before each croak and the return; only where a
     * signal handler could die (ffxs_on_eintr) does its close go on the
     * savestack (guard.unwind_fd). */
    const I32 saved_ix = PL_savestack_ix;
#define CLOSE_FD() STMT_START { if (fd >= 0) { ff_close_read(fd); fd = -1; } } STMT_END

    /* snapshots, before user code (overloading) runs, as in file_set_contents */
    if ((SvFLAGS(filename) | (max_arg ? SvFLAGS(max_arg) : 0)) & SVs_GMG) {
        SV *const args[] = { filename, max_arg };
        hold_args(args);
    }
    SvGETMAGIC(filename);
    if (name_copy(filename, name_buf, &path))
        filename = NULL;
    else
        filename = name_snapshot(filename);
    if (max_arg) {
        SvGETMAGIC(max_arg);
        max_arg = snapshot(max_arg);
    }
    if (filename) {
        SV *name = path_arg(filename, NULL);
        struct ffxs_path of_sv = FFXS_PATH_OF(name);

        path = of_sv;
    }
    max = max_arg ? max_arg(max_arg, op) : FF_DEFAULT_MAX;

    guard.unwind_fd = &fd;
    reread.path = path.pv;
    err = !memchr(path.pv, '\0', path.len) || safe_path(path_sv(&path), op)
              ? ff_open_read(&reread, &fd, &intr) : ENOENT;   /* as open: whatever a
                                                               * warning handler did */
    if (err)
        croak_errno(err, "can't open '%" SVf "' - ", SVfARG(path_sv(&path)));   /* (no fd) */
again:      /* fd is the file a writer put in place of the one open before */
    /* fstat's size is only a hint: "too long" is decided on the bytes read
     * (sysfs files say 4096 whatever they hold) */
    err = ff_size_hint(fd, &size, &intr);
    if (err && ff_read_again(&reread, &fd, err, &intr))
        goto again;
    if (err) {
        CLOSE_FD();
        croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path_sv(&path)));
    }

    /* one read of the whole file plus a byte that would show it grew */
    cap = first_cap = size ? size + 1 : FF_GROW_START;
    if (cap > max + 1)
        cap = first_cap = max + 1;
    content = sv_2mortal(read_buffer(cap, fd, &on_fuse));
    reads = 0;
    for (;;) {
        err = ff_read_full(fd, SvPVX(content) + total, cap - total, size, &got, &reads, &intr);
        if (err && ff_read_again(&reread, &fd, err, &intr)) {
            total = 0;          /* the new file, from its start */
            goto again;
        }
        if (err) {
            CLOSE_FD();
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path_sv(&path)));
        }
        total += got;
        if (total > max) {
            CLOSE_FD();
            croak_too_long(path_sv(&path));     /* $! 0, as the reference leaves it */
        }
        if (total < cap)
            break;                              /* end of file */
        cap = cap > max / 2 ? max + 1 : cap * 2;
        SvGROW(content, cap + 1);
        size = 0;                               /* it grew past fstat's size */
    }
    SvCUR_set(content, total);
    *SvEND(content) = '\0';
    SvPOK_only(content);
    if (TAINTING_get)
        SvTAINTED_on(content);
    /* more than one read (a short one, then one that another version
     * answered), or one of more than one FUSE request: on FUSE (pmxcfs)
     * another version may have answered a later request */
    if (reads > 1 || cap != first_cap || ff_more_than_one_request(SvPVX(content), cap)) {
        close_read_at_leave(&fd);               /* untorn may croak */
        content = untorn(content, &fd, on_fuse, 0, max, max + 1, path_sv(&path), &reread, &intr);
    }
    CLOSE_FD();
#undef CLOSE_FD
    LEAVE_SCOPE(saved_ix);
    SETERRNO(0, 0);             /* as the reference's last sysread leaves it */
    return content;
}
#define file_get_contents(filename, max_arg) S_file_get_contents(aTHX_ filename, max_arg)

/* Where the first record under $/ (rs) ends in buf[0..total): its length
 * with the separator, or 0 while it has not ended. *begin is moved past
 * the newlines that paragraph mode skips. */
static size_t record_end(SV *rs, const char *sep, STRLEN sep_len, const char *buf,
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
 * string), chomped: what the reference's <$fh> + chomp give (no chomp for
 * a record "0": its `chomp $res if $res`). $/ is taken once, on entry: a
 * signal handler that assigns to it frees the SV perl keeps it in. */
static SV *S_read_record(pTHX_ int *fd, SV *path, struct ff_reread *reread,
                         const struct ff_eintr *intr)
{
    SV *rs = sv_mortalcopy_flags(PL_rs, 0), *line, *sep_sv = NULL;
    const char *sep = NULL;
    STRLEN sep_len = 0;
    size_t cap = FF_LINE_BLOCK, total, begin, end, got;
    unsigned reads;     /* that returned bytes, a read of more than one FUSE request as 2 */
    int err, same, tries = 0;

    if (SvROK(rs)) {
        IV n = SvIV(SvRV(rs));          /* perl refuses \0 and negatives in $/ */
        sep_len = n > 0 ? (STRLEN)n : 1;
        if (cap > sep_len)
            cap = sep_len;
    } else if (SvOK(rs)) {
        sep_sv = rs;
        if (!sv_utf8_downgrade(sep_sv, TRUE))       /* the file is read as bytes */
            croak("Wide character in $/");
        sep = SvPV_const(sep_sv, sep_len);
    }
    line = sv_2mortal(newSV(cap));
again:
    total = begin = end = 0;
    reads = 0;
    for (;;) {
        size_t scanned = total;

        err = ff_read_some(*fd, SvPVX(line) + total, cap - total, &got, intr);
        if (err && ff_read_again(reread, fd, err, intr)) {
            total = begin = 0;  /* the new file, from its start */
            continue;
        }
        if (err == EISDIR) {
            SETERRNO(EISDIR, 0);        /* $! as the reference leaves it */
            return NULL;
        }
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        if (got == 0)
            break;
        reads += ff_more_than_one_request(SvPVX(line) + total, cap - total) ? 2 : 1;
        total += got;
        end = record_end(rs, sep, sep_len, SvPVX(line), &begin, scanned, total);
        if (end) {
            SETERRNO(ENOTTY, 0);        /* see file_read_firstline */
            break;
        }
        ff_poll_signals(intr);          /* a pipe: many reads, none interrupted */
        if (total == cap) {
            cap *= 2;
            SvGROW(line, cap + 1);
            reads++;            /* (its end a read of 0 may find, another version's) */
        }
    }
    /* more than one read or request on FUSE (pmxcfs): another version may
     * have answered the later ones; what was read must agree with a
     * second read of it (to its end when the file's end ended the
     * record), else read again from the start (see read_line) */
    if (reads > 1 && ff_fd_on_fuse(*fd) && ff_fd_rereadable(*fd)) {
        err = ff_file_matches(*fd, 0, SvPVX(line), total, !end, &same, intr);
        if (err)
            croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path));
        if (!same) {
            tries += 2;                 /* the read and its check */
            if (tries + 2 > FF_TORN_TRIES)
                croak_errno(EAGAIN, "unable to read file '%" SVf "' - changed while read, %d reads: ",
                            SVfARG(path), tries);
            if (lseek(*fd, 0, SEEK_SET) < 0)
                croak_errno(errno, "unable to read file '%" SVf "' - ", SVfARG(path));
            SETERRNO(0, 0);             /* as for the first read */
            goto again;
        }
    }
    if (!end)                                       /* end of file */
        end = total;
    if (end <= begin && SvOK(rs))
        return NULL;                                /* nothing: empty file */
    /* (undef: an empty file reads as "", once, as readline gives it) */
    /* chomp: paragraph mode removes every trailing newline, a string its
     * one separator, undef and \N nothing */
    if (SvOK(rs) && !SvROK(rs) && !(end - begin == 1 && SvPVX(line)[begin] == '0')) {
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
#define read_record(fd, path, reread, intr) S_read_record(aTHX_ fd, path, reread, intr)

/* The first line of *fd without its "\n" (the default $/, the fast path):
 * read into a block on the stack, the line copied into an SV of its own
 * length (no 8 KiB buffer handed to the caller's variable for a short
 * line); a line longer than the block goes on in an SV that grows. NULL
 * for an empty file. On a read error *fd is closed before the croak. */
static SV *S_read_line(pTHX_ int *fd, struct ffxs_path *path, struct ff_reread *reread,
                       const struct ff_eintr *intr)
{
    char block[FF_LINE_BLOCK], *buf = block;
    SV *line = NULL;
    size_t cap = sizeof block, total, have, got, size;
    unsigned reads;
    int err, tries = 0, same;

again:
    total = have = 0;
    reads = 0;
    for (;;) {
        char *nl;

        err = ff_read_some(*fd, buf + total, cap - total, &got, intr);
        if (err && ff_read_again(reread, fd, err, intr)) {
            total = 0;          /* the new file, from its start */
            continue;
        }
        if (err == EISDIR) {
            SETERRNO(EISDIR, 0);        /* $! as the reference leaves it */
            return NULL;
        }
        if (err)
            goto fail;
        /* a read of more than one FUSE request counts as more reads */
        reads += ff_more_than_one_request(buf + total, cap - total) ? 2 : 1;
        if (got == 0) {
            if (total == 0)
                return NULL;
            break;
        }
        nl = (char *)memchr(buf + total, '\n', got);
        total += got;
        if (nl) {
            have = total;
            total = (size_t)(nl - buf);          /* chomp: the line without "\n" */
            SETERRNO(ENOTTY, 0);                 /* see file_read_firstline */
            break;
        }
        /* a first read short of the block, no newline: a regular file of
         * that size (fstat) has ended, with no read of 0 (on pmxcfs one
         * more request, which another version may answer) */
        if (total == got && got < cap && !ff_size_hint(*fd, &size, intr) && size == total)
            break;
        ff_poll_signals(intr);                   /* a pipe: many reads, none interrupted */
        if (total == cap) {                      /* a long line: keep reading */
            cap *= 2;
            if (!line) {
                line = sv_2mortal(newSV(cap));
                Copy(block, SvPVX(line), total, char);
            } else {
                SvGROW(line, cap + 1);
            }
            buf = SvPVX(line);
        }
    }
    if (!have)
        have = total;                            /* it ended without "\n" */
    /* more than one read or request on FUSE (pmxcfs): another version may
     * have answered the later requests; what was read must agree with a
     * second read of it (see file_get_contents), else read again from
     * the start, FF_TORN_TRIES reads in all */
    if (reads > 1 && ff_fd_on_fuse(*fd) && ff_fd_rereadable(*fd)) {
        err = ff_file_matches(*fd, 0, buf, have, 0, &same, intr);
        if (err)
            goto fail;
        if (!same) {
            tries += 2;                 /* the read and its check */
            if (tries + 2 > FF_TORN_TRIES) {
                ff_close_read(*fd);
                *fd = -1;
                croak_errno(EAGAIN, "unable to read file '%" SVf "' - changed while read, %d reads: ",
                            SVfARG(path_sv(path)), tries);
            }
            if (lseek(*fd, 0, SEEK_SET) < 0) {
                err = errno;
                goto fail;
            }
            SETERRNO(0, 0);             /* as for the first read */
            goto again;
        }
    }
    if (!line)
        return sv_2mortal(newSVpvn(block, total));
    SvCUR_set(line, total);
    return line;

fail:
    ff_close_read(*fd);
    *fd = -1;
    croak_errno(err, "unable to read file '%" SVf "' - ", SVfARG(path_sv(path)));
}
#define read_line(fd, path, reread, intr) S_read_line(aTHX_ fd, path, reread, intr)

static SV *S_file_read_firstline(pTHX_ SV *filename)
{
    const char *op = "file_read_firstline";
    SV *line;
    /* a child forked by a handler may not read on from the shared offset */
    struct ff_guard guard = { NULL, 0, FALSE, TRUE, FF_GUARD_PERL, NULL };
    struct ff_eintr intr = { ffxs_on_eintr, &guard, FFXS_PENDING };
    struct ffxs_path path;
    char name_buf[FF_NAME_BUF];         /* a plain name's snapshot */
    struct ff_reread reread = { NULL, 0, 0, 0, NULL };
    bool named = FALSE;
    int fd = -1, err;
    /* this function's own scope, without ENTER (see file_get_contents): fd
     * is closed by hand before each croak and the return; its close goes on
     * the savestack only where a signal handler could die (guard.unwind_fd)
     * or for a $/ other than "\n" */
    const I32 saved_ix = PL_savestack_ix;

    if (filename) {
        SvGETMAGIC(filename);
        if (name_copy(filename, name_buf, &path))
            named = TRUE;
        else
            filename = name_snapshot(filename);
    }
    if (!named) {
        SV *name;

        /* no name: undef, as the reference's open of it fails */
        if (!filename || !SvOK(filename) || (SvPOKp(filename) && SvCUR(filename) == 0)) {
            if (!filename || !SvOK(filename))
                warn_soft(packWARN(WARN_UNINITIALIZED), FALSE, "Use of uninitialized value in %s",
                          op);
            SETERRNO(ENOENT, LIB_INVARG);
            return &PL_sv_undef;
        }
        name = path_arg(filename, NULL);
        {
            struct ffxs_path of_sv = FFXS_PATH_OF(name);

            path = of_sv;
        }
    }

    guard.unwind_fd = &fd;
    reread.path = path.pv;
    err = !memchr(path.pv, '\0', path.len) || safe_path(path_sv(&path), op)
              ? ff_open_read(&reread, &fd, &intr) : ENOENT;   /* as open: whatever a
                                                               * warning handler did */
    if (err == ENOENT) {
        LEAVE_SCOPE(saved_ix);
        SETERRNO(err, 0);
        return &PL_sv_undef;
    }
    if (err)
        croak_errno(err, "file '%" SVf "' exists but open for reading failed - ",
                    SVfARG(path_sv(&path)));   /* (no fd) */

    /* NULL: an empty file, or a directory (the reference reads nothing
     * from it; $! stays EISDIR). $! as the reference's readline leaves it:
     * its open's ENOTTY (perl asks isatty) when the record ended before the
     * end of the file, 0 when the read reached it; the readers set it. */
    SETERRNO(0, 0);
    if (SvPOK(PL_rs) && SvCUR(PL_rs) == 1 && *SvPVX(PL_rs) == '\n') {
        line = read_line(&fd, &path, &reread, &intr);
    } else {
        close_read_at_leave(&fd);
        line = read_record(&fd, path_sv(&path), &reread, &intr);
    }
    err = errno;
    ff_close_read(fd);
    fd = -1;
    LEAVE_SCOPE(saved_ix);
    SETERRNO(err, 0);
    if (!line)
        return &PL_sv_undef;
    *SvEND(line) = '\0';
    SvPOK_only(line);
    if (TAINTING_get)
        SvTAINTED_on(line);
    return line;
}
#define file_read_firstline(filename) S_file_read_firstline(aTHX_ filename)

/* xsubpp's wrapper of file_set_contents, next to the rest of its path
 * (declared as xsubpp defines it, XS_EUPXS: internal unless
 * PERL_EUPXS_ALWAYS_EXPORT) */
#if defined(XS_INTERNAL) && !defined(PERL_EUPXS_ALWAYS_EXPORT)
XS_INTERNAL(XS_FastFile_file_set_contents) FF_HOT;
#endif

MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

BOOT:
    ffxs_pid_boot(aTHX);

#  A new ithread's interpreter: its own $$ page (xs_pid.c).
void
CLONE(...)
  CODE:
    PERL_UNUSED_VAR(items);
    ffxs_pid_clone(aTHX);

int
file_set_contents(SV *filename, SV *data = NULL, SV *perm = NULL, SV *force_utf8 = NULL, ...)
  CODE:
    /* (into the op's TARG, as perl's own ops return numbers: no new SV) */
    RETVAL = file_set_contents(filename, data, perm, force_utf8);
  OUTPUT:
    RETVAL

void
file_get_contents(SV *filename, SV *max = NULL, ...)
  PREINIT:
    SV *content;
  PPCODE:
    content = file_get_contents(filename, max);
    XPUSHs(content);

void
file_read_firstline(SV *filename = NULL, ...)
  PREINIT:
    SV *line;
  PPCODE:
    line = file_read_firstline(filename);
    XPUSHs(line);

# what this build uses: { portable => 1 } when every Linux-only call takes its
# POSIX fallback (ff_compat.h), else which Linux calls are built in; for tests
void
_build_info()
  PREINIT:
    HV *info;
    unsigned features;
  PPCODE:
    features = ff_features();
    info = newHV();
    (void)hv_stores(info, "portable", newSViv(!!(features & FF_FEATURE_PORTABLE)));
    (void)hv_stores(info, "renameat2", newSViv(!!(features & FF_FEATURE_RENAMEAT2)));
    (void)hv_stores(info, "sync_file_range", newSViv(!!(features & FF_FEATURE_SYNC_FILE_RANGE)));
    (void)hv_stores(info, "getrandom", newSViv(!!(features & FF_FEATURE_GETRANDOM)));
    (void)hv_stores(info, "fdatasync", newSViv(!!(features & FF_FEATURE_FDATASYNC)));
    (void)hv_stores(info, "O_PATH", newSViv(!!(features & FF_FEATURE_O_PATH)));
    (void)hv_stores(info, "acl", newSViv(!!(features & FF_FEATURE_ACL)));
    (void)hv_stores(info, "statx", newSViv(!!(features & FF_FEATURE_STATX)));
    (void)hv_stores(info, "pid_cache", newSViv(ffxs_pid_cached(aTHX)));
    (void)hv_stores(info, "copy_file_range", newSViv(!!(features & FF_FEATURE_COPY_FILE_RANGE)));
    (void)hv_stores(info, "file_handle", newSViv(!!(features & FF_FEATURE_FILE_HANDLE)));
    mXPUSHs(newRV_noinc((SV *)info));

INCLUDE: Writer.xsh

INCLUDE: Batch.xsh

INCLUDE: Tail.xsh

INCLUDE: Tempfile.xsh

INCLUDE: Copy.xsh
