MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  file_read_last_line: the XSUB only; its perl side is in xs_tail.c, the
#  reads in ff_tail.c.

void
file_read_last_line(SV *filename = NULL, ...)
  PREINIT:
    SV *line;
  PPCODE:
    /* the reference's signature ($file): perl's text, at the caller's line */
    if (items != 1)
        croak("Too %s arguments for subroutine 'FastFile::file_read_last_line' (got %d; expected 1)",
              items < 1 ? "few" : "many", (int)items);
    line = file_read_last_line(filename);
    XPUSHs(line);
