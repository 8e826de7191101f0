#!/bin/sh
# xt/tools/fuse-asuser.sh - the FUSE test files as a normal user (default
# nobody; FASTFILE_TEST_USER=name for another) where fusermount cannot
# unmount: a private mount namespace whose /dev/fuse is a node of its own,
# mode 0666 (as on a Debian host), and whose /etc is a copy without mtab (a
# debootstrap, sbuild or pbuilder root), as t/69-fuse-unmount.t builds one.
# Run as root (CI's step 'FUSE as a user, no /etc/mtab'). It fails when a
# test fails, when a mount is left below the run's directory, or when the
# user's TMPDIR keeps anything.
#   FASTFILE_FUSE_TESTS="t/69-fuse-unmount.t ..."   the files to run
#   FASTFILE_FUSERMOUNT3=path   fuse3's fusermount3 (from `apt-get download
#       fuse3; dpkg-deb -x`), set-uid root in the namespace's /usr/local/bin:
#       the same check with FUSE 3's mounter, without installing fuse3 (which
#       would remove fuse, as on a Proxmox VE host)
#   FASTFILE_FUSE_MTAB=keep   /etc keeps its mtab (a normal machine: the
#       FUSE tests mount and run)
set -eu
cd "$(dirname "$0")/../.."
user=${FASTFILE_TEST_USER:-nobody}
[ "$(id -u)" = 0 ] || { echo "fuse-asuser: run as root (it becomes $user)" >&2; exit 2; }
[ -e /dev/fuse ] || { echo "fuse-asuser: no /dev/fuse: nothing to check"; exit 0; }
tests=${FASTFILE_FUSE_TESTS:-$(grep -l FastFS t/*.t | tr '\n' ' ')}

top=$(mktemp -d "${TMPDIR:-/tmp}/ff-fuseuser-XXXXXX")
trap 'rm -rf "$top"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$top/src" "$top/home" "$top/tmp" "$top/dev"
perl -MExtUtils::Manifest=maniread,manicopy -e 'manicopy(maniread(), $ARGV[0])' "$top/src" >/dev/null
fm3=${FASTFILE_FUSERMOUNT3:-}
if [ -n "$fm3" ]; then
    mkdir "$top/bin" && cp -a /usr/local/bin/. "$top/bin/" && cp "$fm3" "$top/bin/fusermount3"
    chown root:root "$top/bin/fusermount3" && chmod 4755 "$top/bin/fusermount3"
fi
chown -R "$user" "$top/src" "$top/home" "$top/tmp"
chmod 0755 "$top"

rdev=$(stat -c '%t %T' /dev/fuse)
status=0
# in the namespace: the node, /etc without mtab, the tests as the user, then
# the mounts still below $top (what the user could not remove)
unshare -m --propagation private sh -eu -c '
    top=$1 user=$2 maj=$((0x$3)) min=$((0x$4)) tests=$5 fm3=$6 mtab=$7
    mount -t tmpfs -o mode=0755,size=64k ff-fuseuser-dev "$top/dev"
    mknod -m 0666 "$top/dev/fuse" c "$maj" "$min"
    mount --bind "$top/dev/fuse" /dev/fuse
    if [ "$mtab" != keep ]; then
        mkdir "$top/etc" && cp -a /etc/. "$top/etc/" && rm -f "$top/etc/mtab"
        mount --bind "$top/etc" /etc
        [ ! -e /etc/mtab ] || { echo "fuse-asuser: /etc/mtab still there" >&2; exit 1; }
    fi
    [ -z "$fm3" ] || mount --bind "$top/bin" /usr/local/bin
    echo "fuse-asuser: $user, /etc/mtab: $([ -e /etc/mtab ] && echo there || echo none), mounter: $(command -v fusermount3 || command -v fusermount)"
    rc=0
    setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$top/home" TMPDIR="$top/tmp" LANG=C.UTF-8 \
        sh -c "cd \"\$1\" && id && perl Makefile.PL >/dev/null && make >/dev/null && prove -b $tests" sh "$top/src" || rc=$?
    left=$(awk -v p="$top/" "index(\$2, p) == 1 && \$2 != p \"dev\" && \$2 != p \"etc\" && \$2 != p \"bin\" { print \$2 }" /proc/self/mounts)
    if [ -n "$left" ]; then
        echo "fuse-asuser: mounts left behind:" $left >&2
        for m in $left; do umount -l "$m"; done
        rc=1
    fi
    exit $rc
' sh "$top" "$user" $rdev "$tests" "$fm3" "${FASTFILE_FUSE_MTAB:-}" || status=$?

left=$(ls -A "$top/tmp" | head -20)
if [ -n "$left" ]; then
    echo "fuse-asuser: the tests left in their TMPDIR:" $left >&2
    status=1
fi
exit $status
