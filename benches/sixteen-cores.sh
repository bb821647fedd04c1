#!/bin/sh
# Issue 4's run on a machine with more cores, lent by the `device` tool (16
# cores beside a GPU, no Rust toolchain, no registry): the binaries are built
# here and carried there.
#
#   benches/sixteen-cores.sh build      here: release binaries into .devbin/
#                                        (ignored, as is ./sixteen-out)
#   benches/sixteen-cores.sh showdown   there: the --full showdown, --scale auto
#   benches/sixteen-cores.sh tests      there: the torture scaled to the cores,
#                                        and the lock tests, in both builds
#   benches/sixteen-cores.sh variant NAME [FEATURES]
#                                        here: the working tree's showdown as
#                                        .devbin/variants/showdown-NAME
#   benches/sixteen-cores.sh variants   there: quick showdown tables of every
#                                        .devbin/variants/showdown-NAME, interleaved
#
# `variants` compares builds of the lock (features, or a change under test
# built here and copied to .devbin/variants/showdown-NAME): each round runs
# every build once on the tables whose titles contain ONLY (default
# "read-heavy"), with PEERS (default tokio) beside hybrid-sync in the same
# process as the reference, for ROUNDS rounds or until VARIANT_SECS (150) have
# passed. A build named `stats` (built with --features stats) gets --stats.
#
# There, the results go to $OUT (the device tool's folder that comes back),
# or to ./sixteen-out elsewhere. Each part ends well inside the tool's
# 10-minute command: on the 16-core machine (2026-12-04) showdown took 7.7
# minutes, tests 1.7, and six rounds of variants of seven builds 1.6. Where
# the session's device time is short (15 minutes, the machine's start
# included), SHOWDOWN_SECS (570), TORTURE_SECS (30) and ROUNDS (10 for tests,
# 6 for variants) cut them down.
set -eu
out=${OUT:-./sixteen-out}
tests="differential lock_api lockref locks torture"

case "${1:-}" in
build)
    mkdir -p .devbin
    cargo build --release --example showdown
    cp target/release/examples/showdown .devbin/
    # The test binaries' paths, from cargo's own report of them.
    for build in default fair; do
        if [ $build = fair ]; then dir=target/fair features=fair,lock_api; else dir=target features=lock_api; fi
        CARGO_TARGET_DIR=$dir cargo test --release --no-run --features $features \
            $(for t in $tests; do printf -- '--test %s ' "$t"; done) 2>&1 |
            sed -n 's/^ *Executable tests\/\([a-z_]*\)\.rs (\(.*\))$/\1 \2/p' |
            while read -r name path; do
                if [ $build = fair ]; then cp "$path" ".devbin/$name-fair"; else cp "$path" ".devbin/$name"; fi
            done
    done
    ls -l .devbin
    ;;
variant)
    name=${2:?usage: benches/sixteen-cores.sh variant NAME [FEATURES]}
    mkdir -p .devbin/variants
    CARGO_TARGET_DIR=target/variant cargo build --release --example showdown ${3:+--features "$3"}
    cp target/variant/release/examples/showdown ".devbin/variants/showdown-$name"
    ls -l .devbin/variants
    ;;
showdown)
    mkdir -p "$out"
    # The text comes back as far as it got; the JSON is rewritten after every
    # table, so a run stopped by the limit keeps the tables it finished.
    { nproc; grep -m1 'model name' /proc/cpuinfo; } > "$out/machine.txt"
    status=0
    timeout "${SHOWDOWN_SECS:-570}" ./.devbin/showdown --full --scale auto --json "$out/showdown.json" --svg /tmp/svg \
        2>/dev/null > "$out/out.txt" || status=$?
    tar czf "$out/svg.tgz" -C /tmp svg 2>/dev/null || true
    cat "$out/out.txt"
    exit $status
    ;;
tests)
    mkdir -p "$out"
    # 4x the torture's users: 16 threads and 8 workers for the RwLock and
    # for LockRef each, run side by side with 64 threads and 256 tasks on
    # one Mutex: 48 threads on 16 cores and more.
    status=0
    for build in "" -fair; do
        echo "== torture$build, ${TORTURE_SECS:-30} s, scale 4"
        HYBRID_SYNC_TORTURE_SECS=${TORTURE_SECS:-30} HYBRID_SYNC_TORTURE_SCALE=4 ./.devbin/torture$build --nocapture \
            > "$out/torture$build.txt" 2>&1 || status=1
        grep -E 'torture|^(Reads|Writes)|test result|panicked' "$out/torture$build.txt" || true
    done
    for build in "" -fair; do
        for t in differential lock_api lockref locks; do
            passed=0
            for round in $(seq "${ROUNDS:-10}"); do
                if ./.devbin/$t$build > "$out/last.txt" 2>&1; then
                    passed=$((passed + 1))
                else
                    status=1
                    { echo "== $t$build, round $round"; cat "$out/last.txt"; } >> "$out/failures.txt"
                    grep -E 'panicked|FAILED|failed' "$out/last.txt" | head -5
                fi
            done
            echo "$t$build: $passed of ${ROUNDS:-10} rounds passed ($(grep 'test result' "$out/last.txt"))"
        done
    done
    rm -f "$out/last.txt"
    exit $status
    ;;
variants)
    mkdir -p "$out"
    start=$(date +%s)
    log="$out/variants.txt"
    { nproc; grep -m1 'model name' /proc/cpuinfo; } > "$log"
    for round in $(seq "${ROUNDS:-6}"); do
        for bin in .devbin/variants/showdown-*; do
            [ -e "$bin" ] || { echo "no builds in .devbin/variants (see: variant NAME)" >> "$log"; break 2; }
            [ $(($(date +%s) - start)) -gt "${VARIANT_SECS:-150}" ] && break 2
            name=${bin##*/showdown-}
            flags=""
            peers="hybrid-sync,${PEERS:-tokio}"
            if [ "$name" = stats ]; then flags=--stats; peers=hybrid-sync; fi
            echo "== $name, round $round, $(($(date +%s) - start)) s" >> "$log"
            # The progress line and the counters go to stderr, with escapes.
            timeout 60 "$bin" --only "${ONLY:-read-heavy}" --scale auto --peers "$peers" $flags 2>&1 |
                tr '\r' '\n' | sed 's/\x1b\[2K//' | grep -a -E '^(==|hybrid|tokio|async-lock|parking|std)|events|the lock' >> "$log" || true
        done
    done
    cat "$log"
    ;;
*)
    echo "usage: benches/sixteen-cores.sh build|showdown|tests|variant NAME [FEATURES]|variants" >&2
    exit 2
    ;;
esac
