#!/usr/bin/env bash
# Instructions per operation, counted by callgrind (valgrind), for the loops
# of benches/instructions.rs: the uncontended paths and a one-thread
# hand-over of a lock held across a yield, hybrid-sync (default and `fair`
# builds) beside its peers. A count repeats from run to run (to within an
# instruction), so it reads a change to the lock's code on a host too noisy
# for a timing to (an A/B is two checkouts, one table each). It is not a time: an atomic
# read-modify-write counts as one instruction and costs ten to twenty
# times a plain one, and a cache miss counts nothing.
#
#   benches/instructions.sh                    # every case; about 2 minutes
#   CASES="hand-over" BUILDS=fair benches/instructions.sh
#
# Each case runs for N and 2N operations; the difference divided by N is
# the count per operation, without the program's start and the runtime's.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
BUILDS="${BUILDS:-default fair}"
CASES="${CASES:-uncontended-read uncontended-write uncontended-lock hand-over}"
N="${N:-50000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

declare -A bin
for build in $BUILDS; do
    features=""
    [[ $build != default ]] && features="$build"
    echo "building benches/instructions.rs ($build)..." >&2
    bin[$build]="$(CARGO_TARGET_DIR="target/instructions-$build" cargo build --quiet --release \
        --bench instructions --features "$features" --message-format=json \
        | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)"
done

# Instructions of `$1 <case> <peer> <n>` under callgrind.
count() {
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$@" 2>&1 >/dev/null \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

per_op() {
    local one two
    one="$(count "$@" "$N")"
    two="$(count "$@" $((2 * N)))"
    echo $(((two - one + N / 2) / N))
}

printf '%-18s %-22s %s\n' case contender "instructions/op"
for case in $CASES; do
    for build in $BUILDS; do
        printf '%-18s %-22s %6d\n' "$case" "hybrid-sync ($build)" "$(per_op "${bin[$build]}" "$case" hybrid-sync)"
    done
    first="${bin[${BUILDS%% *}]}"
    case $case in
        hand-over) peers="tokio async-lock" ;;
        *) peers="tokio async-lock hybrid-blocking parking_lot parking_lot-0.12 std" ;;
    esac
    for peer in $peers; do
        printf '%-18s %-22s %6d\n' "$case" "$peer" "$(per_op "$first" "$case" "$peer")"
    done
done
