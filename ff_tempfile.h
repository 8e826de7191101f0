/* ff_tempfile.h - the files tempfile and create_owned_file_fh open,
 * without perl. Defined in ff_tempfile.c. */
#ifndef FF_TEMPFILE_H
#define FF_TEMPFILE_H

#include <sys/types.h>

#include "ff_io.h"

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* An unnamed file open with flags (O_RDWR, ...; O_EXCL unless allow_links)
 * and perm, as the reference's tempfile makes it: O_TMPFILE in dir; where
 * the filesystem does not support it (EOPNOTSUPP), a memfd when dir was not
 * the caller's (dir_given 0), else (and where memfd_create is missing) the
 * named file "<dir>/.tmpfile.<pid>" ("/tmp" for a dir not given), unlinked
 * at once. The portable build takes the named file. Returns 0 with *fd
 * (O_CLOEXEC), or an errno. (Which it made shows in /proc/self/fd: "#<ino>
 * (deleted)", "/memfd:tempfile (deleted)", ".tmpfile.<pid> (deleted)".)
 * A relative dir is taken from *at (AT_FDCWD: the working directory), read
 * at each try: a signal handler that runs between two may have had the
 * working directory held there, so that its chdir moves nothing. */
int ff_tempfile_open(const char *dir, int dir_given, int flags, int allow_links, mode_t perm,
                     const int *at, int *fd, const struct ff_eintr *intr);

/* For a relative dir, the working directory held (O_PATH) in *at, which
 * was AT_FDCWD; nothing for an absolute one. Returns 0 or an errno (*at
 * then as it was). */
int ff_tempfile_hold_cwd(const char *dir, int *at);

/* The directory File::Basename's dirname gives for path (Unix rules:
 * trailing slashes make no level, "." without a slash), a new string
 * (NULL: ENOMEM); *name is where path's last level starts, its trailing
 * slashes kept (the whole path when it is only slashes), so that opening
 * it in that directory fails as opening path fails. */
char *ff_owned_dir(const char *path, const char **name);

/* create_owned_file_fh's file: the directory dir opened (O_PATH) into *at,
 * name created in it with O_WRONLY|O_CREAT|O_EXCL and perm, then
 * fchown(uid, gid) on the fd, then moved (dup3) to the slot the directory
 * took, the lowest free one, as a plain open would get. *step says what
 * failed: FF_STEP_OPEN (the directory or the file) or FF_STEP_OWNER;
 * after a failed fchown the file is removed from *at while its fd is
 * still open, only when name there is still that file, then closed; *unlink_err holds why it was not (ESTALE:
 * another file has the name now, left alone; 0: removed). *at is the
 * caller's to close (also after a signal handler died in a retry). Returns
 * 0 with *fd, or the errno of *step. (Where the directory cannot be
 * held - no fd left for it but the file's, or O_PATH missing and the
 * directory unreadable - path is created as it is and nothing removed:
 * *unlink_err is why, EMFILE, ENFILE or EACCES.) */
int ff_create_owned(const char *path, const char *dir, const char *name, uid_t uid, gid_t gid,
                    mode_t perm, int *at, int *fd, enum ff_step *step, int *unlink_err,
                    const struct ff_eintr *intr);

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
