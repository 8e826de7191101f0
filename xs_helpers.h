/* xs_helpers.h - the perl side of PVE::File's helpers file_read_last_line
 * (xs_tail.c), tempfile, tempfile_contents and create_owned_file_fh
 * (xs_tempfile.c); their XSUBs are in Tail.xsh and Tempfile.xsh, the
 * syscalls in ff_tail.c and ff_tempfile.c. */
#ifndef XS_HELPERS_H
#define XS_HELPERS_H

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* file_read_last_line($file): the last line (mortal), or undef. */
SV *ffxs_file_read_last_line(pTHX_ SV *filename);
#define file_read_last_line(filename) ffxs_file_read_last_line(aTHX_ filename)

/* tempfile's IO::File (data NULL), or tempfile_contents' with data
 * written (mortal): dir_given false means dir is the default the module
 * chose. */
SV *ffxs_tempfile(pTHX_ SV *data, SV *perm, SV *dir, bool dir_given, SV *flags,
                  bool allow_links);
#define tempfile_handle(data, perm, dir, dir_given, flags, allow_links) \
    ffxs_tempfile(aTHX_ data, perm, dir, dir_given, flags, allow_links)

/* create_owned_file_fh's handle (mortal): parents made, created, owned. */
SV *ffxs_create_owned(pTHX_ SV *file, SV *uid, SV *gid, SV *perm);
#define create_owned_handle(file, uid, gid, perm) ffxs_create_owned(aTHX_ file, uid, gid, perm)

/* Savestack destructor: closes *(int *)fdp unless it is -1. */
void ffxs_close_fd_at_leave(pTHX_ void *fdp);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
