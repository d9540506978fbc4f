#!/usr/bin/env bash
# `make gpu-check`: prove the GPU-facing code on a real NVIDIA GPU node.
#
# For each --tp-size in GPU_CHECK_TP_SIZES it runs playbooks/gpu_check.yml on
# this machine (ansible_connection: local): the simulator in GPU mode (each
# scheduler holds GPU memory; with 2+ schedulers they run one NCCL all-reduce,
# and the last one ignores SIGTERM) is launched through roles sglang_launch and
# sglang_server, benchmarked briefly with GPU telemetry on (role sglang_bench),
# and stopped with the verified stop. The playbook records every nvidia-smi
# reading, the facts, the stop result and the telemetry CSV, then asserts that
# memory was held before and released after, per GPU, and that the stop result
# agrees with raw nvidia-smi reads. docs/gpu.md, "Checking on a real GPU node".
#
# Usage (repository root): bash tools/gpu_check.sh
# Environment (all optional):
#   GPU_CHECK_TP_SIZES    cases to run, e.g. "1 2" (default: "1 2" with 2+ GPUs, else "1")
#   GPU_CHECK_MEM_MB      MiB each scheduler holds (default 4096)
#   GPU_CHECK_ML_ENV      a venv whose python has torch with CUDA (the node's ml-env);
#                         default: a stand-in ml-env under the work folder that runs
#                         GPU_CHECK_PYTHON
#   GPU_CHECK_PYTHON      python with torch, for the stand-in ml-env (default: python3)
#   GPU_CHECK_PLAYBOOK    ansible-playbook to use (default: .venv/bin/ansible-playbook if
#                         present, else the one on PATH)
#   GPU_CHECK_NVIDIA_SMI  nvidia-smi to read (default: nvidia-smi)
#   GPU_CHECK_PORT        simulator port (default 30000)
#   GPU_CHECK_CASE_TIMEOUT seconds one case may take before it is cut off (default 1800)
#   GPU_CHECK_EXTRA_VARS  more -e for every case (JSON), e.g. '{"gpu_check_benchmark": false}'
#   GPU_CHECK_WORK        work folder (default .work/gpu-check)
#   GPU_CHECK_OUT         where the recording goes (default results/gpu-check)
#   GPU_CHECK_TARBALL     also pack the recording into this .tar.gz
# The recording has GPU UUIDs replaced by placeholders (GPU-00000000-1111-2222-3333-4444444444NN,
# NN = the GPU index) and serial numbers by zeros, so it can be committed as a fixture.
# Exit status: 0 when every case passed, 1 otherwise, 2 when the node cannot run the check.
set -u -o pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 2

# NVLink multicast off in every process started from here (NCCL NVLS, PyTorch symmetric
# memory, NVSHMEM): on shared multi-GPU hosts it can take the GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export ANSIBLE_CONFIG="$repo/ansible.cfg" PYTHONUNBUFFERED=1 ANSIBLE_NOCOLOR=1
# Ansible refuses to run without a UTF-8 locale (bare images often have none set).
if ! locale charmap 2>/dev/null | grep -qi '^utf-\?8$'; then
  export LC_ALL=C.UTF-8
fi

nvidia_smi="${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}"
mem_mb="${GPU_CHECK_MEM_MB:-4096}"
port="${GPU_CHECK_PORT:-30000}"
case_timeout="${GPU_CHECK_CASE_TIMEOUT:-1800}"
work="${GPU_CHECK_WORK:-$repo/.work/gpu-check}"
out="${GPU_CHECK_OUT:-$repo/results/gpu-check}"
python="${GPU_CHECK_PYTHON:-python3}"
playbook_bin="${GPU_CHECK_PLAYBOOK:-}"
if [[ -z "$playbook_bin" ]]; then
  if [[ -x "$repo/.venv/bin/ansible-playbook" ]]; then
    playbook_bin="$repo/.venv/bin/ansible-playbook"
  else
    playbook_bin="ansible-playbook"
  fi
fi

die() { echo "gpu_check: $*" >&2; exit 2; }

command -v "$nvidia_smi" >/dev/null || die "nvidia-smi not found ('$nvidia_smi'); this check needs an NVIDIA GPU node (or set GPU_CHECK_NVIDIA_SMI)."
command -v "$playbook_bin" >/dev/null || die "ansible-playbook not found ('$playbook_bin'); run 'make venv' or set GPU_CHECK_PLAYBOOK."
gpu_count="$("$nvidia_smi" --query-gpu=index --format=csv,noheader | grep -c .)" || die "nvidia-smi lists no GPU."
tp_sizes="${GPU_CHECK_TP_SIZES:-}"
if [[ -z "$tp_sizes" ]]; then
  tp_sizes="1"
  ((gpu_count >= 2)) && tp_sizes="1 2"
fi

mkdir -p "$work" "$out" || die "cannot create $work or $out"
rm -rf "$work/lab" "$work/model" "$work/ml-env" "$out"/tp* "$out/node.txt"

