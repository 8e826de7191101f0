MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  file_set_contents_many: the XSUB only; its perl side is in xs_batch.c,
#  the syscalls in ff_batch.c.

void
file_set_contents_many(SV *list, SV *opts = NULL)
  PREINIT:
    IV written;
  PPCODE:
    written = file_set_contents_many(list, opts);
    mXPUSHi(written);
