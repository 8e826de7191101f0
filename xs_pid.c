/* xs_pid.c - $$ for temp names without a getpid(2) a call.
 *
 * Since perl 5.16 every read of $$ asks the kernel (its get-magic calls
 * getpid, which glibc stopped caching in 2.25): one syscall of five in a
 * call. Here the pid is kept in a page of the interpreter's own, mapped
 * with madvise(MADV_WIPEONFORK) (Linux 4.14): the kernel hands every child
 * of a fork a zeroed copy of that page, so a child reads 0 and asks
 * getpid once. That holds however the child was made - perl's fork (also
 * in a signal handler, or from another ithread's interpreter), open's
 * "-|", a C library's fork() in another XS module, _Fork, even a raw
 * fork or clone(SIGCHLD) through syscall() - since it is the kernel that
 * wipes the page, not a handler: no pthread_atfork handler (which neither
 * _Fork nor a raw syscall runs, and which a process could not unregister
 * once the module is unloaded), no process-wide variable. Each interpreter
 * (ithreads, embedders with several) maps its own page at BOOT or CLONE
 * and unmaps it when it is destroyed (call_atexit: before DynaLoader's
 * own exit hook, which may unload this file, as they run last in, first
 * out).
 *
 * That hook is a pointer into this file, as are the XSUBs perl holds (and
 * has imported): the boot makes the file permanent (dlopen RTLD_NOLOAD |
 * RTLD_NODELETE of itself), so that DynaLoader::dl_unload_file (dlclose)
 * keeps it mapped and every such pointer good, whatever flags it was
 * linked with. Loaded again, the boot finds its interpreter set up
 * already (PL_modglobal) and maps no page and adds no hook again.
 *
 * Not covered: a clone with CLONE_VM but no CLONE_THREAD (a new process
 * that shares this memory, through syscall() only: no perl or libc call
 * makes one) keeps reading its parent's pid; its temp names then clash
 * with the parent's, and O_EXCL refuses the clash (the call takes a random
 * name, as for any name that exists). vfork's child shares memory too, but
 * may only exec or _exit.
 *
 * $$ as perl has it is honoured: once a script assigns to $$ (perl keeps
 * the assignment until the next fork), and where the page cannot be had
 * (an older kernel, FF_PORTABLE, not Linux), $$ is read as before. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* dladdr */
#endif
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"
#include "ppport.h"

#include "xs_common.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__linux__) && !defined(FF_PORTABLE) && defined(MADV_WIPEONFORK)
#define FF_HAVE_WIPEONFORK 1
#else
#define FF_HAVE_WIPEONFORK 0
#endif

#define MY_CXT_KEY "FastFile::_pid" XS_VERSION

/* What the page holds: the pid, and the temp names' ".tmp.<pid>". */
struct pid_page {
    pid_t pid;              /* 0: not asked yet in this process */
    unsigned char suffix_len;
    char suffix[FF_PID_SUFFIX_MAX];
};

typedef struct {
    GV *pid_gv;             /* *$ (a reference held) */
    struct pid_page *wiped; /* in a page every fork's child gets zeroed; or NULL */
    size_t page_size;
} my_cxt_t;

START_MY_CXT

/* call_atexit hook: the interpreter is being destroyed. */
static void S_pid_release(pTHX_ void *unused)
{
    dMY_CXT;

    PERL_UNUSED_ARG(unused);
    if (MY_CXT.wiped) {
        munmap(MY_CXT.wiped, MY_CXT.page_size);
        MY_CXT.wiped = NULL;
    }
    SvREFCNT_dec((SV *)MY_CXT.pid_gv);
    MY_CXT.pid_gv = NULL;
}

/* This interpreter's *$ and page (a new thread's are its own). */
static void S_pid_setup(pTHX)
{
    dMY_CXT;

    MY_CXT.pid_gv = (GV *)SvREFCNT_inc_simple_NN(gv_fetchpvs("$", GV_ADD | GV_NOTQUAL, SVt_PV));
    MY_CXT.wiped = NULL;
    MY_CXT.page_size = 0;
#if FF_HAVE_WIPEONFORK
    {
        long size = sysconf(_SC_PAGESIZE);
        void *page = size > 0 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;

        if (page != MAP_FAILED) {
            if (madvise(page, (size_t)size, MADV_WIPEONFORK) == 0) {   /* EINVAL before 4.14 */
                MY_CXT.wiped = (struct pid_page *)page;
                MY_CXT.page_size = (size_t)size;
            } else {
                munmap(page, (size_t)size);
            }
        }
    }
#endif
    call_atexit(S_pid_release, NULL);
}

/* This shared object made permanent (dlclose leaves it mapped); 1 when it
 * is, 0 where that cannot be asked. */
static int S_keep_loaded(void)
{
#if defined(RTLD_NODELETE) && defined(RTLD_NOLOAD)
    Dl_info info;
    void *self;

    if (!dladdr((void *)&ffxs_pid_boot, &info) || !info.dli_fname)
        return 0;
    /* found by the name it was loaded under: no file is opened */
    self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (!self)
        return 0;
    dlclose(self);      /* the reference this took: the object stays */
    return 1;
#else
    return 0;
#endif
}

void ffxs_pid_boot(pTHX)
{
    /* loaded again after dl_unload_file: this file was kept, and so were
     * this interpreter's context, page and exit hook (not where it could
     * not be kept: a new copy, its context to make) */
    if (S_keep_loaded() && hv_exists(PL_modglobal, MY_CXT_KEY, sizeof(MY_CXT_KEY) - 1))
        return;
    (void)hv_stores(PL_modglobal, MY_CXT_KEY, newSViv(1));
    MY_CXT_INIT;
    S_pid_setup(aTHX);
}

void ffxs_pid_clone(pTHX)
{
    MY_CXT_CLONE;
    S_pid_setup(aTHX);
}

bool ffxs_pid_cached(pTHX)
{
    dMY_CXT;

    return MY_CXT.wiped != NULL;
}

FF_HOT IV ffxs_pid_suffix(pTHX_ char *suffix, size_t *suffix_len)
{
    dMY_CXT;
    SV *sv = MY_CXT.pid_gv ? GvSV(MY_CXT.pid_gv) : NULL;
    MAGIC *mg;
    IV pid;

    /* $$'s magic holds its glob until a script assigns to $$ (then the
     * pid of that moment): with the glob, $$ is getpid() */
    if (MY_CXT.wiped && sv && SvMAGICAL(sv)
        && ((mg = SvMAGIC(sv))->mg_type == PERL_MAGIC_sv || (mg = mg_find(sv, PERL_MAGIC_sv)))
        && mg->mg_obj && isGV(mg->mg_obj)) {
        struct pid_page *page = MY_CXT.wiped;

        if (!page->pid) {
            pid_t now = getpid();

            page->suffix_len = (unsigned char)ff_temp_suffix(page->suffix, (long)now);
            page->pid = now;        /* last: until then the page says "not asked" */
        }
        /* copied: the page is zeroed in a child forked by user code
         * (a warning's handler) before the caller uses it */
        if (suffix) {
            memcpy(suffix, page->suffix, FF_PID_SUFFIX_MAX);
            *suffix_len = page->suffix_len;
        }
        return (IV)page->pid;
    }
    sv = get_sv("$", GV_ADD);
    pid = SvIV(sv);
    if (suffix)
        *suffix_len = ff_temp_suffix(suffix, (long)pid);
    return pid;
}

IV ffxs_pid(pTHX)
{
    return ffxs_pid_suffix(aTHX_ NULL, NULL);
}
