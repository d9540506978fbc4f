#!/usr/bin/env bash
# PHASE=quality of make real-gpu-check: issue 25's output-quality check on real SGLang (docs/quality.md).
# Not run yet: written 2026-12-06 in a session without a device.
#   bash tools/device/quality_real.sh REC ansible-playbook-argv...
# 1. The baseline twice: the A/A floor of the greedy outputs (data/quality.yml, 12 prompts x 32 tokens).
# 2. tiny-chunk, a tier that changes only the scheduling: its single pass (c=1) is expected unchanged.
# 3. tiny-fp16 (--dtype float16 against the model's bfloat16), a tier that changes the arithmetic: its
#    agreement is expected below the A/A floor.
# 4. The baseline twice more: unchanged against the floor, or the floor says how far greedy decoding of
#    this random-weight model wanders by itself. The four baseline records are also issue 23's A/A by
#    experiment.yml (three consecutive baseline-vs-baseline comparisons, each point with its window, a
#    flushed cache and the server's counters) and its run-to-run spread across four server starts.
# Every record's quality block (both passes, batch vs single, the comparison, the seconds) lands in the ledger;
# the playbooks' output and a summary in REC. About six experiment cycles: one 10-minute device call.
set -uo pipefail
REC=$1; shift
# shellcheck disable=SC2034  # read by phase_run (phase_lib.sh)
AP=("$@")
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/phase_lib.sh"
run() {  # name, playbook args...
  phase_run quality "^quality \(|vs baseline record|batch pass vs|FAILED!" "$@"
}
run baseline_1 playbooks/experiment.yml -e tier=baseline
run baseline_2 playbooks/experiment.yml -e tier=baseline
run chunk playbooks/experiment.yml -e tier=tiny-chunk
run fp16 playbooks/experiment.yml -e tier=tiny-fp16
run baseline_3 playbooks/experiment.yml -e tier=baseline
run baseline_4 playbooks/experiment.yml -e tier=baseline
python3 - "$REC" <<'PY'
import json, os, sys
path = "/tmp/lab/results/ledger.jsonl"
records = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
for r in records:
    q = r.get("quality") or {}
    c = q.get("comparison") or {}
    single, aa, bvs = c.get("single") or {}, c.get("aa") or {}, q.get("batch_vs_single") or {}
    print(r["tier"], r["status"], q.get("status"), "|", c.get("verdict"), "| identical %s/%s agreement %s div %s dlp %s"
          % (single.get("identical"), single.get("prompts"), single.get("token_agreement"),
             single.get("mean_first_divergence"), single.get("mean_abs_logprob_diff")),
          "| A/A %s | below floor %s" % (aa.get("token_agreement"), c.get("below_floor")),
          "| batch vs single identical %s/%s" % (bvs.get("identical"), bvs.get("prompts")),
          "| seconds %s" % q.get("seconds"), "| error %s" % q.get("error"))
PY
cp /tmp/lab/results/ledger.jsonl "$REC/quality_ledger.jsonl" 2>/dev/null
