#!/usr/bin/env bash
# Run the provisioning roles' molecule scenarios, one after the other, each as
# `molecule test` (destroy, create, prepare, [check,] converge, idempotence,
# verify, destroy) on the locally built Debian 12 image, and report how long
# each step took.
#
# Usage: [MOLECULE_JOBS=N] tools/containers/molecule-all.sh [SCENARIO ...]
#   (as root; default: every scenario). Needs
#   tools/containers/setup-podman.sh to have run once; builds the image if
#   needed (tools/containers/build-image.sh, cached).
# Output: one log per scenario and timings.tsv under .work/molecule/, and a
#   table on stdout: per scenario the wall time of the whole test and the
#   ansible-playbook time of each step (converge = the first converge,
#   idempotence = the second run that must report changed=0).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
# Few scenarios, on purpose: each pays create/prepare/converge/idempotence/
# destroy (about half a minute before its own work starts, on CI's 2 cores).
# The checks of roles cuda_toolkit, ml_env/flashinfer/sglang and model_cache
# run in provision's verify, against the node provision converged, and
# preflight's verify covers a host without GPU (until 2026-12 those were four
# scenarios of their own: default, cuda_toolkit, ml_env_flashinfer, model_cache).
default_scenarios=(preflight provision experiment)
scenarios=("$@")
((${#scenarios[@]})) || scenarios=("${default_scenarios[@]}")

# env.sh is checked on its own (shellcheck does not follow sources without -x).
# shellcheck disable=SC1091
. "${here}/env.sh"
export PATH="${repo}/.venv/bin:${PATH}"
# Plain logs: no colours, and molecule's own ANSI boxes off.
export NO_COLOR=1 PY_COLORS=0 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0

command -v podman >/dev/null || {
    echo "molecule-all.sh: podman not found; run tools/containers/setup-podman.sh (as root) first" >&2
    exit 2
}
command -v molecule >/dev/null || {
    echo "molecule-all.sh: molecule not found in ${repo}/.venv; create the venv first (make venv)" >&2
    exit 2
}
jobs=${MOLECULE_JOBS:-1}
[[ ${jobs} =~ ^[1-9][0-9]*$ ]] || {
    echo "molecule-all.sh: MOLECULE_JOBS must be a whole number >= 1, got '${jobs}'" >&2
    exit 2
}
"${here}/build-image.sh" || exit 2

out="${repo}/.work/molecule"
mkdir -p "${out}"
timings="${out}/timings.tsv"
printf 'scenario\tresult\twall_s\tprepare_s\tcheck_s\tconverge_s\tidempotence_s\tverify_s\n' >"${timings}"

# One scenario: its log, and its row of timings in ${out}/<scenario>.row.
run_scenario() {
    local scenario=$1 log start end result
    log="${out}/${scenario}.log"
    echo "molecule-all.sh: ${scenario} (log: ${log#"${repo}"/})"
    start=$(date +%s.%N)
    if molecule test -s "${scenario}" >"${log}" 2>&1; then
        result=passed
    else
        result=FAILED
        tail -n 40 "${log}" | sed "s/^/    ${scenario}: /"
    fi
    end=$(date +%s.%N)
    # Each step's ansible-playbook time: the largest "elapsed since the
    # playbook started" stamp that the profile_tasks callback printed in it.
    python3 - "${log}" "${scenario}" "${result}" "${start}" "${end}" >"${out}/${scenario}.row" <<'PY'
import re, sys
log, scenario, result, start, end = sys.argv[1:]
step_re = re.compile(r"\[(\S+) > (\w+)\] Executing")
stamp_re = re.compile(r"\)\s+(\d+):(\d\d):(\d\d(?:\.\d+)?) \*+\s*$")
times, step = {}, None
for line in open(log, errors="replace"):
    m = step_re.search(line)
    if m:
        step = m.group(2)
        continue
    m = stamp_re.search(line)
    if m and step:
        seconds = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        times[step] = max(times.get(step, 0.0), seconds)
cols = ["prepare", "check", "converge", "idempotence", "verify"]
print("\t".join([scenario, result, "%.0f" % (float(end) - float(start))]
                + ["%.1f" % times[c] if c in times else "-" for c in cols]))
PY
}

# MOLECULE_JOBS lanes (default 1) run the scenarios side by side, lane i taking
# scenarios i, i+N, ... in order; each scenario has its own container
# (sglang-lab-<scenario>) and molecule state, so they do not meet. `make test`
# runs one lane: beside pytest on 2 cores, two lanes made CI slower (Makefile).
cd "${repo}" || exit 2
for ((lane = 0; lane < jobs; lane++)); do
    (
        for ((i = lane; i < ${#scenarios[@]}; i += jobs)); do
            run_scenario "${scenarios[i]}"
        done
    ) &
done
wait

failed=()
for scenario in "${scenarios[@]}"; do
    row="${out}/${scenario}.row"
    if [[ -s ${row} ]] && [[ $(cut -f2 "${row}") == passed ]]; then
        cat "${row}" >>"${timings}"
    else
        failed+=("${scenario}")
        [[ -s ${row} ]] && cat "${row}" >>"${timings}"
    fi
    rm -f "${row}"
done

echo
column -t -s $'\t' "${timings}"
if ((${#failed[@]})); then
    echo "molecule-all.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "molecule-all.sh: all ${#scenarios[@]} scenario(s) passed"
