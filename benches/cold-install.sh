#!/bin/sh
# Cold install benchmarks of issue "Fast at any size": the README's install
# command, literally, from a fresh clone with an empty target directory;
# prints its wall and CPU seconds, the installed binary's size, and whether
# `kaji demo` then completes.
#
#   benches/cold-install.sh [REV]          one install of REV (default HEAD)
#   benches/cold-install.sh REV_A REV_B    both at once, side by side
#
# This machine's speed drifts by up to a quarter within an hour (host
# contention), so two revisions compare only when installed side by side:
# then both see the same machine and their CPU seconds compare (the wall
# times do not: each has half the cores). Uses the registry already in
# $CARGO_HOME (downloads are not timed). Works under $BENCH_DIR (default
# /tmp/kaji-cold-install); nothing is written to the repository.
set -eu
REPO=$(git rev-parse --show-toplevel)
BENCH_DIR=${BENCH_DIR:-/tmp/kaji-cold-install}
[ $# -le 2 ] || { echo "usage: $0 [REV] | REV_A REV_B" >&2; exit 2; }
mkdir -p "$BENCH_DIR"

# install REV: clones REV and installs it; prints one line when done.
install() {
    rev=$1
    commit=$(git -C "$REPO" rev-parse --short "$rev^{commit}" 2> /dev/null) || { echo "not a revision: $rev" >&2; exit 2; }
    dir=$BENCH_DIR/clone-$commit root=$BENCH_DIR/root-$commit
    rm -rf "$dir" "$root"
    git clone -q "$REPO" "$dir" && git -C "$dir" checkout -q "$commit"
    (cd "$dir" && env -u CARGO_TARGET_DIR /usr/bin/time -f '%e %U %S' -o "$BENCH_DIR/time-$commit" \
        cargo install --locked --path crates/kaji-cli --root "$root" > "$BENCH_DIR/log-$commit" 2>&1) || {
        echo "$commit: the install failed; see $BENCH_DIR/log-$commit" >&2; exit 1; }
    demo=failed
    (cd "$BENCH_DIR" && "$root/bin/kaji" demo > "$BENCH_DIR/demo-$commit" 2>&1) && demo=completes
    awk -v c="$commit" -v size="$(stat -c %s "$root/bin/kaji")" -v demo="$demo" \
        '{ printf "%s: %.0f s wall, %.0f CPU-s (user %.0f + sys %.0f), binary %.1f MB, kaji demo %s\n", c, $1, $2 + $3, $2, $3, size / 1e6, demo }' \
        "$BENCH_DIR/time-$commit"
    rm -rf "$dir"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
if [ $# -le 1 ]; then
    install "${1:-HEAD}"
else
    install "$1" & a=$!
    install "$2" & b=$!
    wait $a; wait $b
fi
