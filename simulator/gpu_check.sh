#!/usr/bin/env bash
# GPU-mode check of the SYNTHETIC SGLang-protocol simulator on a machine with
# NVIDIA GPUs and torch (not for CI: it needs real GPUs).
#
# What it shows: each sglang::scheduler_TP<i> holds SGLANG_SIM_GPU_MEM_MB MiB
# on its GPU (nvidia-smi lists the titles), the NCCL all-reduce over the
# schedulers succeeds, and after SIGTERM no sglang:: process is left and the
# memory is released.
#
# This is the low-level piece: the simulator alone, started by hand. The full check through
# the project's roles and modules (verified stop, gpu_facts, telemetry, recorded fixtures) is
# tools/gpu_check.sh (`make gpu-check`, docs/gpu.md).
#
# Usage (repository root):
#   simulator/gpu_check.sh [TP_SIZE] [MEM_MB]          defaults: 2 GPUs, 4096 MiB
# Environment:
#   PYTHON        interpreter with torch (default: python3)
#   SIM_PORT      HTTP port (default: 30000)
#   SIM_LOG       simulator log file (default: a temporary file)
#   SIM_WHEELS    optional folder of wheels (e.g. setproctitle) installed to a
#                 temporary target first, for machines without them
# Exit status: 0 when every check passed, 1 otherwise.
set -u -o pipefail

tp="${1:-2}"
mem_mb="${2:-4096}"
python="${PYTHON:-python3}"
port="${SIM_PORT:-30000}"
log="${SIM_LOG:-$(mktemp /tmp/sglang-sim-gpu.XXXXXX.log)}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d /tmp/sglang-sim-gpu.XXXXXX)"
status=0

fail() { echo "FAIL: $*"; status=1; }

if [[ -n "${SIM_WHEELS:-}" ]]; then
  "$python" -m pip install -q --no-index --no-deps --target "$work/site" "$SIM_WHEELS"/*.whl || exit 1
  export PYTHONPATH="$work/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$repo/simulator:${PYTHONPATH:-}" PYTHONUNBUFFERED=1

"$python" -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count())' || exit 1
nvidia-smi --query-gpu=index,name,memory.used --format=csv || exit 1
"$python" -m sglang_sim.make_tokenizer "$work/model" >/dev/null || exit 1

SGLANG_SIM_LOAD_SECONDS=1 SGLANG_SIM_SPEED=20 \
  SGLANG_SIM_GPU_MEM_MB="$mem_mb" SGLANG_SIM_NCCL_ALLREDUCE=1 \
  "$python" -m sglang_sim.launch_server --model-path "$work/model" --tp-size "$tp" \
  --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
main_pid=$!

"$python" - "$port" <<'PY' || fail "server not ready or /generate failed (log: $log)"
import sys, time, requests
url = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(240):
    try:
        if requests.get(url + "/health", timeout=2).status_code == 200:
            break
    except requests.RequestException:
        pass
    time.sleep(0.5)
else:
    sys.exit("not ready after 120 s")
meta = requests.post(url + "/generate", timeout=30, json={
    "text": "a b c", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}).json()["meta_info"]
assert meta["completion_tokens"] == 8, meta
print("ready; /generate returned 8 tokens")
PY

echo "--- while serving"
apps="$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader)"
echo "$apps"
for ((i = 0; i < tp; i++)); do
  title="sglang::scheduler"
  ((tp > 1)) && title="sglang::scheduler_TP$i"
  grep -q "$title" <<<"$apps" || fail "nvidia-smi does not list $title"
done
ranks_ok="$(grep -c "NCCL all-reduce ok over $tp ranks" "$log")"
if ((tp > 1)) && ((ranks_ok != tp)); then
  fail "NCCL all-reduce ok on $ranks_ok of $tp ranks"
fi

kill -TERM "$main_pid"
wait "$main_pid"
echo "main process exit status $? (SGLang ends with SIGKILL of itself: 137)"
sleep 3
echo "--- after SIGTERM"
if pgrep -f '^sglang::' >/dev/null; then
  fail "sglang:: processes left: $(pgrep -af '^sglang::' | tr '\n' ' ')"
fi
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
grep -E "GPU mode|Scheduler hit" "$log"
rm -rf "$work"
if ((status == 0)); then echo "GPU mode check passed (log: $log)"; fi
exit "$status"
