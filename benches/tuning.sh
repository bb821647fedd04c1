#!/usr/bin/env bash
# One table of what each tuning feature does: the showdown's contended
# workloads for hybrid-sync alone, built once per feature set, every build
# run in turn (interleaved over ROUNDS rounds; the table shows the median).
#
#   benches/tuning.sh                      # default, fair, no-spin, handoff-250us, handoff-4ms
#   BUILDS="default fair" ROUNDS=3 benches/tuning.sh
#
# Cells are ops/s (M = million) and the maximum wait of the run; the seed
# 002 column is the slow thread's maximum wait, the figure the handoff
# timeout bounds.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILDS="${BUILDS:-default fair no-spin handoff-250us handoff-4ms}"
ROUNDS="${ROUNDS:-1}"
# Table titles (substrings) of the showdown, and their column names.
WORKLOADS=("async write-heavy" "async read-heavy" "threads: 32 threads" "mixed:" "hold across .await:" "hold across .await (90% reads)" "seed 002: fairness, 4 tight")
COLUMNS=("async write" "async read" "32 threads" "mixed" "hold/.await" "hold, 90% reads" "seed 002")
only="$(IFS=,; echo "${WORKLOADS[*]}")"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

for build in $BUILDS; do
    features=""
    [[ $build != default ]] && features="$build"
    echo "building showdown ($build)..." >&2
    CARGO_TARGET_DIR="target/tuning-$build" cargo build --quiet --release --example showdown --features "$features"
done

for round in $(seq "$ROUNDS"); do
    for build in $BUILDS; do
        echo "round $round: $build" >&2
        "target/tuning-$build/release/examples/showdown" --only "$only" --peers hybrid-sync \
            --json "$out/$build-$round.json" >/dev/null 2>&1
    done
done

# value and max wait of hybrid-sync in the table whose title contains $2,
# from JSON file $1 (one row per line, as examples/common/report.rs writes).
cell() {
    awk -v want="$2" '
        /"title":/ { hit = index($0, want) > 0 }
        hit && /"name": "hybrid-sync"/ {
            match($0, /"value": [0-9.]+/); v = substr($0, RSTART + 9, RLENGTH - 9)
            m = "null"; if (match($0, /"max_ns": [0-9.]+/)) m = substr($0, RSTART + 10, RLENGTH - 10)
            print v, m; exit
        }' "$1"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

fmt() {
    awk -v v="$1" -v m="$2" 'BEGIN {
        s = v >= 1e6 ? sprintf("%.2f M", v / 1e6) : sprintf("%.0f k", v / 1e3)
        if (m == "" || m == "null") w = "-"
        else if (m >= 1e6) w = sprintf("%.1f ms", m / 1e6)
        else w = sprintf("%.0f us", m / 1e3)
        printf "%s (%s)", s, w
    }'
}

echo
echo "hybrid-sync per tuning feature: ops/s (max wait), median of $ROUNDS round(s)"
printf '%-15s' build
for c in "${COLUMNS[@]}"; do printf ' %-22s' "$c"; done
echo
for build in $BUILDS; do
    printf '%-15s' "$build"
    for i in "${!WORKLOADS[@]}"; do
        vals=""; maxes=""
        for round in $(seq "$ROUNDS"); do
            read -r v m < <(cell "$out/$build-$round.json" "${WORKLOADS[$i]}" || true)
            [[ -n "${v:-}" ]] && vals+="$v"$'\n' && maxes+="$m"$'\n'
        done
        if [[ -z "$vals" ]]; then printf ' %-22s' "-"; continue; fi
        printf ' %-22s' "$(fmt "$(median <<<"$vals")" "$(median <<<"$maxes")")"
    done
    echo
done
