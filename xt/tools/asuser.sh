#!/bin/sh
# xt/tools/asuser.sh - the README's test command as an unprivileged user
# (default nobody; FASTFILE_TEST_USER=name for another), run as root by
# .ci/run: a copy of the distribution's files (MANIFEST) in a directory that
# user owns, HOME and TMPDIR in it too, and the environment of a plain login
# (no FASTFILE_REQUIRE_FUSE: /dev/fuse is root's, the FUSE tests skip and say
# why). It fails when the suite fails or leaves anything in its TMPDIR or in
# /dev/shm.
#   FASTFILE_TEST_ENV="RELEASE_TESTING=1"   extra environment for the run
set -eu
cd "$(dirname "$0")/../.."
user=${FASTFILE_TEST_USER:-nobody}
[ "$(id -u)" = 0 ] || { echo "asuser: run as root (it becomes $user)" >&2; exit 2; }

top=$(mktemp -d "${TMPDIR:-/tmp}/ff-asuser-XXXXXX")
trap 'rm -rf "$top"' EXIT
mkdir "$top/src" "$top/home" "$top/tmp"
perl -MExtUtils::Manifest=maniread,manicopy -e 'manicopy(maniread(), $ARGV[0])' "$top/src"
chown -R "$user" "$top"
chmod 0755 "$top"

ls -A /dev/shm | sort >"$top/shm.before"
status=0
# setpriv drops root's groups and capabilities (runuser would need a login
# shell for the user); env -i: nothing of root's environment leaks in
setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$top/home" TMPDIR="$top/tmp" LANG=C.UTF-8 \
        ${FASTFILE_TEST_ENV:-} \
    sh -c 'cd "$1" && id && perl Makefile.PL && make && make test' sh "$top/src" || status=$?

left=$(ls -A "$top/tmp" | head -20)
if [ -n "$left" ]; then
    echo "asuser: the suite left in its TMPDIR:" $left >&2
    status=1
fi
new_shm=$(ls -A /dev/shm | sort | comm -13 "$top/shm.before" -)
if [ -n "$new_shm" ]; then
    echo "asuser: the suite left in /dev/shm:" $new_shm >&2
    status=1
fi
exit $status
