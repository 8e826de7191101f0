#  file_set_contents_many: the XSUB only; its C glue is in Batch.h, the
#  syscalls in ff_batch.c.
#include "Batch.h"

MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

void
file_set_contents_many(SV *list, SV *opts = NULL)
  PREINIT:
    IV written;
  PPCODE:
    written = S_file_set_contents_many(aTHX_ list, opts);
    mXPUSHi(written);
