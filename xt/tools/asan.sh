#!/bin/sh
# xt/tools/asan.sh - the test suite against an XS build with
# -fsanitize=address,undefined (run by `make asan`).
#
# The distribution is copied to a temporary directory and built there, so the
# normal build in the working tree is left alone. perl itself is not
# instrumented: libasan is preloaded, leak detection is off (perl leaks a bit
# at exit by design) and every report (ASan or UBSan, from the test process or
# any child it starts) goes to a log file; any log file fails the run.
#
# Environment:
#   PERL         the perl to build and test with (make asan: the one that ran
#                Makefile.PL); its own App::Prove runs the tests
#   ASAN_TESTS   test files to run (default: t/*.t)
#   ASAN_KEEP=1  keep the temporary build directory
#   ASAN_JOBS    prove -j value (default 2)
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PERL=${PERL:-perl}
CC=${CC:-gcc}

LIBASAN=$($CC -print-file-name=libasan.so)
case "$LIBASAN" in
    /*) ;;
    *) echo "asan: libasan.so not found by $CC -print-file-name" >&2; exit 1 ;;
esac
[ -e "$LIBASAN" ] || { echo "asan: $LIBASAN does not exist" >&2; exit 1; }

. "$ROOT/xt/tools/workdir.sh"
work_dir asan asan "${ASAN_KEEP:-0}"

# the sources, without the artefacts of the normal build
(cd "$ROOT" && tar -cf - \
    --exclude=./.git --exclude=./blib --exclude='*.o' --exclude=./Makefile \
    --exclude=./Makefile.old --exclude=./FastFile.c --exclude=./FastFile.bs \
    --exclude='./MYMETA.*' --exclude=./pm_to_blib --exclude='./FastFile-*' \
    --exclude=./cover_db --exclude='./t/fusefs/.build.lock' .) \
    | (cd "$WORK" && tar -xf -) || { echo "asan: copying the sources failed" >&2; exit 1; }

SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
LDDLFLAGS=$($PERL -MConfig -e 'print $Config{lddlflags}')
cd "$WORK" || exit 1
echo "asan: building in $WORK with $SAN"
if ! $PERL Makefile.PL OPTIMIZE="-O1 -g $SAN" LDDLFLAGS="$LDDLFLAGS $SAN" \
        >build.log 2>&1 || ! make >>build.log 2>&1; then
    cat build.log >&2
    echo "asan: build failed" >&2
    exit 1
fi
# prove the build is instrumented before trusting a clean run
if ! nm -D blib/arch/auto/FastFile/FastFile.so | grep -q __asan_report; then
    echo "asan: FastFile.so is not instrumented" >&2
    exit 1
fi

REPORTS="$WORK/reports"
mkdir -p "$REPORTS"
TESTS=${ASAN_TESTS:-$(ls t/*.t)}
status=0
# detect_stack_use_after_return: the readers and writers keep C locals
# registered on perl's savestack, this is what catches a frame used too late
LD_PRELOAD="$LIBASAN" \
ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1:log_path=$REPORTS/asan" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan" \
FASTFILE_SANITIZED=1 \
    "$PERL" -MApp::Prove -e 'my $p = App::Prove->new; $p->process_args(@ARGV); exit($p->run ? 0 : 1)' \
        -- -b -j"${ASAN_JOBS:-2}" $TESTS || status=1

reports=$(ls "$REPORTS")
if [ -n "$reports" ]; then
    for f in "$REPORTS"/*; do
        echo "==== $f" >&2
        cat "$f" >&2
    done
    echo "asan: sanitizer reports found (above)" >&2
    status=1
fi
if [ $status = 0 ]; then
    echo "asan: clean (no ASan/UBSan report; tests passed)"
else
    echo "asan: FAILED" >&2
fi
exit $status
