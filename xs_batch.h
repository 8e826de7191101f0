/* xs_batch.h - file_set_contents_many's perl side: what its XSUB
 * (Batch.xsh) calls. Defined in xs_batch.c; the syscalls are in ff_batch.c.
 * Include it after perl.h (with PERL_NO_GET_CONTEXT) and ppport.h. */
#ifndef XS_BATCH_H
#define XS_BATCH_H

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility push(hidden)   /* see ff_io.h */
#endif

/* file_set_contents_many([ file => data, ... ], \%options): the number of
 * files written. Every argument is read (get-magic once) before anything
 * is touched. */
IV ffxs_file_set_contents_many(pTHX_ SV *list, SV *opts);
#define file_set_contents_many(list, opts) ffxs_file_set_contents_many(aTHX_ list, opts)

#if defined(__GNUC__) && __GNUC__ >= 4
#pragma GCC visibility pop
#endif

#endif
