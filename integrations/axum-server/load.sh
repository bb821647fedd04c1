#!/usr/bin/env bash
# Drives the axum server with wrk, once per lock, interleaved and repeated:
#
#   integrations/axum-server/load.sh            # 3 rounds x 3 mixes x 4 locks, 5 s each
#   DURATION=10 ROUNDS=5 LOCKS="hybrid tokio" integrations/axum-server/load.sh
#   FEATURES=fair MIXES=write-heavy integrations/axum-server/load.sh   # a hybrid-sync tuning
#   FEATURES=stats ...   # also prints hybrid-sync's lock statistics after each run
#
# Each run starts a fresh server on 127.0.0.1 (the only host it ever
# targets), lets wrk's readers run at a fixed connection count while a
# second wrk sends writes at a fixed offered rate (its delay() hook), then
# stops the server. It prints one line per run and, at the end, the median
# of the rounds per mix and lock. Everything stops by itself: every wrk and
# the server run under `timeout`, and an exit trap kills what is left.
#
# Mixes:
#   read-mostly  readers GET /item/k;                       writers POST /transfer at WRITE_RATE/s
#   write-heavy  readers 50% GET /item/k, 50% POST /transfer; writers POST /transfer at WRITE_RATE/s
#   store        readers GET /item/k;                       writers POST /store at STORE_RATE/s,
#                each holding the write guard across a STORE_US async call
#                (parking_lot is skipped: its guard cannot be held across .await)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
CONNECTIONS="${CONNECTIONS:-32}"
WRITE_RATE="${WRITE_RATE:-500}"
STORE_RATE="${STORE_RATE:-200}"
STORE_US="${STORE_US:-1000}"
WORKERS="${WORKERS:-2}"
PORT="${PORT:-39391}"
LOCKS="${LOCKS:-hybrid tokio parking_lot arc-swap}"
FEATURES="${FEATURES:-}"
MIXES="${MIXES:-read-mostly write-heavy store}"
WRITER_CONNECTIONS=4
host=127.0.0.1

command -v wrk >/dev/null || { echo "load.sh needs wrk (apt-get install wrk)" >&2; exit 1; }
echo "building the server (release)..." >&2
target_dir="$root/target"
[[ -n "$FEATURES" ]] && target_dir="$root/target/load-${FEATURES//[ ,]/-}"
CARGO_TARGET_DIR="$target_dir" cargo build --quiet --release --manifest-path "$root/Cargo.toml" \
    -p hybrid-sync-axum-server --features "$FEATURES"
server_bin="$target_dir/release/hybrid-sync-axum-server"

server_pid=""
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

start_server() {
    timeout $((DURATION * 4 + 30)) "$server_bin" --lock "$1" --addr "$host:$PORT" \
        --workers "$WORKERS" --store-us "$STORE_US" >/dev/null &
    server_pid=$!
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/$host/$PORT") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "the server ($1) did not start listening on $host:$PORT" >&2
    exit 1
}

stop_server() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# wrk_result SCRIPT CONNECTIONS [-- ARGS...]: prints the RESULT fields.
wrk_result() {
    local script=$1 conns=$2; shift 2
    WRK_DIR="$here/wrk" timeout $((DURATION + 15)) wrk -t1 -c"$conns" -d"${DURATION}s" \
        -s "$here/wrk/$script" "http://$host:$PORT" "$@" | awk '/^RESULT/ { $1 = ""; print }'
}

results="$(mktemp)"
# (The writers' own latency is not reported: wrk measures it from its delay
# timer, which pins it near a few milliseconds whatever the server does.)
printf '%-12s %-12s %5s %10s %9s %9s %9s %7s %11s\n' \
    mix lock round "req/s" "p50 us" "p99 us" "max us" errors "writes/s"
for round in $(seq "$ROUNDS"); do
    for mix in $MIXES; do
        case $mix in
            read-mostly) readers=reads.lua; route=transfer; rate=$WRITE_RATE ;;
            write-heavy) readers=mixed.lua; route=transfer; rate=$WRITE_RATE ;;
            store) readers=reads.lua; route=store; rate=$STORE_RATE ;;
            *) echo "unknown mix $mix" >&2; exit 1 ;;
        esac
        for lock in $LOCKS; do
            [[ $mix == store && $lock == parking_lot ]] && continue
            start_server "$lock"
            wfile="$(mktemp)"
            wrk_result writers.lua "$WRITER_CONNECTIONS" -- "$route" "$rate" "$WRITER_CONNECTIONS" >"$wfile" &
            wpid=$!
            read -r _ rps p50 p99 max err non2xx < <(wrk_result "$readers" "$CONNECTIONS")
            wait "$wpid"
            read -r _ wrps _ _ _ werr wnon2xx <"$wfile"
            rm -f "$wfile"
            state="$(curl -s --max-time 5 "http://$host:$PORT/check" || true)"
            lockstats="$(curl -s --fail --max-time 5 "http://$host:$PORT/lockstats" || true)"
            stop_server
            errors=$((err + non2xx + werr + wnon2xx))
            printf '%-12s %-12s %5s %10s %9s %9s %9s %7s %11s\n' \
                "$mix" "$lock" "$round" "$rps" "$p50" "$p99" "$max" "$errors" "$wrps"
            echo "$mix $lock $rps $p50 $p99 $wrps $errors" >>"$results"
            [[ -n "$lockstats" ]] && echo "    $lock lock: $lockstats"
            read -r sum _ <<<"$state"
            if [[ "${sum:-}" != "$((4096 * 1000))" ]]; then
                echo "inconsistent state after $mix/$lock: /check answered '$state'" >&2
                exit 1
            fi
        done
    done
done

echo
echo "median of $ROUNDS rounds ($DURATION s each, $CONNECTIONS reader connections, $WORKERS server workers, hybrid-sync features: ${FEATURES:-default});"
echo "ratio = req/s over tokio's in the same mix"
printf '%-12s %-12s %10s %7s %9s %9s %11s %7s\n' \
    mix lock "req/s" ratio "p50 us" "p99 us" "writes/s" errors
for mix in $MIXES; do
    tokio_rps=""
    for lock in tokio $LOCKS; do
        line="$(awk -v m="$mix" -v l="$lock" '
            function median(a, n,   i, j, t) {
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            $1 == m && $2 == l { n++; r[n] = $3; p5[n] = $4; p9[n] = $5; w[n] = $6; e += $7 }
            END { if (n) printf "%.0f %.0f %.0f %.0f %d", median(r, n), median(p5, n), median(p9, n), median(w, n), e }
        ' "$results")"
        [[ -z "$line" ]] && continue
        read -r rps p50 p99 wrps errors <<<"$line"
        if [[ $lock == tokio ]]; then
            [[ -n "$tokio_rps" ]] && continue
            tokio_rps=$rps
            [[ " $LOCKS " == *" tokio "* ]] || continue
        fi
        ratio="-"
        [[ -n "$tokio_rps" && "$tokio_rps" != 0 ]] && ratio="$(awk -v a="$rps" -v b="$tokio_rps" 'BEGIN { printf "%.2f", a / b }')"
        printf '%-12s %-12s %10s %7s %9s %9s %11s %7s\n' \
            "$mix" "$lock" "$rps" "$ratio" "$p50" "$p99" "$wrps" "$errors"
    done
done
rm -f "$results"
