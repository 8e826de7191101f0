MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  file_read_last_line: the XSUB only; its perl side is in xs_tail.c, the
#  reads in ff_tail.c.

void
file_read_last_line(SV *filename = NULL, ...)
  PREINIT:
    SV *line;
  PPCODE:
    line = file_read_last_line(filename);
    XPUSHs(line);