# The ml-env the launch script sources: the node's own, or a stand-in whose python runs
# GPU_CHECK_PYTHON (a venv made from a python that itself lives in a venv would not see
# that venv's torch, hence a wrapper rather than `python -m venv`).
ml_env="${GPU_CHECK_ML_ENV:-}"
if [[ -z "$ml_env" ]]; then
  ml_env="$work/ml-env"
  real_python="$(command -v "$python")" || die "no python '$python'; set GPU_CHECK_PYTHON or GPU_CHECK_ML_ENV."
  mkdir -p "$ml_env/bin"
  printf '#!/bin/sh\nexec %q "$@"\n' "$real_python" >"$ml_env/bin/python3"
  chmod 0755 "$ml_env/bin/python3"
  ln -sf python3 "$ml_env/bin/python"
  # shellcheck disable=SC2016  # "$PATH" is meant literally: expanded when activate is sourced
  printf '# stand-in ml-env of tools/gpu_check.sh: its python runs %s\nexport VIRTUAL_ENV=%q\nexport PATH=%q:"$PATH"\n' \
    "$real_python" "$ml_env" "$ml_env/bin" >"$ml_env/bin/activate"
fi
ml_python="$ml_env/bin/python3"
[[ -x "$ml_python" ]] || die "$ml_python is missing or not executable (GPU_CHECK_ML_ENV)."

# What the node has, recorded beside the cases.
{
  echo "# nvidia-smi"
  "$nvidia_smi" --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv
  echo "# torch"
  "$ml_python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count()); print("nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")'
  echo "# python"
  "$ml_python" -c 'import sys; print(sys.version.split()[0])'
} >"$out/node.txt" 2>&1
cat "$out/node.txt"
if ((mem_mb > 0)); then
  "$ml_python" -c 'import setproctitle, torch; assert torch.cuda.is_available(), "CUDA is not available to torch"' ||
    die "the ml-env python ($ml_python) needs torch with CUDA and setproctitle for GPU mode."
fi

PYTHONPATH="$repo/simulator${PYTHONPATH:+:$PYTHONPATH}" "$ml_python" -m sglang_sim.make_tokenizer "$work/model" >/dev/null ||
  die "could not make the simulator's tokenizer in $work/model"

cat >"$work/inventory.yml" <<EOF
# Written by tools/gpu_check.sh: this machine, driven locally, serving the simulator.
all:
  children:
    sglang_nodes:
      hosts:
        gpu-node:
          ansible_connection: local
          ansible_python_interpreter: "{{ ansible_playbook_python }}"
      vars:
        sglang_lab_work_dir: "$work/lab"
        sglang_lab_ml_env: "$ml_env"
        sglang_lab_target: simulator
        sglang_lab_port: $port
        sglang_lab_expect_gpu: true
        sglang_server_nvidia_smi: "$nvidia_smi"
EOF

status=0
for tp in $tp_sizes; do
  case_out="$out/tp$tp"
  mkdir -p "$case_out"
  echo "=== GPU check, --tp-size $tp, $mem_mb MiB per scheduler"
  timeout "$case_timeout" "$playbook_bin" -i "$work/inventory.yml" playbooks/gpu_check.yml \
    -e "gpu_check_tp_size=$tp" -e "gpu_check_mem_mb=$mem_mb" \
    -e "gpu_check_model=$work/model" -e "gpu_check_out_dir=$case_out" \
    -e "gpu_check_nvidia_smi=$nvidia_smi" \
    ${GPU_CHECK_EXTRA_VARS:+-e "$GPU_CHECK_EXTRA_VARS"} 2>&1 | tee "$case_out/ansible.log"
  rc=${PIPESTATUS[0]}
  echo "=== --tp-size $tp: ansible-playbook exit status $rc"
  echo "$rc" >"$case_out/exit-status.txt"
  ((rc == 0)) || status=1
done

# Scrub: GPU UUIDs (known ones by GPU index, any other one numbered from 90) and serials.
"$ml_python" - "$out" "$nvidia_smi" <<'PY' || status=1
import pathlib, re, subprocess, sys

out, nvidia_smi = pathlib.Path(sys.argv[1]), sys.argv[2]
rows = subprocess.run([nvidia_smi, "--query-gpu=index,uuid", "--format=csv,noheader,nounits"],
                      capture_output=True, text=True, check=True).stdout.splitlines()
mapping = {}
for row in rows:
    index, uuid = (field.strip() for field in row.split(",", 1))
    mapping[uuid] = f"GPU-00000000-1111-2222-3333-{4444444444 * 100 + int(index):012d}"
uuid_re = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
serial_re = re.compile(r"(?i)(serial[\"']?\s*[:=,]\s*[\"']?)[0-9A-Za-z]+")
for path in sorted(p for p in out.rglob("*") if p.is_file()):
    text = path.read_text(errors="replace")

    def placeholder(match):
        if match.group(0) not in mapping:
            mapping[match.group(0)] = f"GPU-00000000-1111-2222-3333-{4444444444 * 100 + 90 + len(mapping):012d}"
        return mapping[match.group(0)]

    scrubbed = serial_re.sub(lambda m: m.group(1) + "0000000000000", uuid_re.sub(placeholder, text))
    if scrubbed != text:
        path.write_text(scrubbed)
print(f"scrubbed {len(mapping)} GPU UUID(s) under {out}")
PY

if [[ -n "${GPU_CHECK_TARBALL:-}" ]]; then
  tar -czf "$GPU_CHECK_TARBALL" -C "$(dirname "$out")" "$(basename "$out")" || status=1
fi
if ((status == 0)); then
  echo "GPU check passed for --tp-size $tp_sizes (recording: $out)"
else
  echo "GPU check FAILED (recording: $out; see */ansible.log)"
fi
exit "$status"
