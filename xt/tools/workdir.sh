# Sourced by the xt/tools scripts (sh): `work_dir NAME LABEL KEEP` sets
# WORK to a new private directory "fastfile-NAME.XXXXXX" in the temp dir,
# removed when the script exits, unless KEEP is 1: then "LABEL: kept WORK"
# is printed instead. An interrupt exits 130, which cleans up the same way.
work_dir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastfile-$1.XXXXXX") || exit 1
    WORK_LABEL=$2
    WORK_KEEP=$3
    trap work_dir_cleanup EXIT
    trap 'exit 130' INT TERM
}

work_dir_cleanup() {
    if [ "$WORK_KEEP" = 1 ]; then
        echo "$WORK_LABEL: kept $WORK"
    else
        rm -rf "$WORK"
    fi
}
