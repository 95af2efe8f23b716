#!/usr/bin/env bash
# Side-by-side check of cairn against Redis and memcached with their own load tools, in one run
# on this machine: server CPU time per operation (from /proc/PID/stat) for redis-benchmark
# GET/SET with 50 clients (unpipelined and pipeline 16), for memcaslap's 90/10 mix with
# 1000-byte values, and RSS per key for 1,000,000 keys of 16 bytes with 32-byte values.
#
#   scripts/compare-peers.sh            (needs target/release/cairn-server: make build)
#
# Ports are loopback only; every server started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
CAIRN=${CAIRN_BIN:-target/release/cairn-server}
N=${N:-300000}
TICK=$(getconf CLK_TCK)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_bytes() { awk '{print $2*4096}' "/proc/$1/statm"; }
wait_port() { for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

start() { # name port cmd... ; sets PID_<name>
    "${@:3}" >/dev/null 2>&1 &
    pids+=($!)
    eval "PID_$1=$!"
    wait_port "$2"
}

RP=$(free_port); CP=$(free_port); CMP=$(free_port); C1P=$(free_port); MP=$(free_port)
start redis "$RP" redis-server --port "$RP" --save '' --appendonly no
start cairn "$CP" "$CAIRN" --port "$CP" --memcache-port "$CMP"
start cairn1 "$C1P" "$CAIRN" --port 0 --memcache-port "$C1P" --threads 1
start memcached "$MP" memcached -p "$MP" -U 0 -t 1 -m 2048 -u "$(id -un)"

per_op_us() { python3 -c "print(f'{$1 * 1e6 / $TICK / $2:.2f}')"; }

echo "== redis-benchmark: 50 clients, $N requests, 100,000 random keys, 32-byte values"
printf '%-8s %-4s %12s %12s %8s\n' test P "cairn us/op" "redis us/op" ratio
for P in 1 16; do
    for t in set get; do
        declare -A us
        for s in cairn redis; do
            port=$CP; pid=$PID_cairn
            [ "$s" = redis ] && { port=$RP; pid=$PID_redis; }
            t0=$(cpu_ticks "$pid")
            redis-benchmark -p "$port" -c 50 -n "$N" -P "$P" -t "$t" -r 100000 -d 32 -q >/dev/null
            t1=$(cpu_ticks "$pid")
            us[$s]=$(per_op_us $((t1 - t0)) "$N")
        done
        printf '%-8s %-4s %12s %12s %8s\n' "$t" "$P" "${us[cairn]}" "${us[redis]}" \
            "$(python3 -c "print(f'{${us[cairn]}/${us[redis]}:.2f}')")"
    done
done

echo "== memcaslap: 90% get / 10% set, 1000-byte values, 50 connections, 8 s"
printf '%-22s %12s %10s\n' server ops "us/op"
for s in memcached:$MP:$PID_memcached cairn-threads-1:$C1P:$PID_cairn1 cairn-threads-default:$CMP:$PID_cairn; do
    IFS=: read -r name port pid <<<"$s"
    t0=$(cpu_ticks "$pid")
    ops=$(timeout 60 memcaslap -s "127.0.0.1:$port" -T 1 -c 50 -t 8s -X 1000 2>&1 | sed -nE 's/^Run time.*Ops: ([0-9]+).*/\1/p')
    t1=$(cpu_ticks "$pid")
    printf '%-22s %12s %10s\n' "$name" "$ops" "$(per_op_us $((t1 - t0)) "$ops")"
done

echo "== memory: 1,000,000 keys of 16 bytes with 32-byte values (RSS growth per key)"
python3 - <<'EOF' >/tmp/cairn-compare-load.resp
import sys
out = sys.stdout.buffer
for i in range(1_000_000):
    out.write(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$32\r\n%s\r\n" % (i, b"v" * 32))
EOF
for s in cairn:$CP:$PID_cairn redis:$RP:$PID_redis; do
    IFS=: read -r name port pid <<<"$s"
    redis-cli -p "$port" flushall >/dev/null
    sleep 0.5
    before=$(rss_bytes "$pid")
    redis-cli -p "$port" --pipe </tmp/cairn-compare-load.resp >/dev/null
    sleep 1
    after=$(rss_bytes "$pid")
    keys=$(redis-cli -p "$port" dbsize)
    echo "$name: keys=$keys rss_total=$after bytes/key(growth)=$(((after - before) / keys)) bytes/key(total)=$((after / keys))"
done
rm -f /tmp/cairn-compare-load.resp
