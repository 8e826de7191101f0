#!/bin/sh
# xt/tools/debcheck.sh - the Debian package works (run by `make deb-check` and
# .ci/run, as root): `make deb` (its build runs the test suite), lintian
# without errors, the file list, then install it, load the module from the
# system paths, read its man page, run debian/tests/smoke, and remove it again.
# Refuses to run where libfastfile-perl is already installed (it would replace
# and then remove that package), and where perl finds another copy of FastFile
# (make install, cpanm: /usr/local, PERL5LIB), naming it: that copy would
# shadow the package's.
#
# Environment:
#   PERL   the perl whose Makefile drives `make deb` (default: perl); the
#          package itself is always built for Debian's /usr/bin/perl
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PERL=${PERL:-perl}
fail() { echo "debcheck: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i / dpkg -r)"
for t in dpkg-buildpackage dh lintian man; do
    command -v $t >/dev/null 2>&1 || fail "$t not installed (Debian: dpkg-dev debhelper lintian man-db)"
done
if dpkg-query -W -f '${Status}' libfastfile-perl 2>/dev/null | grep -q 'ok installed'; then
    fail "libfastfile-perl is installed already: not touching it"
fi
# a copy from `make install` or `cpanm .` (in /usr/local) or in PERL5LIB comes
# first in perl's @INC: the installed package would never be loaded
shadows=$(cd / && perl -e 'for (@INC) { print "$_/FastFile.pm\n" if !ref && -e "$_/FastFile.pm" }')
if [ -n "$shadows" ]; then
    fail "FastFile is installed outside the package, and perl would load it instead of the .deb's:
$shadows
remove it first: cpanm --uninstall FastFile (for a PERL5LIB copy: cpanm --uninstall -l <its local lib> FastFile, or unset PERL5LIB)"
fi

# dpkg, waiting (up to 5 minutes) while another apt or dpkg holds its lock
dpkg_waiting() {
    tries=0
    while ! dpkg "$@" >"$LOG" 2>&1; do
        grep -q 'lock' "$LOG" && [ $tries -lt 150 ] || return 1
        tries=$((tries + 1))
        sleep 2
    done
}

cd "$ROOT" || exit 1
# Everything it makes outside the tree goes in $WORK (lintian's temp files
# too: it left /tmp/mldbm-elf-*), removed however the check ends, and a
# package it installed is removed again (a signal between dpkg -i and -r
# left it installed): exit on a signal runs the EXIT trap
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastfile-deb.XXXXXX") || exit 1
LOG=$WORK/log
installed=0
cleanup() {
    [ "$installed" = 0 ] || dpkg -r libfastfile-perl >/dev/null 2>&1 || echo "debcheck: dpkg -r libfastfile-perl failed" >&2
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
{ $PERL Makefile.PL && make deb; } >"$LOG" 2>&1 || { cat "$LOG" >&2; fail "make deb failed"; }
grep -E '^(Files=|Result|t/.* skipped)' "$LOG"
DEB=$(ls deb-build/libfastfile-perl_*.deb) || fail "no .deb in deb-build/"
echo "debcheck: built $DEB"

echo "debcheck: lintian (no errors allowed):"
TMPDIR=$WORK lintian --fail-on error deb-build/*.changes >"$LOG" 2>&1
lintian_status=$?
grep -v '^running with root privileges' "$LOG"
[ $lintian_status = 0 ] || fail "lintian reports errors"

echo "debcheck: dpkg -c $DEB:"
dpkg -c "$DEB"

installed=1
dpkg_waiting -i "$DEB" || { cat "$LOG" >&2; fail "dpkg -i failed"; }
status=0
# from /, so no blib/ or lib/ of this tree can be used
(cd / && perl -MFastFile=:all -e '
    die "loaded $INC{q{FastFile.pm}}\n" unless $INC{"FastFile.pm"} =~ m{^/usr/lib/};
    print "debcheck: loads FastFile $FastFile::VERSION from $INC{q{FastFile.pm}}\n"') || status=1
man -P cat 3pm FastFile 2>/dev/null | grep -q 'file_set_contents' \
    && echo "debcheck: man 3pm FastFile works" || { echo "debcheck: man 3pm FastFile fails" >&2; status=1; }
(AUTOPKGTEST_TMP=$(mktemp -d "$WORK/smoke.XXXXXX") && export AUTOPKGTEST_TMP && sh debian/tests/smoke) || status=1
dpkg_waiting -r libfastfile-perl || { cat "$LOG" >&2; fail "dpkg -r failed"; }
installed=0
[ $status = 0 ] || fail "the installed package does not work"
echo "debcheck: ok (package removed again)"
