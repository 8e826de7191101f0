/* xs_copy.h - the perl side of file_copy and of safe_read_from's fast path
 * (their XSUBs are in Copy.xsh, the copy's syscalls in ff_copy.c). Defined
 * in xs_copy.c. Include it after perl.h (with PERL_NO_GET_CONTEXT) and
 * ppport.h. */
#ifndef XS_COPY_H
#define XS_COPY_H

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* file_copy($src, $dst, $max, $perm or \%options): what
 * file_set_contents($dst, file_get_contents($src, $max), $perm) does, the
 * bytes moved by the kernel. Returns 1, or 0 when if_changed found the
 * target holding them already. */
int ffxs_file_copy(pTHX_ SV *src, SV *dst, SV *max, SV *perm);
#define file_copy(src, dst, max, perm) ffxs_file_copy(aTHX_ src, dst, max, perm)

/* safe_read_from ($oneline false) on a plain handle (a glob on an fd,
 * not tied, no :utf8, open for reading): the reference's first 8 KiB
 * read, and when it was full and the handle is on a regular file, the rest
 * to its end with large reads. Returns what was read, *done when that is
 * all (the end was seen); not done, the caller goes on with sysread. NULL
 * for any other handle (tied, closed, in-memory, :utf8, write-only, a
 * socket): the caller reads with sysread, as the reference does. name
 * (undef: none) for the error texts: "file '<name>' ..." or "input ...". */
SV *ffxs_read_regular(pTHX_ SV *fh, SV *max, SV *name, bool *done);
#define read_regular(fh, max, name, done) ffxs_read_regular(aTHX_ fh, max, name, done)

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
