#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Start/stop the background GPU telemetry sampler; logic in plugins/module_utils/gpu_telemetry.py.

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_telemetry
short_description: Record GPU power, clocks, utilization and memory in the background
description:
  - O(state=started) starts C(nvidia-smi
    --query-gpu=timestamp,index,uuid,power.draw,clocks.sm,clocks.mem,utilization.gpu,memory.used,temperature.gpu
    --format=csv,noheader,nounits -lms <interval_ms>) detached in its own session. It appends one
    row per GPU per interval to the CSV file O(path), after a header line the module writes. The
    pid goes to O(pidfile), nvidia-smi's stderr to C(<path>.stderr).
  - The module waits until the first row is in the CSV, so a sampler that cannot read the GPUs
    fails the task with nvidia-smi's message instead of recording nothing.
  - O(state=started) when that sampler already runs (same pidfile, same arguments, writing to the
    same CSV) changes nothing. Otherwise the CSV is started afresh.
  - O(state=stopped) sends SIGTERM to the sampler's session (SIGKILL after O(stop_timeout)
    seconds), removes the pidfile and returns the per-GPU summary of the CSV. It works whatever
    happened to the benchmark; with no sampler running it changes nothing and still returns the
    summary of the CSV when there is one.
  - When nvidia-smi is missing, O(state=started) returns C(skipped) with the reason and starts
    nothing. Only O(state=started) runs O(nvidia_smi); O(state=stopped) finds the sampler
    through O(pidfile).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_nvidia_smi
