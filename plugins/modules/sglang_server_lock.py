#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Per-host experiment lock: one experiment drives the SGLang server at a time.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_lock
short_description: Take or give back the per-host lock that lets one experiment drive the SGLang server
version_added: "1.0.0"
description:
  - The lock is C(<run_dir>/sglang.lock), a JSON record of its holder (token, pid, user, host,
    play, since); O(run_dir) is created mode 0750 if missing. A second experiment fails to take
    it, with a message naming the holder.
  - Taking the lock again with the same O(token) changes nothing; giving it back needs the token.
  - The holder pid is the ansible-playbook process among this module's ancestors when the
    controller is this host. A lock whose holder pid no longer runs (or was reused) is stale and
    is taken over, which RV(took_over) reports. When the controller is another machine the pid
    cannot be checked here; such a lock goes stale only after O(max_age_seconds), or with O(force).
requirements:
  - psutil (to check the holder pid)
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.run_dir
options:
  state:
    description: C(present) takes the lock, C(absent) gives it back.
    type: str
    choices: [present, absent]
    default: present
  token:
    description: Identifies the holder (the role draws one per play).
    type: str
    required: true
  play:
    description: Name recorded for the holder (the play name).
    type: str
    default: ""
  max_age_seconds:
    description: A lock older than this is stale even when its holder cannot be checked; 0 means never.
    type: int
    default: 86400
  force:
    description:
      - Take (or give back) the lock whoever holds it.
      - For a lock left by a crashed controller on another machine.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Reports whether the lock could be taken or given back; writes nothing.
  idempotent:
    support: full
    details: Taking a lock already held with the same token, or giving back a lock not held, changes nothing.
"""

EXAMPLES = r"""
- name: Take the experiment lock
  sglang_server_lock:
    run_dir: /root/sglang-lab/run
    token: "{{ __sglang_server_lock_token }}"
    play: "{{ ansible_play_name }}"
    state: present
"""

RETURN = r"""
holder:
  description: The lock record (after taking it; the other holder when refused).
  returned: always
  type: dict
  sample:
    token: 0b6f...
    pid: 81234
    user: root
    host: blackwell-01
    play: Start an SGLang tier
    since: "2026-05-01T10:00:00+00:00"
took_over:
  description: The stale record that was replaced and why, or null.
  returned: state=present
  type: dict
path:
  description: The lock file.
  returned: always
  type: str
lock_refused:
  description: True when another experiment holds the lock (RV(holder) names it); the module failed.
  returned: state=present, when refused
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_lock import LOCK_NAME, LOCK_SPEC, describe_holder, release, take


def main():
    argument_spec = dict(
        run_dir=dict(type="path", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        **LOCK_SPEC,
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    if p["state"] == "present":
        module.exit_json(**take(module, p["run_dir"], p))

    path = os.path.join(p["run_dir"], LOCK_NAME)
    if not os.path.isdir(p["run_dir"]):
        module.exit_json(changed=False, holder=None, path=path)
    result = release(path, p["token"], p["force"], module.check_mode)
    if not result["released"]:
        module.fail_json(
            msg=f"cannot give back the lock {path}: it is held by another experiment: "
            f"{describe_holder(result['holder'])}",
            holder=result["holder"],
            path=path,
        )
    module.exit_json(changed=result["changed"], holder=result["holder"], path=path)


if __name__ == "__main__":
    main()
