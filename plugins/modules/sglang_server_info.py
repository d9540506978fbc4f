#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What runs: the SGLang server of this host as facts, and why it died (classify)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_info
short_description: Report the SGLang server of this host as facts, and classify a dead server's log
version_added: "1.0.0"
description:
  - Reads the run state written by M(sglang_server) (C(state=started)) and checks it against the
    live system; sets the fact C(sglang_server) (under C(ansible_facts)).
  - Lists the processes of the server's session, the holder of the port, the health answer,
    GPU memory per GPU and the server's compute processes (where nvidia-smi exists), the
    experiment lock, and SGLang processes outside the recorded session (C(unmanaged)).
  - With O(classify), a recorded server that does not answer healthy gets
    O(classify_grace_seconds) to die, and its log is read with the crash catalog
    (O(ready.signatures)) as the ready-wait reads it, with the other O(ready) settings but its
    own deadline (O(classify_grace_seconds), not O(ready.timeout_seconds)); the class is in
    C(sglang_server.crash).
  - Changes nothing.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_facts
  - sglang_lab_server.server
  - sglang_lab_server.ready
  - sglang_lab_server.psutil
options:
  health:
    description: Probe the health endpoints (O(server.health_paths)).
    type: bool
    default: true
  gpu:
    description:
      - Read GPU memory with nvidia-smi (reported as unavailable where it is missing).
      - Not set - O(server.gpu_check).
    type: bool
  classify:
    description:
      - Classify why a recorded server that is not running healthy stopped answering (sets
        C(sglang_server.crash); null when it answered ready within the grace or none is recorded).
    type: bool
    default: false
  classify_grace_seconds:
    description: With O(classify), seconds the server may take to die before it counts as hung.
    type: float
    default: 30.0
attributes:
  facts:
    details: Sets C(ansible_facts.sglang_server).
"""

EXAMPLES = r"""
- name: Read the server status
  sglang_server_info:
    server:
      run_dir: /root/sglang-lab/run
      port: 8000

- name: Show the tier that runs
  ansible.builtin.debug:
    msg: "{{ ansible_facts['sglang_server']['tier'] }}"
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_server:
      description: >-
        running, tier, pid, sid, port, started_at, uptime_s, script, script_sha256, log,
        processes (pid, status, cmdline, rss_mib), port_holders, health (path, status, code),
        gpu (available, error, gpus, server_processes), lock, last (server.last.json),
        unmanaged (SGLang processes outside the session), wait (last ready-wait progress),
        exit_status, and with classify crash (tier, crash_class, crash_line, crash_line_number,
        excerpt, explanation, remedy, exit_status, log, msg; null when there is none).
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_server_ops import (
    READY_SPEC,
    require_psutil,
    run_info,
    server_option,
    settings,
    sub_option,
)


def main():
    argument_spec = dict(
        server=server_option(),
        health=dict(type="bool", default=True),
        gpu=dict(type="bool"),
        classify=dict(type="bool", default=False),
        classify_grace_seconds=dict(type="float", default=30.0),
        ready=sub_option(READY_SPEC),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_psutil(module)
    if module.params["classify"] and not module.params["ready"]["signatures"]:
        module.fail_json(msg="sglang_server_info: classify needs ready.signatures, the crash-signature catalog")
    run_info(module, settings(module.params, "ready"))


if __name__ == "__main__":
    main()
