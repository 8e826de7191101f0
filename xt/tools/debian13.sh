#!/bin/sh
# xt/tools/debian13.sh - the README's commands in a fresh Debian 13 (trixie,
# the base of Proxmox VE 9) root, as a new user there would run them (issue
# 39), run as root by .ci/run on every CI run (nothing cached: a new root
# each time), and by hand:
#
#   sh xt/tools/debian13.sh [SOURCE_DIR]     (default: this checkout)
#
# 1. debootstrap --variant=minbase trixie into a new directory (a minute);
# 2. as root in it (chroot): the README's first sh block that runs
#    `make test`, literally (its apt-get, the build, the tests, the demo);
# 3. as a normal user there: the same block less its apt-get part (the
#    README: "have root run the apt-get part and run the rest as yourself");
# 4. as root: the README's Debian package block (debhelper, `make deb`,
#    dpkg -i), then the installed module loads from /usr (debian/tests/smoke).
#    The package's build runs without its tests (DEB_BUILD_OPTIONS=nocheck):
#    they are the suite that just ran twice here on the same files, and a
#    third run would cost CI 1.5 to 3 minutes.
# The source is the MANIFEST's files, copied (a CPAN tarball's content).
# The runs are in mount and pid namespaces of their own (unshare): their
# mounts (proc, sys, dev) are never seen from here, and when the runs end,
# however they end (Ctrl-C, CI's kill), every process in them is killed and
# the mounts go with them; the root is removed on exit (rm
# --one-file-system: never below a mount point).
#
# Environment: DEBIAN13_MIRROR (default http://deb.debian.org/debian),
# DEBIAN13_DIR (where the root is made, default /var/tmp: 1 GiB),
# DEBIAN13_SUITE (default trixie).
set -eu

# ---- inside the namespaces: the root, the mounts, then the three runs
if [ "${1:-}" = --inside ]; then
    top=$2 src=$3
    root=$top/root
    t0=$(date +%s)
    debootstrap --variant=minbase "${DEBIAN13_SUITE:-trixie}" "$root" "${DEBIAN13_MIRROR:-http://deb.debian.org/debian}" \
        >"$top/debootstrap.log" 2>&1 || { cat "$top/debootstrap.log" >&2; exit 1; }
    echo "debian13: debootstrap $(cat "$root/etc/debian_version") in $(($(date +%s) - t0)) s"
    chmod 0755 "$root"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    chroot "$root" useradd -m -s /bin/sh fftest
    for home in /root /home/fftest; do
        mkdir -p "$root$home/FastFile"
        (cd "$src" && perl -MExtUtils::Manifest=maniread,manicopy -e 'manicopy(maniread(), $ARGV[0])' "$root$home/FastFile") >/dev/null
    done
    chroot "$root" chown -R fftest: /home/fftest/FastFile

    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --rbind /dev "$root/dev"    # /dev/fuse, /dev/shm, /dev/pts with it
    in_root() { chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
                    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

    # the README's first sh block with `make test` in it, and its Debian
    # package block (the one that installs debhelper)
    block() {
        FIND=$1 perl -ne 'if (/^```sh/) { $in = 1; $b = ""; next }
                          if ($in && /^```/) { $in = 0; if ($b =~ /$ENV{FIND}/) { print $b; exit } next }
                          $b .= $_ if $in && !/^\s*(#|$)/' "$root/root/FastFile/README.md"
    }
    readme=$(block 'make test')
    debblock=$(block 'install -y debhelper')
    [ -n "$readme" ] && [ -n "$debblock" ] || { echo "debian13: README blocks not found" >&2; exit 1; }
    # a normal user's: the apt-get commands are root's
    asuser=$(printf '%s\n' "$readme" | sed -E 's/^(apt-get [^&]*&& )+//')

    # each run is reported, the next runs after a failure: one CI log shows all
    failed=''
    run() {
        what=$1 t=$(date +%s)
        shift
        echo "--- $what"
        if "$@"; then
            echo "--- passed in $(($(date +%s) - t)) s: $what"
        else
            echo "--- FAILED in $(($(date +%s) - t)) s: $what"
            failed="$failed
  $what"
        fi
    }
    printf '%s\n' "$readme"
    run 'as root: the README block' in_root HOME=/root FASTFILE_REQUIRE_FUSE=1 sh -ec "cd /root/FastFile; $readme"
    printf '%s\n' "$asuser"
    run 'as user fftest: the README block less apt-get' in_root setpriv --reuid=fftest --regid=fftest --init-groups \
        env HOME=/home/fftest sh -ec "cd ~/FastFile; id; $asuser"
    printf '%s\n' "$debblock"
    run 'as root: the Debian package block, then debian/tests/smoke' in_root HOME=/root DEB_BUILD_OPTIONS=nocheck \
        sh -ec "cd /root/FastFile; $debblock
                AUTOPKGTEST_TMP=\$(mktemp -d); export AUTOPKGTEST_TMP; sh debian/tests/smoke; rm -rf \"\$AUTOPKGTEST_TMP\""

    # what the runs left in the root's temp dir (/dev/shm is the host's: .ci/run checks it)
    left=$(ls -A "$root/tmp" | head -20)
    [ -z "$left" ] || failed="$failed
  left in /tmp: $left"
    [ -z "$failed" ] || { echo "debian13: failed:$failed" >&2; exit 1; }
    exit 0
fi

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.."
src=$(cd "${1:-.}" && pwd)
[ "$(id -u)" = 0 ] || { echo "debian13: run as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "debian13: apt-get install debootstrap" >&2; exit 2; }

t0=$(date +%s)
top=$(mktemp -d "${DEBIAN13_DIR:-/var/tmp}/ff-debian13-XXXXXX")
chmod 0755 "$top"    # mktemp's 0700 would shut the root's other users out
trap 'rm -rf --one-file-system "$top"' EXIT
trap 'exit 130' INT TERM HUP
unshare --mount --propagation private --pid --kill-child sh "$self" --inside "$top" "$src"
echo "debian13: passed in $(($(date +%s) - t0)) s"
