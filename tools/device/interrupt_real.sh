#!/usr/bin/env bash
# PHASE=int of make real-gpu-check: interrupts of experiment.yml on real SGLang.
#   bash tools/device/interrupt_real.sh REC ansible-playbook-argv...
# 1. SIGINT to the playbook's process group (what Ctrl-C sends) 3 s after the first benchmark
#    point began (200 prompts at c=1, so the point is still running); then how long any process
#    of the benchmark client lives on (pgrep every 0.1 s).
# 2. SIGKILL of the controller (ansible-playbook alone) during the ready-wait; how long the
#    standby client lives on; then the next experiment, which must take the stale lock over and
#    stop the orphaned server.
# Prints one line per finding; the playbooks' output lands in REC/int_*.out. CASES (default
# "sigint sigkill") picks the cases.
set -uo pipefail
REC=$1; shift
AP=("$@")
STANDBY_LOG=/tmp/lab/results/standby/client.log

clients() { pgrep -f 'sglang_bench_client[.]py' | tr '\n' ' '; }
# The tree with process groups and sessions, as a person reads it (pgrep cannot show them).
# shellcheck disable=SC2009
tree() { ps -eo pid,pgid,sid,etimes,args | grep -E "$1" | grep -v grep; }
gone_after() {  # seconds until no client process is left (max 20 s), from now
  local t0 t
  t0=$(date +%s.%N)
  for _ in $(seq 1 200); do
    [ -z "$(clients)" ] && break
    sleep 0.1
  done
  t=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
  if [ -n "$(clients)" ]; then echo "STILL RUNNING after $t s: $(clients)"; else echo "$t"; fi
}

CASES=${CASES:-sigint sigkill}

# 1. SIGINT during the benchmark.
if [[ " $CASES " == *" sigint "* ]]; then
rm -f "$STANDBY_LOG"
setsid "${AP[@]}" playbooks/experiment.yml -e tier=baseline -e sglang_bench_num_prompts_floor=200 \
  > "$REC/int_sigint.out" 2>&1 &
PB=$!
for _ in $(seq 1 1500); do grep -q '"event": "start"' "$STANDBY_LOG" 2>/dev/null && break; sleep 0.2; done
sleep 3
echo "sigint: clients before: $(clients)"
tree 'sglang_bench_client|ansible-playbook' > "$REC/int_ps_before_sigint.txt"
date +%s.%N > "$REC/int_sigint_at.txt"
kill -INT -- "-$PB"
echo "sigint: benchmark client gone after $(gone_after) s"
wait "$PB"; echo "sigint: ansible-playbook rc $?"
tree 'sglang_bench_client' > "$REC/int_ps_after_sigint.txt"
tail -3 "$STANDBY_LOG" | cut -c1-300 > "$REC/int_standby_log_tail.txt"
fi

# 2. SIGKILL of the controller during the ready-wait.
if [[ " $CASES " == *" sigkill "* ]]; then
rm -f "$STANDBY_LOG"
"${AP[@]}" playbooks/experiment.yml -e tier=tiny-chunk > "$REC/int_sigkill.out" 2>&1 &
PB=$!
for _ in $(seq 1 1500); do grep -q 'Wait for the SGLang server to be ready' "$REC/int_sigkill.out" && break; sleep 0.2; done
for _ in $(seq 1 300); do grep -q '"event": "ready"' "$STANDBY_LOG" 2>/dev/null && break; sleep 0.2; done
sleep 1
echo "sigkill: clients before: $(clients)"
date +%s.%N > "$REC/int_sigkill_at.txt"
kill -KILL "$PB"
echo "sigkill: standby client gone after $(gone_after) s"
wait "$PB" 2>/dev/null
sleep 2
"${AP[@]}" playbooks/experiment.yml -e tier=baseline > "$REC/int_after_sigkill.out" 2>&1
echo "after sigkill: next experiment rc $?"
grep -E "stale|taken over|took over" "$REC/int_after_sigkill.out" | head -3 | cut -c1-240
fi
