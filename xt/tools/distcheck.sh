#!/bin/sh
# xt/tools/distcheck.sh - the CPAN tarball is complete (run by `make tarball-check`
# and .ci/run): `make dist`, then in a fresh directory unpack it and
# `perl Makefile.PL && make && make test`, with t/70-fuse.t running wherever
# it runs in this tree (its sources and helpers must be in the tarball); its
# CPANTS kwalitee is 100%, extras included (xt/tools/kwalitee.pl, as
# cpants_lint: needs libmodule-cpants-analyse-perl); then
# `cpanm --notest -L <dir>` installs the tarball offline and the installed
# module loads from there.
#
# Environment:
#   PERL             the perl to build with (default: perl)
#   DISTCHECK_KEEP=1 keep the temporary directory
#   DISTCHECK_TESTS  the test files to run from the tarball (default: all;
#                    t/70-fuse.t must be among them where FUSE works here)
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PERL=${PERL:-perl}
fail() { echo "distcheck: $*" >&2; exit 1; }

. "$ROOT/xt/tools/workdir.sh"
work_dir distcheck distcheck "${DISTCHECK_KEEP:-0}"

cd "$ROOT" || exit 1
VERSION=$($PERL -ne "print \$1 if /our \\\$VERSION = '([^']+)'/" lib/FastFile.pm)
[ -n "$VERSION" ] || fail "no \$VERSION in lib/FastFile.pm"
TARBALL="FastFile-$VERSION.tar.gz"

# the tarball, as a release makes it (the Makefile is regenerated first)
rm -f "$TARBALL"
{ $PERL Makefile.PL && make dist; } >"$WORK/dist.log" 2>&1 \
    || { cat "$WORK/dist.log" >&2; fail "make dist failed"; }
grep -E '^(Not in MANIFEST|No such file)' "$WORK/dist.log" >&2
mv "$TARBALL" "$WORK/" || fail "make dist made no $TARBALL"

# whether this tree's FUSE test can run here: then the tarball's must run too
FUSE_WHY=$($PERL -It/lib -MFastFS -e 'print FastFS::available()' 2>&1)

cd "$WORK" || exit 1
tar -xzf "$TARBALL" || fail "cannot unpack $TARBALL"
echo "distcheck: $TARBALL, $(tar -tzf "$TARBALL" | grep -vc '/$') files"
for f in t/fusefs/fastfs.c t/fusefs/Makefile t/blockrec/blockrec.c t/blockrec/Makefile \
         t/lib/FastFS.pm t/lib/FFTest.pm debian/control debian/rules; do
    [ -f "FastFile-$VERSION/$f" ] || fail "$TARBALL lacks $f"
done
$PERL "$ROOT/xt/tools/kwalitee.pl" "$TARBALL" || fail "$TARBALL: kwalitee below 100% (the failing indicators are above)"

bad=$(tar -tzf "$TARBALL" | grep -E '/(blib|\.git)/|\.o$|/Makefile$|/MYMETA\.|/t/(fusefs/fastfs|blockrec/blockrec)$' \
      | grep -vE '/t/(fusefs|blockrec)/Makefile$')
[ -z "$bad" ] || fail "$TARBALL carries build artefacts: $bad"

cd "FastFile-$VERSION" || exit 1
{ $PERL Makefile.PL && make; } >build.log 2>&1 || { cat build.log >&2; fail "build of the unpacked tarball failed"; }
if [ -n "${DISTCHECK_TESTS:-}" ]; then
    make test TEST_FILES="$DISTCHECK_TESTS" >test.log 2>&1
else
    make test >test.log 2>&1
fi
status=$?
grep -E '^(t/|All tests|Files=|Result)' test.log
[ $status -eq 0 ] || { cat test.log >&2; fail "make test of the unpacked tarball failed"; }
if [ -z "$FUSE_WHY" ]; then
    grep -q '^t/70-fuse\.t \.* ok' test.log \
        || fail "t/70-fuse.t did not run from the tarball (it does in $ROOT)"
else
    echo "distcheck: FUSE not usable here ($FUSE_WHY): t/70-fuse.t may skip"
fi

# cpanm, offline (Debian's cpanminus): nothing to fetch, all prerequisites are core
cd "$WORK" || exit 1
CPANM=$(command -v cpanm) || fail "cpanm not installed (Debian: apt-get install cpanminus)"
PERL_CPANM_HOME="$WORK/cpanm-home" $PERL "$CPANM" --notest --quiet -L "$WORK/local" "./$TARBALL" \
    || { cat "$WORK"/cpanm-home/work/*/build.log >&2 2>/dev/null; fail "cpanm could not install $TARBALL"; }
cd / && $PERL -Mlib="$WORK/local/lib/perl5" -MFastFile=:all -e '
    my $f = "$ARGV[0]/cpanm-check";
    file_set_contents($f, "ok\n");
    die "read back differs\n" unless file_get_contents($f) eq "ok\n";
    die "loaded $INC{q{FastFile.pm}}, not the cpanm install\n"
        unless index($INC{"FastFile.pm"}, "$ARGV[0]/local/") == 0;
    print "distcheck: cpanm -L installed FastFile $FastFile::VERSION: $INC{q{FastFile.pm}}\n";
' "$WORK" || fail "the cpanm-installed FastFile does not work"
echo "distcheck: ok"
