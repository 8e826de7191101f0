MODULE = FastFile    PACKAGE = FastFile::Writer

PROTOTYPES: DISABLE

#  FastFile::Writer: the XSUBs only; the writer (struct ff_writer and its
#  helpers) is in xs_writer.c, its buffer struct ff_wbuf in ff_io.c. The
#  typemap's FastFile::Writer fetches the object behind self and croaks
#  for anything else.

void
new(SV *klass, SV *filename, SV *opts = NULL)
  PPCODE:
    /* own package: where this XSUB's glob is (CvSTASH is where it was booted from) */
    XPUSHs(writer_new(CvGV(cv) ? GvSTASH(CvGV(cv)) : NULL, klass, filename, opts));

void
print(FastFile::Writer self, ...)
  ALIAS:
    PRINT = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    writer_print(self, ax, items);
    XSRETURN_YES;

void
printf(FastFile::Writer self, ...)
  ALIAS:
    PRINTF = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    writer_printf(self, ax, items);
    XSRETURN_YES;

void
write(FastFile::Writer self, ...)
  PPCODE:
    writer_write(self, ax, items);
    XSRETURN_YES;

void
commit(FastFile::Writer self)
  ALIAS:
    CLOSE = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    writer_commit(self);
    XSRETURN_YES;

void
abort(FastFile::Writer self)
  PPCODE:
    if (writer_abort(self))
        XSRETURN_YES;
    XSRETURN_NO;

#  Quiet on anything but a writer: no typemap.
void
DESTROY(SV *self)
  PPCODE:
    writer_destroy(self);
    XSRETURN_EMPTY;

#  Threads: a clone would share the C writer with its parent; clones are
#  left undef.
int
CLONE_SKIP(...)
  CODE:
    PERL_UNUSED_VAR(items);
    RETVAL = 1;
  OUTPUT:
    RETVAL
