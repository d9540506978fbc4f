#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
---
module: sglang_launch_script
short_description: Write a tier's launch script, and keep it by content with who set each of its flags
description:
  - Writes O(content) (the launch template rendered on the controller, role sglang_launch's render
    step) to O(path) after C(bash -n) accepted it, creating the script's directory (mode
    O(dir_mode)) when missing. A script that already holds these bytes and O(mode) is left alone.
  - With O(archive), copies the script to C(<script's directory>/archive/<tier>-<sha256[:16]>.sh)
    (mode 0750) and writes beside it C(<tier>-<sha256[:16]>.json) (mode 0640) with the tier, the
    script's path and sha256 and O(meta) (the launch hash, the patches and who set each flag), so
    the ledger can record the flag sources and a restore can start the last good tier from the
    bytes that worked.
  - Every file is written to a temporary file in its own directory and renamed over the old one,
    so a reader never sees half a file.
  - One module call for what file, template (stat and copy) and the archive's own call did, so a
    cycle runs three module calls fewer.
version_added: "1.0.0"
extends_documentation_fragment:
  - sglang_lab_attributes
options:
  path:
    description: The launch script (role sglang_launch's C(<sglang_launch_dir>/<tier>.sh)).
    type: path
    required: true
  content:
    description: The script's text; C(bash -n) must accept it, else nothing is written.
    type: str
    required: true
  mode:
    description: The script's mode (C(sglang_launch_script_mode)).
    type: raw
    default: "0750"
  dir_mode:
    description: The mode of the script's directory when the module creates it.
    type: raw
    default: "0750"
  archive:
    description: Also keep the script by content in C(archive/) beside it, with O(meta).
    type: bool
    default: false
  tier:
    description: The tier id; the archive's file names start with it. Required with O(archive).
    type: str
  meta:
    description:
      - What the archive's C(.json) records besides tier, script and script_sha256 (role
        sglang_launch passes C(hash), C(patches) and C(flag_sources) of the launch).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: Reports what it would write, and checks O(content) with C(bash -n); writes nothing.
  diff_mode:
    support: full
    details: The old and the new script text when O(content) changes it.
  idempotent:
    support: full
    details: A second run with the same content, mode and meta finds every file as it should be.
"""

EXAMPLES = r"""
- name: Render the launch script and keep it by content
  sglang_launch_script:
    path: /opt/sglang-lab/launch/t03-single-batch-overlap.sh
    content: "{{ lookup('ansible.builtin.template', 'launch_script.sh.j2') }}"
    mode: "0750"
    archive: true
    tier: t03-single-batch-overlap
    meta:
      hash: "{{ sglang_launch_result.hash }}"
      patches: "{{ sglang_launch_result.patches }}"
      flag_sources: "{{ sglang_launch_result.flag_sources }}"
"""

RETURN = r"""
path:
  description: The launch script.
  returned: always
  type: path
script_sha256:
  description: The sha256 of the script's bytes, as written.
  returned: always
  type: str
script_changed:
  description: Whether the script changed (its bytes or its mode).
  returned: always
  type: bool
archived_script:
  description: The path of the kept copy of the script.
  returned: with O(archive)
  type: path
archived_meta:
  description: The path of the C(.json) with the flag sources.
  returned: with O(archive)
  type: path
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_launch_file import SCRIPT_OPTIONS, launch_script_writes, read_bytes, write_all


def main():
    module = AnsibleModule(
        argument_spec=dict(SCRIPT_OPTIONS),
        required_if=[("archive", True, ("tier",))],
        supports_check_mode=True,
    )
    p = module.params
    name = "sglang_launch_script"
    old = read_bytes(p["path"])
    result, writes, problem = launch_script_writes(p, module.run_command)
    if problem:
        module.fail_json(msg=f"{name}: {problem}")
    if result["script_changed"] and module._diff:
        result["diff"] = {"before": (old or b"").decode("utf-8", "replace"), "after": p["content"],
                          "before_header": p["path"], "after_header": p["path"]}
    if module.check_mode or not writes:
        module.exit_json(**result)
    try:
        write_all(p, writes)
    except OSError as exc:
        module.fail_json(msg=f"{name}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
