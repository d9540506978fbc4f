#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Read-only GPU facts from nvidia-smi; logic in plugins/module_utils/nvidia_smi.py.

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Read the node's NVIDIA GPUs and the processes holding GPU memory
description:
  - Runs C(nvidia-smi --query-gpu=...) and C(nvidia-smi --query-compute-apps=...) in CSV mode and
    returns one fact, RV(ansible_facts.gpu_facts), with every GPU and every compute process.
  - Read-only; never reports a change.
  - When nvidia-smi is missing, or cannot talk to the driver (for example the NVML
    driver/library version mismatch after a driver upgrade without a reboot), the fact says
    C(available=false) with the reason and an error class, unless O(fail_on_missing=true).
  - Fields nvidia-smi prints as C([N/A]) or C([Not Supported]) become null. A field holding an
    error (C([GPU requires reset]), C([Unknown Error])) becomes null too and marks the GPU
    C(healthy=false), with the raw text in its C(problems).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_facts
  - sglang_lab_nvidia_smi
options:
  fail_on_missing:
    description:
      - Fail the task instead of returning C(available=false) when nvidia-smi is missing or
        cannot report the GPUs.
    type: bool
    default: false
  timeout:
    description:
      - Seconds one nvidia-smi query may take before it counts as failed (a GPU in a bad state
        can make nvidia-smi hang).
    type: int
    default: 60
attributes:
  facts:
    details: Returns facts under C(ansible_facts.gpu_facts).
notes:
  - Needs only the Python standard library on the node.
"""

EXAMPLES = r"""
---
- name: Read the GPUs
  gpu_facts:

- name: Show the memory used on each GPU
  ansible.builtin.debug:
    msg: "GPU {{ item.index }}: {{ item.memory_used_mib }} MiB used"
  loop: "{{ ansible_facts['gpu_facts']['gpus'] }}"
  loop_control:
    label: "{{ item.index }}"

- name: Preflight on a GPU node, failing when the driver cannot be reached
  gpu_facts:
    fail_on_missing: true
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    gpu_facts:
      description: What nvidia-smi reported.
      returned: always
      type: dict
      contains:
        available:
          description: True when nvidia-smi answered with at least one GPU.
          type: bool
          sample: true
        error:
          description:
            - Why the GPUs are not (or not fully) known; null when all went well.
            - Can be set together with C(available=true) when some GPUs answered and another did
              not, or when the process query failed.
          type: str
          sample: null
        error_class:
          description: null, C(missing) (no nvidia-smi), C(nvml_mismatch) (driver/library version
            mismatch) or C(failed) (any other failure, including a hang past O(timeout)).
          type: str
          sample: null
        nvidia_smi:
          description: The nvidia-smi path used (the option value when it was not found).
          type: str
          sample: /usr/bin/nvidia-smi
        count:
          description: Number of GPUs listed.
          type: int
          sample: 1
        gpus:
          description:
            - One entry per GPU, in nvidia-smi's order. Memory in MiB, power in W, clocks in MHz,
              utilization in %, temperature in C; null where nvidia-smi had no value.
            - C(healthy) is false when a field held an error; C(problems) maps those fields to the
              text nvidia-smi printed. C(processes) are the compute processes on this GPU.
          type: list
          elements: dict
          sample:
            - index: 0
              name: NVIDIA H200
              uuid: GPU-00000000-1111-2222-3333-444444444444
              bus_id: "00000000:00:06.0"
              driver: 580.159.04
              compute_cap: "9.0"
              memory_total_mib: 143771
              memory_used_mib: 0
              memory_free_mib: 143156
              utilization_pct: 0
              temperature_c: 33
              power_w: 124.3
              sm_clock_mhz: 555
              mem_clock_mhz: 3201
              healthy: true
              problems: {}
              processes: []
        processes:
          description: Every compute process holding GPU memory, with the index of its GPU
            (null when its GPU UUID is not among C(gpus), for example a MIG instance).
          type: list
          elements: dict
          sample:
            - pid: 422
              process_name: python3
              used_memory_mib: 8802
              gpu_uuid: GPU-00000000-1111-2222-3333-444444444444
              gpu_index: 0
        processes_known:
          description: True when the process query answered; an empty C(processes) proves that no
            process holds GPU memory only when this is true.
          type: bool
          sample: true
        messages:
          description: Lines nvidia-smi printed that are neither GPU nor process rows.
          type: list
          elements: str
          sample: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nvidia_smi import gpu_snapshot, subprocess_runner


def main():
    argument_spec = dict(
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        fail_on_missing=dict(type="bool", default=False),
        timeout=dict(type="int", default=60),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    timeout = module.params["timeout"]
    if timeout < 1:
        module.fail_json(msg=f"gpu_facts: option timeout must be at least 1 (seconds), got {timeout}.")

    snapshot = gpu_snapshot(subprocess_runner(timeout), module.params["nvidia_smi"])
    snapshot["count"] = len(snapshot["gpus"])

    if module.params["fail_on_missing"] and not snapshot["available"]:
        module.fail_json(
            msg=f"gpu_facts: no GPU could be read on this node ({snapshot['error_class']}): {snapshot['error']}",
            ansible_facts={"gpu_facts": snapshot},
        )
    module.exit_json(changed=False, ansible_facts={"gpu_facts": snapshot})


if __name__ == "__main__":
    main()
