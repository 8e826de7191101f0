MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  file_copy and safe_read_from's fast path: the XSUBs only; their perl side
#  is in xs_copy.c, the copy's syscalls in ff_copy.c.

void
file_copy(SV *src, SV *dst = NULL, SV *max = NULL, SV *perm = NULL, ...)
  PREINIT:
    int wrote;
  PPCODE:
    wrote = file_copy(src, dst, max, perm);
    mXPUSHi(wrote);

# safe_read_from (lib/FastFile.pm) with $oneline false: (what was read,
# whether it is all), or nothing when the handle is not a plain one
void
_read_regular(SV *fh, SV *max, SV *name)
  PREINIT:
    SV *content;
    bool done = FALSE;
  PPCODE:
    content = read_regular(fh, max, name, &done);
    if (content) {
        XPUSHs(content);
        mXPUSHi(done);
    }
