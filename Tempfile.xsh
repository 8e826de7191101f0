MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  tempfile, tempfile_contents and create_owned_file_fh: the handles
#  (lib/FastFile.pm takes the arguments as the reference does); perl side
#  in xs_tempfile.c, syscalls in ff_tempfile.c.

void
_tempfile(SV *perm, SV *dir, bool dir_given, SV *flags, bool allow_links)
  PPCODE:
    XPUSHs(tempfile_handle(NULL, perm, dir, dir_given, flags, allow_links));

void
_tempfile_contents(SV *data, SV *perm, SV *dir, bool dir_given, SV *flags, bool allow_links)
  PPCODE:
    XPUSHs(tempfile_handle(data, perm, dir, dir_given, flags, allow_links));

void
_create_owned_file_fh(SV *file, SV *uid, SV *gid, SV *perm)
  PPCODE:
    XPUSHs(create_owned_handle(file, uid, gid, perm));

# perl's own signature check's croak for msg (no "\n": the location is
# added), at the line that called the perl sub calling this, as perl's
# croaks there (caller_cx(0): that sub's frame, blk_oldcop: its call)
void
_croak_caller(SV *msg)
  PREINIT:
    const PERL_CONTEXT *cx;
  PPCODE:
    cx = caller_cx(0, NULL);
    if (cx)
        PL_curcop = cx->blk_oldcop;
    croak_sv(msg);
