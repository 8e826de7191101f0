/* xs_tail.c - file_read_last_line's perl side (XSUB in Tail.xsh, reads in
 * ff_tail.c): the name as the reference takes it, its texts. */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"
#include "xs_helpers.h"
#include "ff_tail.h"

void ffxs_close_fd_at_leave(pTHX_ void *fdp)
{
    int *fd = (int *)fdp;

    PERL_UNUSED_CONTEXT;
    if (*fd >= 0) {
        ff_close_read(*fd);
        *fd = -1;
    }
}

/* ff_tail_grow on a mortal SV: SvGROW keeps what it held. */
static char *S_grow_sv(void *ctx, size_t cap)
{
    dTHX;
    SV *sv = (SV *)ctx;

    return SvGROW(sv, cap + 1);
}

SV *ffxs_file_read_last_line(pTHX_ SV *filename)
{
    const char *op = "file_read_last_line";
    SV *path, *line;
    struct ff_guard guard = { NULL, 0, FALSE, TRUE, FF_GUARD_PERL, NULL };
    struct ff_eintr intr = { ffxs_on_eintr, &guard, FFXS_PENDING };
    struct ff_tail tail;
    struct ff_reread reread = { NULL, 0, 0, 0, NULL };
    int fd = -1, err;

    ENTER;   /* closes fd when this function returns or croaks */
    if (filename) {
        SvGETMAGIC(filename);
        filename = name_snapshot(filename);
    }
    /* no name: undef, as the reference's failed open (ENOENT) */
    if (!filename || !SvOK(filename) || (SvPOKp(filename) && SvCUR(filename) == 0)) {
        if (!filename || !SvOK(filename))
            warn_soft(packWARN(WARN_UNINITIALIZED), FALSE, "Use of uninitialized value in %s", op);
        LEAVE;
        SETERRNO(ENOENT, LIB_INVARG);
        return sv_newmortal();    /* undef the caller may modify, as the reference's */
    }
    path = path_arg(filename, NULL);
    SAVEDESTRUCTOR_X(ffxs_close_fd_at_leave, &fd);
    reread.path = SvPVX(path);
    err = safe_path(path, op) ? ff_open_read(&reread, &fd, &intr) : ENOENT;
    if (err == ENOENT) {
        LEAVE;
        SETERRNO(err, 0);
        return sv_newmortal();    /* undef the caller may modify, as the reference's */
    }
    if (err)
        croak_errno(err, "file '%" SVf "' exists but open for reading failed - ", SVfARG(path));

    line = sv_2mortal(newSVpvs(""));
    tail.grow = S_grow_sv;
    tail.ctx = line;
    do                  /* again with the new file, if a writer replaced it */
        err = ff_read_last_line(fd, &tail, &intr);
    while (err && ff_read_again(&reread, &fd, err, &intr));
    if (err)
        croak_errno_at(err, "%s failed - ", tail.step == FF_TAIL_SEEK ? "sysseek" : "sysread");
    LEAVE;
    if (tail.line_len && tail.line)
        Move(tail.buf + tail.line, tail.buf, tail.line_len, char);
    /* terminated whatever its length: the reads filled the buffer, and C
     * code (open, chdir, pack "p") takes the string up to its NUL */
    SvCUR_set(line, tail.line_len);
    *SvEND(line) = '\0';
    /* read bytes are tainted, as sysread's; the '' of a file whose size
     * reads 0 was never read (the reference's is a literal), though perl
     * tainted it when it was made if the name was tainted */
    if (TAINTING_get) {
        if (tail.buf)
            SvTAINTED_on(line);
        else
            SvTAINTED_off(line);
    }
    /* $! as the reference leaves it: its sysread sets 0; a size of 0 ends
     * it before any read, with its IO::File open's ENOTTY (isatty) */
    SETERRNO(tail.buf ? 0 : ENOTTY, 0);
    return line;
}
