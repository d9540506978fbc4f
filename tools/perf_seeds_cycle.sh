#!/usr/bin/env bash
# One experiment cycle done the way the seeds did it by hand: the anchor of the
# end-to-end figure of `make perf` (tools/perf_lifecycle.py runs it right after
# the playbook's measured run and reads what it prints).
#
#   pkill the old server -> poll pgrep until it is gone -> start the rendered
#   launch script in the background -> sleep-poll /health until 200 ->
#   bench_serving once per concurrency point.
#
# No warm-up step, no ledger, no checks beyond the above: that is the point of
# an anchor. The server is the one the playbook rendered (<work>/launch/<tier>.sh),
# the client SGLang's own bench_serving, loaded by tools/sglang_bench_client.py
# (plain `python -m sglang.bench_serving` needs torch; see that file's docstring).
#
# The pkill pattern is "<module> .*--port <port>", so only the server on this
# run's port is touched, never other simulators on the machine.
#
# Prints one event per line on stdout, "<event> <epoch seconds> [detail]":
#   begin, stop_sent, stopped, start (just before the launch), pid <pid>,
#   ready (first 200 from /health), point_begin <c>, point_end <c> <rc>, end.
# Exits non-zero when the old server does not go, the new one dies or does not
# get ready in time, or a point's client fails.
set -euo pipefail

usage() {
    cat >&2 <<'EOF'
usage: perf_seeds_cycle.sh --launch SCRIPT --port PORT --log LOG --out DIR
         --python PY --client LOADER --tokenizer PATH --points "C:N C:N ..."
         [--module sglang_sim.launch_server] [--host 127.0.0.1]
         [--dataset-name random] [--dataset-path FILE] [--input-len 32]
         [--output-len 16] [--range-ratio 1.0] [--request-rate inf] [--seed 1]
         [--warmup-requests 1] [--output-details] [--interval 1]
         [--ready-timeout 300] [--stop-timeout 60]
EOF
    exit 2
}

launch="" port="" log="" out="" python="" client="" tokenizer="" points=""
module="sglang_sim.launch_server" host="127.0.0.1"
dataset_name="random" dataset_path="" input_len=32 output_len=16 range_ratio=1.0
request_rate="inf" seed=1 warmup_requests=1 output_details=0
interval=1 ready_timeout=300 stop_timeout=60

while [[ $# -gt 0 ]]; do
    case "$1" in
        --launch) launch="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --log) log="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        --client) client="$2"; shift 2 ;;
        --tokenizer) tokenizer="$2"; shift 2 ;;
        --points) points="$2"; shift 2 ;;
        --module) module="$2"; shift 2 ;;
        --host) host="$2"; shift 2 ;;
        --dataset-name) dataset_name="$2"; shift 2 ;;
        --dataset-path) dataset_path="$2"; shift 2 ;;
        --input-len) input_len="$2"; shift 2 ;;
        --output-len) output_len="$2"; shift 2 ;;
        --range-ratio) range_ratio="$2"; shift 2 ;;
        --request-rate) request_rate="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --warmup-requests) warmup_requests="$2"; shift 2 ;;
        --output-details) output_details=1; shift ;;
        --interval) interval="$2"; shift 2 ;;
        --ready-timeout) ready_timeout="$2"; shift 2 ;;
        --stop-timeout) stop_timeout="$2"; shift 2 ;;
        *) usage ;;
    esac
done
for required in "$launch" "$port" "$log" "$out" "$python" "$client" "$tokenizer" "$points"; do
    [[ -n "$required" ]] || usage
done

event() { echo "$1 $EPOCHREALTIME${2:+ $2}"; }
die() { echo "perf_seeds_cycle: $*" >&2; event end "failed"; exit 1; }

event begin

# 1. Stop the old server: pkill its command line, poll pgrep every second.
pattern="${module//./[.]} .*--port ${port}( |\$)"
pkill -TERM -f -- "$pattern" || true
event stop_sent
gone=0
for _ in $(seq 1 "$stop_timeout"); do
    if ! pgrep -f -- "$pattern" >/dev/null; then gone=1; break; fi
    sleep 1
done
[[ $gone -eq 1 ]] || die "the old server on port $port is still running after ${stop_timeout} s"
event stopped

# 2. Start the launch script in the background, in its own session.
mkdir -p "$(dirname "$log")" "$out"
event start
nohup setsid "$launch" >"$log" 2>&1 </dev/null &
pid=$!
event pid "$pid"

# 3. Sleep-poll /health until it answers 200.
deadline=$((SECONDS + ready_timeout))
until curl --output /dev/null --silent --fail "http://${host}:${port}/health"; do
    kill -0 "$pid" 2>/dev/null || die "the server (pid $pid) died before it was ready; see $log"
    [[ $SECONDS -lt $deadline ]] || die "the server was not ready after ${ready_timeout} s; see $log"
    sleep "$interval"
done
event ready

# 4. bench_serving once per concurrency point.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
for item in $points; do
    concurrency="${item%%:*}" num_prompts="${item##*:}"
    args=(--backend sglang --host "$host" --port "$port" --dataset-name "$dataset_name")
    [[ -z "$dataset_path" ]] || args+=(--dataset-path "$dataset_path")
    args+=(--random-input-len "$input_len" --random-output-len "$output_len"
           --random-range-ratio "$range_ratio" --num-prompts "$num_prompts"
           --max-concurrency "$concurrency" --request-rate "$request_rate" --seed "$seed"
           --tokenizer "$tokenizer" --model "$tokenizer" --warmup-requests "$warmup_requests"
           --output-file "$out/c${concurrency}.jsonl" --disable-tqdm)
    [[ $output_details -eq 0 ]] || args+=(--output-details)
    event point_begin "$concurrency"
    rc=0
    "$python" "$client" "${args[@]}" >"$out/c${concurrency}.log" 2>&1 || rc=$?
    event point_end "$concurrency $rc"
    [[ $rc -eq 0 ]] || die "bench_serving failed at concurrency $concurrency (exit $rc); see $out/c${concurrency}.log"
done
event end ok
