MODULE = FastFile    PACKAGE = FastFile::Writer

PROTOTYPES: DISABLE

#  FastFile::Writer: the XSUBs only; the writer is struct ff_writer and its
#  helpers (writer_*) in FastFile.xs, the buffer struct ff_wbuf in ff_io.c.
#  Data, commit and the tie methods run inside ENTER/LEAVE: writer_hold
#  keeps the object alive there, and converted payloads are freed there.

void
new(SV *klass, SV *filename, SV *opts = NULL)
  PPCODE:
    XPUSHs(writer_new(klass, filename, opts));

void
print(SV *self, ...)
  ALIAS:
    PRINT = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    ENTER;
    writer_print(writer_hold(self), ax, items);
    LEAVE;
    XSRETURN_YES;

void
printf(SV *self, ...)
  ALIAS:
    PRINTF = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    ENTER;
    writer_printf(writer_hold(self), ax, items);
    LEAVE;
    XSRETURN_YES;

void
write(SV *self, ...)
  PPCODE:
    ENTER;
    writer_write(writer_hold(self), ax, items);
    LEAVE;
    XSRETURN_YES;

void
commit(SV *self)
  ALIAS:
    CLOSE = 1
  PPCODE:
    PERL_UNUSED_VAR(ix);
    ENTER;
    writer_commit(writer_hold(self));
    LEAVE;
    XSRETURN_YES;

void
abort(SV *self)
  PPCODE:
    if (writer_abort(writer_fetch(self)))
        XSRETURN_YES;
    XSRETURN_NO;

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
