/* xs_writer.h - FastFile::Writer, the streaming atomic writer: what its
 * XSUBs (Writer.xsh) call. Defined in xs_writer.c. Include it after
 * perl.h (with PERL_NO_GET_CONTEXT) and ppport.h. */
#ifndef XS_WRITER_H
#define XS_WRITER_H

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

struct ff_writer;

/* The typemap's FastFile::Writer (T_FF_WRITER): the writer behind self. */
typedef struct ff_writer *FastFile__Writer;

/* The writer behind self; croaks for anything else. */
struct ff_writer *ffxs_writer_fetch(pTHX_ SV *self);
#define writer_fetch(self) ffxs_writer_fetch(aTHX_ self)

/* CLASS->new(filename, opts): the temp file made, the object returned
 * (mortal). Every argument is read once, before anything is touched.
 * own: the package of the XSUB (CvSTASH), or NULL. */
SV *ffxs_writer_new(pTHX_ HV *own, SV *klass, SV *filename, SV *opts);
#define writer_new(own, klass, filename, opts) ffxs_writer_new(aTHX_ own, klass, filename, opts)

/* The data methods: ST(1) .. ST(items - 1) of the XSUB's stack (ax). */

/* print: each item, then $, between items and $\ at the end. */
void ffxs_writer_print(pTHX_ struct ff_writer *w, I32 ax, I32 items);
#define writer_print(w, ax, items) ffxs_writer_print(aTHX_ w, ax, items)

/* printf: sprintf's own formatting of format, list. */
void ffxs_writer_printf(pTHX_ struct ff_writer *w, I32 ax, I32 items);
#define writer_printf(w, ax, items) ffxs_writer_printf(aTHX_ w, ax, items)

/* write: one value, no $, or $\ . */
void ffxs_writer_write(pTHX_ struct ff_writer *w, I32 ax, I32 items);
#define writer_write(w, ax, items) ffxs_writer_write(aTHX_ w, ax, items)

/* Write the rest, close, rename. */
void ffxs_writer_commit(pTHX_ struct ff_writer *w);
#define writer_commit(w) ffxs_writer_commit(aTHX_ w)

/* Remove the temp file; FALSE when there is nothing to abort (committed or
 * aborted already). */
bool ffxs_writer_abort(pTHX_ struct ff_writer *w);
#define writer_abort(w) ffxs_writer_abort(aTHX_ w)

/* DESTROY: an uncommitted temp is removed and the object is no writer any
 * more; its memory goes with the object (free magic, which also cleans up
 * whatever class the object is in). Quiet on anything but a writer; does
 * nothing while the writer is inside one of its writes (a signal handler's
 * call). */
void ffxs_writer_destroy(pTHX_ SV *self);
#define writer_destroy(self) ffxs_writer_destroy(aTHX_ self)

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
