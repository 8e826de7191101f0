#!/bin/sh
# xt/tools/buildcheck.sh - build the distribution another way and run the
# test suite against that build (make clang-check, make portable-check).
#
#   buildcheck.sh clang      perl Makefile.PL CC=clang: no compiler warning
#                            (-Wall -Wextra) and the suite passes
#   buildcheck.sh portable   perl Makefile.PL FF_PORTABLE=1: every Linux-only
#                            call takes its POSIX fallback; the suite passes
#
# The MANIFEST's files are copied to a temporary directory and built there,
# so the build in the working tree is left alone.
#
# Environment:
#   PERL              the perl to build and test with (make: the one that ran
#                     Makefile.PL); its own App::Prove runs the tests
#   BUILDCHECK_TESTS  test files to run (default: t/*.t)
#   BUILDCHECK_KEEP=1 keep the temporary build directory
#   BUILDCHECK_JOBS   prove -j value (default 2)
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PERL=${PERL:-perl}
KIND=${1:-}
case "$KIND" in
    clang)
        command -v clang >/dev/null 2>&1 || { echo "buildcheck: clang is not installed" >&2; exit 1; }
        set -- CC=clang ;;
    portable) set -- FF_PORTABLE=1 ;;
    *) echo "usage: $0 clang|portable" >&2; exit 2 ;;
esac

. "$ROOT/xt/tools/workdir.sh"
work_dir "$KIND" buildcheck "${BUILDCHECK_KEEP:-0}"

# the distribution's files: what a CPAN tester unpacks
(cd "$ROOT" && sed -e 's/[[:space:]].*//' -e '/^$/d' MANIFEST | tar -cf - -T -) \
    | (cd "$WORK" && tar -xf -) || { echo "buildcheck: copying the sources failed" >&2; exit 1; }

cd "$WORK" || exit 1
echo "buildcheck: $KIND build in $WORK ($PERL Makefile.PL $*)"
if ! "$PERL" Makefile.PL "$@" >build.log 2>&1 || ! make >>build.log 2>&1; then
    cat build.log >&2
    echo "buildcheck: $KIND build failed" >&2
    exit 1
fi
# a compiler diagnostic fails the check: the build must be clean, not just work
if grep -E 'warning:|error:' build.log >&2; then
    echo "buildcheck: $KIND build has compiler diagnostics (above)" >&2
    exit 1
fi
# prove the build is the one asked for before trusting a clean run
case "$KIND" in
    clang) check='grep -q "^CC = clang" Makefile' ;;
    portable) check="$PERL -Mblib -MFastFile -e 'exit !FastFile::_build_info()->{portable}'" ;;
esac
if ! eval "$check"; then
    echo "buildcheck: the build is not a $KIND build" >&2
    exit 1
fi

TESTS=${BUILDCHECK_TESTS:-$(ls t/*.t)}
if "$PERL" -MApp::Prove -e 'my $p = App::Prove->new; $p->process_args(@ARGV); exit($p->run ? 0 : 1)' \
        -- -b -j"${BUILDCHECK_JOBS:-2}" $TESTS; then
    echo "buildcheck: $KIND: clean build, tests passed"
    exit 0
fi
echo "buildcheck: $KIND: FAILED" >&2
exit 1