options:
  state:
    description: Whether the sampler should run.
    type: str
    choices: [started, stopped]
    required: true
  path:
    description:
      - The telemetry CSV on the node, normally beside the benchmark's ledger record. Its folder
        must exist.
    type: path
    required: true
  pidfile:
    description: Where the sampler's pid is kept. When not set, C(<path>.pid).
    type: path
  interval_ms:
    description: Milliseconds between samples (nvidia-smi's C(-lms)). Used by O(state=started).
    type: int
    default: 1000
  start_timeout:
    description: Seconds to wait for the first sample after starting.
    type: int
    default: 30
  stop_timeout:
    description: Seconds to wait after SIGTERM before SIGKILL, and after SIGKILL.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    details: Reports whether the sampler would be started or stopped; starts and stops nothing.
  idempotent:
    support: full
    details: A second O(state=started) or O(state=stopped) reports no change.
notes:
  - Linux only (reads /proc). Needs only the Python standard library on the node.
"""

EXAMPLES = r"""
---
- name: Start GPU telemetry beside the ledger record
  gpu_telemetry:
    state: started
    path: "{{ sglang_bench_results_dir }}/{{ sglang_bench_launch['tier'] }}-c{{ item }}.gpu.csv"

- name: Stop GPU telemetry and keep the summary
  gpu_telemetry:
    state: stopped
    path: "{{ sglang_bench_results_dir }}/{{ sglang_bench_launch['tier'] }}-c{{ item }}.gpu.csv"
  register: sglang_bench_gpu_telemetry
"""

RETURN = r"""
path:
  description: The CSV file.
  returned: always
  type: str
  sample: /root/sglang-lab/results/baseline-c256.gpu.csv
pidfile:
  description: The pidfile.
  returned: always
  type: str
  sample: /root/sglang-lab/results/baseline-c256.gpu.csv.pid
pid:
  description: The sampler's pid (also its session id); null when none runs or would run.
  returned: always
  type: int
  sample: 41235
running:
  description: Whether the sampler runs when the module returns.
  returned: always
  type: bool
  sample: true
stopped_by:
  description: How the sampler ended, C(sigterm) or C(sigkill); null when nothing was stopped.
  returned: when state=stopped
  type: str
  sample: sigterm
summary:
  description:
    - Per GPU (key is the GPU index as a string) the mean and max of power draw (W), SM clock
      (MHz) and utilization (%), the peak memory used (MiB) and the number of samples. A value
      is null when no sample of that GPU had it (C([N/A])). Empty when the CSV has no row.
  returned: when state=stopped
  type: dict
  sample:
    "0":
      power_w_mean: 612.4
      power_w_max: 699.1
      sm_clock_mhz_mean: 1980.0
      sm_clock_mhz_max: 1980
      utilization_pct_mean: 97.2
      utilization_pct_max: 100
      memory_used_mib_peak: 131072
      samples: 120
sampler_messages:
  description:
    - What the sampler printed besides samples (its stderr and non-sample lines in the CSV, last
      4000 characters); empty when nothing.
  returned: when state=stopped
  type: str
  sample: ""
skipped:
  description: True when O(state=started) found no nvidia-smi; C(msg) says why.
  returned: when skipped
  type: bool
  sample: true
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpu_telemetry import (
    default_paths,
    process_alive,
    read_pidfile,
    runs_argv,
    sampler_argv,
    sampler_messages,
    sampler_pid,
    start_sampler,
    stop_sampler,
    summarize,
    wait_for_first_sample,
)
from ansible.module_utils.nvidia_smi import resolve_nvidia_smi


def _started(module, result, csv_path, pidfile, stderr_path):
    params = module.params
    nvidia_smi = resolve_nvidia_smi(params["nvidia_smi"])
    if nvidia_smi is None:
        module.exit_json(
            skipped=True,
            msg=f"gpu_telemetry: no telemetry: nvidia-smi not found ({params['nvidia_smi']!r} is not an "
            "executable file nor a command on PATH).",
            **result,
        )
    folder = os.path.dirname(csv_path)
    if not os.path.isdir(folder):
        module.fail_json(
            msg=f"gpu_telemetry: the folder of path {csv_path} does not exist; create it first "
            "(the benchmark's results folder).",
            **result,
        )
    argv = sampler_argv(nvidia_smi, params["interval_ms"])
    pid = sampler_pid(pidfile, csv_path)
    if pid is not None and runs_argv(pid, argv):
        result.update(pid=pid, running=True)
        module.exit_json(**result)

    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    if pid is not None:
        # A sampler for this CSV with other settings (interval, nvidia-smi path): replace it.
        stop_sampler(pid, params["stop_timeout"])
    pid = start_sampler(argv, csv_path, pidfile, stderr_path)
    result["pid"] = pid
    if not wait_for_first_sample(csv_path, pid, params["start_timeout"]):
        if process_alive(pid):
            ending = f"was stopped ({stop_sampler(pid, params['stop_timeout'])}) after {params['start_timeout']} s"
        else:
            ending = "exited"
        os.unlink(pidfile)
        printed = sampler_messages(csv_path, stderr_path) or "(nothing)"
        module.fail_json(
            msg=f"gpu_telemetry: the sampler ({' '.join(argv)}) wrote no sample to {csv_path} and {ending}. "
            f"It printed: {printed}. Run gpu_facts on this node to see the GPU state.",
            **result,
        )
    result["running"] = True
    module.exit_json(**result)


def _stopped(module, result, csv_path, pidfile, stderr_path):
    params = module.params
    recorded = read_pidfile(pidfile)
    pid = sampler_pid(pidfile, csv_path)
    result["stopped_by"] = None
    if pid is not None or os.path.exists(pidfile):
        # A running sampler to stop, or the pidfile of one that died: both are removed.
        result["changed"] = True
        result["pid"] = pid if pid is not None else recorded
        if not module.check_mode:
            if pid is not None:
                result["stopped_by"] = stop_sampler(pid, params["stop_timeout"])
            os.unlink(pidfile)
            if os.path.exists(stderr_path) and os.path.getsize(stderr_path) == 0:
                os.unlink(stderr_path)
    result["running"] = bool(module.check_mode and pid is not None)
    result["summary"] = summarize(csv_path)
    result["sampler_messages"] = sampler_messages(csv_path, stderr_path)
    module.exit_json(**result)


def main():
    argument_spec = dict(
        state=dict(type="str", required=True, choices=["started", "stopped"]),
        path=dict(type="path", required=True),
        pidfile=dict(type="path"),
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        interval_ms=dict(type="int", default=1000),
        start_timeout=dict(type="int", default=30),
        stop_timeout=dict(type="int", default=10),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params
    for name in ("interval_ms", "start_timeout", "stop_timeout"):
        if params[name] < 1:
            module.fail_json(msg=f"gpu_telemetry: option {name} must be at least 1, got {params[name]}.")

    csv_path = os.path.abspath(params["path"])
    pidfile, stderr_path = default_paths(csv_path, params["pidfile"] and os.path.abspath(params["pidfile"]))
    result = dict(changed=False, path=csv_path, pidfile=pidfile, pid=None, running=False)
    if params["state"] == "started":
        _started(module, result, csv_path, pidfile, stderr_path)
    else:
        _stopped(module, result, csv_path, pidfile, stderr_path)


if __name__ == "__main__":
    main()
