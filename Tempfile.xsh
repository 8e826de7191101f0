MODULE = FastFile    PACKAGE = FastFile

PROTOTYPES: DISABLE

#  tempfile, tempfile_contents and create_owned_file_fh: the fds behind
#  them (lib/FastFile.pm makes the handles); perl side in xs_tempfile.c,
#  syscalls in ff_tempfile.c.

IV
_tempfile_fd(SV *perm, SV *dir, bool dir_given, SV *flags, bool allow_links)
  CODE:
    RETVAL = tempfile_fd(NULL, perm, dir, dir_given, flags, allow_links);
  OUTPUT:
    RETVAL

IV
_tempfile_contents_fd(SV *data, SV *perm, SV *dir, bool dir_given, SV *flags, bool allow_links)
  CODE:
    RETVAL = tempfile_fd(data, perm, dir, dir_given, flags, allow_links);
  OUTPUT:
    RETVAL

IV
_create_owned_fd(SV *file, SV *uid, SV *gid, SV *perm)
  CODE:
    RETVAL = create_owned_fd(file, uid, gid, perm);
  OUTPUT:
    RETVAL

#  for the module's cleanup when perl cannot make a handle of an fd
void
_close_fd(int fd)
  PPCODE:
    close(fd);
    XSRETURN_EMPTY;

#  for tests: 0 O_TMPFILE, 1 memfd, 2 the named file, -1 none yet
int
_tempfile_kind()
  CODE:
    RETVAL = ffxs_tempfile_kind();
  OUTPUT:
    RETVAL
