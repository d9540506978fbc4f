#!/usr/bin/env bash
# make real-gpu-check: the project's own playbooks against REAL SGLang 0.5.17 on the lent H200,
# with a 2-layer random-weight Llama (../shared/real-sglang/README.md says why 0.5.17 and why
# this model). Run it there from the checkout's root, with the kit that tools/device/make_kit.sh
# built here carried along (.whl, .awhl, .device-kit):
#   PHASE=a bash tools/device/real_gpu_check.sh   validate; experiments baseline and tiny-chunk;
#                                                 patches refused before the stop; tiny-nomem
#                                                 crashes at start-up and is restored; status
#   PHASE=b bash tools/device/real_gpu_check.sh   a streamed-error point (oversized prompts);
#                                                 a scheduler SIGKILLed under load; a verified
#                                                 stop; the report
#   PHASE=c bash tools/device/real_gpu_check.sh   on its own: start, the patches refused before
#                                                 the stop, verified stops timed (idle and after
#                                                 traffic)
#   PHASE=d bash tools/device/real_gpu_check.sh   on its own: start.yml, then the patches step
#                                                 refused with the server serving (same pid after),
#                                                 a verified stop
#   PHASE=f bash tools/device/real_gpu_check.sh   on its own: experiments baseline and tiny-chunk
#                                                 with the measure step (the warm-up runs while
#                                                 the client imports bench_serving), a verified stop
#   PHASE=g bash tools/device/real_gpu_check.sh   on its own: phase f's steps again, after the
#                                                 client stopped bench_serving's idle settle pause
#                                                 and per-point warm-up request, and the record
#                                                 task compares and copies the ledger itself
#   PHASE=h bash tools/device/real_gpu_check.sh   on its own: experiment baseline, then tiny-nomem,
#                                                 which dies at start-up and is restored from the
#                                                 plan module sglang_ledger_info makes on the host
#                                                 (restore: true), then a verified stop
#   PHASE=perf bash tools/device/real_gpu_check.sh  on its own: experiment.yml and the same cycle by
#                                                 hand, alternating, RUNS (3) times each
#                                                 (tools/device/perf_real.py: perf.json), then the
#                                                 tier validated again (the parser's verdict kept)
#   PHASE=int bash tools/device/real_gpu_check.sh   on its own: SIGINT to the playbook 3 s into the
#                                                 benchmark, SIGKILL of the controller during the
#                                                 ready-wait (tools/device/interrupt_real.sh)
#   PHASE=trust bash tools/device/real_gpu_check.sh  on its own: issue 23's numbers on real SGLang
#                                                 (tools/device/trust_real.sh): A/A pairs, too_short,
#                                                 counters, cache hit rates, the SLO search
#   PHASE=quality bash tools/device/real_gpu_check.sh  on its own: issue 25's output-quality check on
#                                                 real SGLang (tools/device/quality_real.sh): the
#                                                 baseline twice (A/A), tiny-chunk, tiny-fp16, the
#                                                 baseline again; the greedy outputs in every record
#   PHASE=vtime bash tools/device/real_gpu_check.sh  validate.yml four times on one tier (VTIME_TIER):
#                                                  what a repeated validation costs (issue 24)
#   PHASE=e bash tools/device/real_gpu_check.sh   a campaign (CAMPAIGN, default
#                                                 data/campaigns/h200-tiny.yml) under its budget;
#                                                 run it again and it resumes. The report is made
#                                                 here, from the ledger it brings back (the H200's
#                                                 Python has no scipy).
# Phase b needs phase a's server and ledger (the machine stays warm between calls).
# Everything lands in /tmp/rec (copied to $OUT/rec-<phase>.tgz): each playbook's output,
# a timeline of the endpoints, the GPU memory and the process tree sampled every 0.2 s
# (tools/device/record.py), ps and nvidia-smi snapshots, the server logs, the ledger,
# bench_serving's raw JSONL, and summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PHASE=${PHASE:-a}
SITE=/tmp/site REC=/tmp/rec KIT=.device-kit WORK=/tmp/lab PORT=30000
mkdir -p "$REC"
probe_imports() {  # what one import of SGLang's parser and of bench_serving (the client's shells) costs
  local t0 what
  for what in "from sglang.srt.server_args import prepare_server_args" \
              "import sys; sys.path.insert(0, 'tools'); import sglang_bench_client as c; c.import_bench(False)"; do
    t0=$(date +%s.%N)
    python3 -c "$what" > /dev/null 2>&1
    echo "import ($1): $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s: $what" | tee -a "$REC/summary.txt"
  done
}
if [ ! -f $SITE/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/*.whl .awhl/*.whl || exit 1
  mkdir -p /tmp/tvm-ffi-cache && tar -C /tmp/tvm-ffi-cache -xzf $KIT/jitcache-*.tgz
  cp -r $KIT/stubs/. $SITE/
  # Byte-compile what was installed, as pip does on a real node (the install above is --no-compile, to
  # fit the carry's time): without it every SGLang process (the server's three, the parser check, the
  # benchmark client) compiles SGLang from source at each import, since make exports
  # PYTHONDONTWRITEBYTECODE. Measured 2026-12-06: docs/real-sglang.md.
  # shellcheck source=/dev/null
  [ -n "${PROBE_IMPORTS:-}" ] && (source $KIT/env.sh; probe_imports "without byte code")
  t0=$(date +%s.%N)
  python3 -m compileall -q -j 0 $SITE > /dev/null 2>&1
  echo "byte-compiled $SITE in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$REC/summary.txt"
  # shellcheck source=/dev/null
  [ -n "${PROBE_IMPORTS:-}" ] && (source $KIT/env.sh; probe_imports "byte-compiled")
  touch $SITE/.done
fi
# shellcheck source=/dev/null
source $KIT/env.sh
[ -f /tmp/tiny-llama/config.json ] || python3 $KIT/make_tiny_llama.py /tmp/tiny-llama > /dev/null || exit 1
export ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_LOCAL_TEMP=/tmp/ans-local ANSIBLE_HOME=/tmp/ans-home ANSIBLE_NOCOLOR=1
AP=(python3 "$SITE/bin/ansible-playbook" -i inventory/h200-device.yml)
# This copy of the tree has no .git; make_kit.sh wrote the revision it was built from.
[ -s $KIT/git-revision ] && AP+=(-e "sglang_bench_git_revision=$(cat $KIT/git-revision)")

snap() {  # name: process tree, GPU and endpoints now
  # The whole tree, as a person reads it (pgrep cannot show the forest).
  # shellcheck disable=SC2009
  { date +%s.%N; ps -eo pid,ppid,sid,etimes,args --forest | grep -E 'sglang|resource_tracker|PID' | grep -v grep; } > "$REC/ps_$1.txt"
  nvidia-smi > "$REC/smi_$1.txt" 2>&1
}
server_pid() { python3 -c "import json; print(json.load(open('$WORK/run/server.json'))['pid'])" 2>/dev/null || echo none; }
step() {  # name, playbook args...: run one playbook, time it, keep its output
  local name=$1; shift
  local before t0 t1 rc
  before=$(server_pid); t0=$(date +%s.%N)
  "${AP[@]}" "$@" > "$REC/$name.out" 2>&1; rc=$?
  t1=$(date +%s.%N)
  printf '== %s rc=%s %s s, server pid %s -> %s\n' "$name" "$rc" "$(python3 -c "print(round($t1 - $t0, 1))")" \
    "$before" "$(server_pid)" | tee -a "$REC/summary.txt"
  grep -E "Tier .* failed|restore:|ledger:|is ready after|stopped|port [0-9]+: |gpu: |took [0-9.]+ s|refused|FAILED!|ERROR" "$REC/$name.out" \
    | grep -v RETRYING | head -8 | cut -c1-240 | sed 's/^/   /' | tee -a "$REC/summary.txt"
}

python3 tools/device/record.py --port $PORT --out "$REC" &
RECORDER=$!
trap 'kill $RECORDER 2>/dev/null' EXIT
echo "== phase $PHASE on $(nvidia-smi -L | head -1); sglang $(python3 -c 'import sglang; print(sglang.__version__)' 2>&1 | tail -1)" | tee -a "$REC/summary.txt"

if [ "$PHASE" = a ]; then
  step validate playbooks/validate.yml -e tier=baseline
  step exp_baseline playbooks/experiment.yml -e tier=baseline
  snap ready
  curl -s localhost:$PORT/server_info > "$REC/server_info.json"
  step exp_chunk playbooks/experiment.yml -e tier=tiny-chunk
  # FlashInfer is a stand-in here: the patches step cannot use it, and must say so before the stop.
  step exp_patches_refused playbooks/experiment.yml -e tier=baseline -e sglang_experiment_apply_patches=true
  step exp_nomem playbooks/experiment.yml -e tier=tiny-nomem
  step status_a playbooks/status.yml
elif [ "$PHASE" = c ]; then
  step start_c playbooks/start.yml -e tier=baseline
  step exp_patches_refused playbooks/experiment.yml -e tier=baseline -e sglang_experiment_apply_patches=true
  step stop_idle playbooks/stop.yml
  step exp_c playbooks/experiment.yml -e tier=baseline
  step stop_after_traffic playbooks/stop.yml
  snap after_stop_c
elif [ "$PHASE" = d ]; then
  step start_d playbooks/start.yml -e tier=baseline
  snap ready_d
  step exp_patches_refused_d playbooks/experiment.yml -e tier=baseline -e sglang_experiment_apply_patches=true
  curl -s -o /dev/null -w '%{http_code}\n' localhost:$PORT/health > "$REC/health_after_refusal_d.txt"
  step stop_d playbooks/stop.yml
elif [ "$PHASE" = f ]; then
  step exp_baseline_f playbooks/experiment.yml -e tier=baseline
  step exp_chunk_f playbooks/experiment.yml -e tier=tiny-chunk
  step stop_f playbooks/stop.yml
  snap after_stop_f
elif [ "$PHASE" = g ]; then
  step exp_baseline_g playbooks/experiment.yml -e tier=baseline
  step exp_chunk_g playbooks/experiment.yml -e tier=tiny-chunk
  step stop_g playbooks/stop.yml
  snap after_stop_g
elif [ "$PHASE" = h ]; then
  step exp_baseline_h playbooks/experiment.yml -e tier=baseline
  step exp_nomem_h playbooks/experiment.yml -e tier=tiny-nomem
  snap restored_h
  step stop_h playbooks/stop.yml
  snap after_stop_h
elif [ "$PHASE" = perf ]; then
  # Ours and by hand on the same tier and workload, alternating (tools/device/perf_real.py), then the
  # parser's verdict kept: the same tier validated again.
  # PERF_WARM_START=0: an earlier phase of this call already took the machine's cold first start.
  warm=(); [ "${PERF_WARM_START:-1}" = 0 ] && warm=(--no-warm-start)
  # PERF_VALIDATE_FIRST=1: the tier validated once before the alternation (validate.yml: SGLang's parser
  # runs and its verdict is kept), as a user validates a launch before running it, or as any second run
  # of a launch finds it. Every ours run then finds the verdict; the parser's own time is in this step.
  if [ "${PERF_VALIDATE_FIRST:-0}" = 1 ]; then
    step validate_first playbooks/validate.yml -e tier=baseline
    grep -E "accepted (it|tier)" "$REC/validate_first.out" | head -2 | tee -a "$REC/summary.txt"
  fi
  # The workload as issue 24 measured it by hand (c=1 x 16, c=16 x 32): no measurement window, so
  # both sides send the same prompts (the by-hand cycle reads them from our record). The cache flush
  # and the /metrics readings stay: they are part of our cycle's cost.
  python3 tools/device/perf_real.py --out "$REC/${PERF_DIR:-perf}" --work $WORK --tier baseline --runs "${RUNS:-3}" \
    --copy-to "${OUT:-/tmp}/${PERF_DIR:-perf}.json" "${warm[@]}" \
    -- "${AP[@]}" -e sglang_bench_min_requests=0 -e sglang_bench_min_duration_s=0 2>&1 | tee -a "$REC/summary.txt"
  # PERF_TAIL=0 skips the validation again and the stop (a call short of device time).
  if [ "${PERF_TAIL:-1}" = 1 ]; then
    step validate_again playbooks/validate.yml -e tier=baseline
    grep -E "accepted (it|tier)" "$REC/validate_again.out" | head -2 | tee -a "$REC/summary.txt"
    step stop_perf playbooks/stop.yml
  fi
elif [ "$PHASE" = int ]; then
  # Interrupts (tools/device/interrupt_real.sh): SIGINT 3 s into the benchmark, then SIGKILL of the
  # controller during the ready-wait and the next experiment after it.
  bash tools/device/interrupt_real.sh "$REC" "${AP[@]}" 2>&1 | tee -a "$REC/summary.txt"
  cp "$REC"/int_*.out "$REC/summary.txt" "${OUT:-/tmp}/" 2>/dev/null
  step stop_int playbooks/stop.yml
elif [ "$PHASE" = trust ]; then
  # Issue 23 on real SGLang (tools/device/trust_real.sh): an A/A by experiment.yml (PAIRS baseline runs,
  # default 6: three pairs), each point with its window, flushed cache and the server's counters; a point
  # below its window (too_short); the streamed-error point caught by the counters; two repeats on one
  # server with the cache hit rate of each; the SLO search sized for its p99.
  bash tools/device/trust_real.sh "$REC" "${AP[@]}" 2>&1 | tee -a "$REC/summary.txt"
  step stop_trust playbooks/stop.yml
elif [ "$PHASE" = quality ]; then
  # Issue 25 on real SGLang (tools/device/quality_real.sh, docs/quality.md): the A/A floor of the greedy
  # outputs, a scheduling-only tier (tiny-chunk) and a numerics-changing one (tiny-fp16).
  bash tools/device/quality_real.sh "$REC" "${AP[@]}" 2>&1 | tee -a "$REC/summary.txt"
  step stop_quality playbooks/stop.yml
elif [ "$PHASE" = vtime ]; then
  # Issue 24's target: a repeated validation of an unchanged tier. The first run keeps SGLang's parser
  # verdict (if an earlier phase of this call had not already); the next ones find it.
  for i in 1 2 3 4; do step "validate_$i" playbooks/validate.yml -e tier="${VTIME_TIER:-baseline}"; done
  grep -hE "accepted (it|tier)" "$REC"/validate_*.out | tee -a "$REC/summary.txt"
  # Where a repeated validation's time goes: two more runs, each output line stamped with the seconds since
  # the run began (a task's time is its banner to the next banner; the first banner is ansible's own start).
  for i in 1 2; do
    "${AP[@]}" playbooks/validate.yml -e tier="${VTIME_TIER:-baseline}" 2>&1 \
      | python3 -u -c 'import sys, time; t = time.monotonic(); [print(f"{time.monotonic() - t:8.3f} {line}", end="") for line in sys.stdin]' \
      > "$REC/validate_stamped_$i.out"
    grep -E "^ *[0-9.]+ (TASK|PLAY RECAP)" "$REC/validate_stamped_$i.out" | tail -40 >> "$REC/summary.txt"
  done
elif [ "$PHASE" = e ]; then
  n=$(find "$REC" -maxdepth 1 -name 'campaign_*.out' | wc -l)
  step "campaign_$((n + 1))" playbooks/campaign.yml -e "campaign=${CAMPAIGN:-data/campaigns/h200-tiny.yml}" \
    -e sglang_campaign_write_report=false
  snap "campaign_$((n + 1))"
else
  # 5000-token prompts against a 4096-token context: every request fails inside an HTTP 200 stream.
  step exp_lie playbooks/experiment.yml -e tier=tiny-chunk -e sglang_bench_input_len=5000 -e sglang_bench_random_range_ratio=1.0
  # A scheduler SIGKILLed while bench_serving runs. Not keyed on the client's process: it starts beside
  # the loading server (issue 24), and a kill then lands in the load. The benchmark task's header is
  # printed once the server is ready; 5 s later the warm-up's rounds are done and a point runs.
  ( for _ in $(seq 1 900); do grep -q 'Benchmark every point in one client process' "$REC/exp_kill.out" 2>/dev/null && break; sleep 0.2; done
    sleep 5; date +%s.%N > "$REC/kill_at.txt"; pkill -9 -f '^sglang::scheduler' ) &
  step exp_kill playbooks/experiment.yml -e tier=tiny-chunk
  snap before_stop
  step stop playbooks/stop.yml
  snap after_stop
  step status_b playbooks/status.yml
  step report playbooks/report.yml -e report_update_tier_docs=false
  cp -r results "$REC/results" 2>/dev/null
fi
kill $RECORDER 2>/dev/null; wait $RECORDER 2>/dev/null
mkdir -p "$REC/work" && cp -r $WORK/logs $WORK/results "$REC/work/" 2>/dev/null
tar -C /tmp -czf "${OUT:-/tmp}/rec-$PHASE.tgz" rec
ls -la "${OUT:-/tmp}"
