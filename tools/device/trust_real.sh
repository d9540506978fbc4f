#!/usr/bin/env bash
# PHASE=trust of make real-gpu-check: what issue 23 asks to see on real SGLang (docs/benchmark.md, "What a
# point can support"). Recorded: tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-quality-trust/, phase-trust-slo/
# and phase-trust-aa/ (twelve A/A starts, TRUST_CASES=aa PAIRS=6 twice), each on the lent card, an H100 those days.
#   bash tools/device/trust_real.sh REC ansible-playbook-argv...
# 1. The A/A: experiment.yml -e tier=baseline PAIRS times (default 6, three pairs), each a server start,
#    with the inventory's window (5 s): every comparison must say no verdict or indistinguishable, never
#    better or worse; every point carries server_metrics, cache and steady_state.
# 2. A point below its window: the window raised past what one sizing run gives (max_prompts 40 at c=16),
#    so the point is recorded too_short.
# 3. The streamed-error point (5000-token prompts against a 4096-token context): failed, its counters say
#    the server counted nothing.
# 4. Two repeats on one server (sglang_bench_repeats=2), cold cache: each point's hit rate near 0; then warm
#    (sglang_bench_cache=warm): the second repeat's near 1.
# 5. The SLO search with a p99 bound: every probe sized to 100 requests.
# The ledger, the raw JSONL with its sidecars and the playbooks' output land in REC. TRUST_CASES (default
# "aa short lie repeats slo") picks the cases: all of them outrun one 10-minute device call (the A/A alone is
# about 6-7 min), so run "aa" in one call and the rest in the next, on the warm machine.
set -uo pipefail
REC=$1; shift
# shellcheck disable=SC2034  # read by phase_run (phase_lib.sh)
AP=("$@")
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/phase_lib.sh"
run() {  # name, playbook args...
  phase_run trust "too_short|counter_mismatch|better|worse|indistinguishable|no_verdict|FAILED!" "$@"
}
CASES=" ${TRUST_CASES:-aa short lie repeats slo} "
if [[ $CASES == *" aa "* ]]; then
  for index in $(seq 1 "${PAIRS:-6}"); do
    run "aa_$index" playbooks/experiment.yml -e tier=baseline
  done
fi
if [[ $CASES == *" short "* ]]; then
  run short playbooks/experiment.yml -e tier=baseline -e sglang_bench_min_duration_s=60 -e sglang_bench_max_prompts=40
fi
if [[ $CASES == *" lie "* ]]; then
  run lie playbooks/experiment.yml -e tier=tiny-chunk -e sglang_bench_input_len=5000 \
    -e sglang_bench_random_range_ratio=1.0 -e sglang_experiment_restore=false
fi
if [[ $CASES == *" repeats "* ]]; then
  run repeats_cold playbooks/experiment.yml -e tier=baseline -e sglang_bench_repeats=2
  run repeats_warm playbooks/experiment.yml -e tier=baseline -e sglang_bench_repeats=2 -e sglang_bench_cache=warm
fi
if [[ $CASES == *" slo "* ]]; then
  run slo playbooks/slo_search.yml -e tier=baseline -e '{"slo": [{"metric": "p99_ttft_ms", "max": 200}]}' \
    -e sglang_bench_slo_low=1 -e sglang_bench_slo_high=32 -e sglang_bench_slo_tolerance=8
fi
python3 - "$REC" <<'PY'
import json, sys, os
rec = sys.argv[1]
path = "/tmp/lab/results/ledger.jsonl"
records = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
for r in records:
    for p in r.get("points") or []:
        m = p.get("server_metrics") or {}
        print(r["tier"], r["status"], "c=%s" % p["concurrency"], "r%s" % p.get("repeat"), p["status"],
              "out tok/s %s" % p.get("output_throughput"), "server req %s gen %s" % (m.get("requests"), m.get("generation_tokens")),
              "hit %s" % (p.get("cache") or {}).get("hit_rate"), "steady %s" % (p.get("steady_state") or {}).get("output_throughput"))
PY
cp /tmp/lab/results/ledger.jsonl "$REC/trust_ledger.jsonl" 2>/dev/null
