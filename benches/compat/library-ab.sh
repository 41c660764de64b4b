#!/bin/sh
# Compares this commit's library with another commit's under *this* commit's
# report harness: builds sync-bench from HEAD's tree with REV's `crates/`
# in place of HEAD's, then runs HEAD's sync-bench against it with `--ab`.
# `cargo xtask report --compare REV` builds REV's own harness instead, so a
# workload whose harness changed between the two is compared across that
# change; this script compares the libraries alone.
#
# Where REV's API differs from what HEAD's benches call (the renames of the
# one-family redesign), `benches/compat/PREFIX.patch` (PREFIX: a prefix of
# REV's commit hash) adapts the benches to REV's names, and stubs what REV
# lacks; rows whose implementation REV lacks are left out of its report,
# so `--ab` does not compare them.
#
# Usage: benches/compat/library-ab.sh REV [sync-bench options: --rounds N,
# --recheck N, --only PREFIX, ...]. Results: target/compare/lib-SHA/compare.md
# (under CARGO_TARGET_DIR if set).
set -eu
rev=${1:?usage: benches/compat/library-ab.sh REV [sync-bench options]}
shift
root=$(git rev-parse --show-toplevel)
# Both builds must run the same harness: the old one is built from HEAD's
# committed benches, the new one from the working tree.
if ! git -C "$root" diff --quiet HEAD -- benches; then
    echo "benches/ differs from HEAD: commit it first, so that both builds run the same harness" >&2
    exit 1
fi
sha=$(git -C "$root" rev-parse --verify "$rev^{commit}")
short=$(printf '%s' "$sha" | cut -c1-10)
base=${CARGO_TARGET_DIR:-$root/target}/compare
dir=$base/lib-$short
src=$dir/src
rm -rf "$src"
mkdir -p "$src"
# `-m`: files get the time of extraction (see xtask/src/compare.rs).
git -C "$root" archive HEAD | tar -x -m -C "$src"
rm -rf "$src/crates"
git -C "$root" archive "$sha" crates | tar -x -m -C "$src"
for p in "$root"/benches/compat/*.patch; do
    [ -e "$p" ] || continue
    case $sha in
    "$(basename "$p" .patch)"*)
        echo "adapting the benches to $rev's API with $p"
        patch -s -p1 -d "$src" < "$p"
        ;;
    esac
done
echo "building HEAD's sync-bench over $rev's library in $src"
(cd "$src" && CARGO_TARGET_DIR=$base/target cargo build --release -q -p sync-bench --bin sync-bench)
cp "$base/target/release/sync-bench" "$dir/sync-bench"
cd "$root"
cargo build --release -q -p sync-bench --bin sync-bench
exec "${CARGO_TARGET_DIR:-$root/target}/release/sync-bench" --ab "$dir/sync-bench" --out "$dir" "$@"
