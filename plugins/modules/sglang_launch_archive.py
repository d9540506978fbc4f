#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
---
module: sglang_launch_archive
short_description: Keep a launch script by content, with who set each of its flags
description:
  - Copies the launch script O(script) to C(<script's directory>/archive/<tier>-<sha256[:16]>.sh)
    (mode 0750) and writes beside it C(<tier>-<sha256[:16]>.json) (mode 0640) with the tier, the
    script's path and sha256, the launch hash, the patches and O(sources) (who set each flag), so
    the ledger can record the flag sources and a restore can start the last good tier from the
    bytes that worked.
  - Creates the C(archive) directory (mode 0750) when missing. Each file is written to a
    temporary file in the same directory and renamed over the old one, so a reader never sees
    half a file; a file that already holds these bytes is left alone.
  - One task for what three file, copy and copy tasks did (role sglang_experiment's validate),
    so a cycle runs two module calls fewer.
version_added: "1.0.0"
extends_documentation_fragment:
  - sglang_lab_attributes
options:
  script:
    description: The rendered launch script (role sglang_launch's C(sglang_launch_result.script)).
    type: path
    required: true
  tier:
    description: The tier id; the archive's file names start with it.
    type: str
    required: true
  expected_sha256:
    description:
      - The sha256 the preflight read of O(script). When given and the script's bytes differ (the
        script changed between the check and the archive), the module fails and writes nothing.
    type: str
  meta:
    description:
      - What the C(.json) records besides tier, script and script_sha256 (role sglang_experiment
        passes C(hash), C(patches) and C(flag_sources) of the launch).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: Reads the script and reports what it would write; writes nothing.
  idempotent:
    support: full
    details: A second run with the same script and meta finds both files as they should be.
"""

EXAMPLES = r"""
- name: Keep the launch script and the sources of its flags
  sglang_launch_archive:
    script: /opt/sglang-lab/launch/t03-single-batch-overlap.sh
    tier: t03-single-batch-overlap
    expected_sha256: "{{ preflight.script_sha256 }}"
    meta:
      hash: "{{ sglang_launch_result.hash }}"
      patches: "{{ sglang_launch_result.patches }}"
      flag_sources: "{{ sglang_launch_result.flag_sources }}"
"""

RETURN = r"""
script_sha256:
  description: The sha256 of the archived script.
  returned: always
  type: str
archived_script:
  description: The path of the kept copy of the script.
  returned: always
  type: path
archived_meta:
  description: The path of the C(.json) with the flag sources.
  returned: always
  type: path
"""

import hashlib
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_ledger import launch_archive_paths


def meta_document(tier, script, sha256, meta):
    """The .json's bytes: the given meta with tier, script and script_sha256, sorted, indented."""
    document = dict(meta or {})
    document.update({"tier": tier, "script": script, "script_sha256": sha256})
    return (json.dumps(document, indent=4, sort_keys=True) + "\n").encode("utf-8")


def _same(path, data):
    try:
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False


def _write(path, data, mode):
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main():
    module = AnsibleModule(
        argument_spec=dict(
            script=dict(type="path", required=True),
            tier=dict(type="str", required=True),
            expected_sha256=dict(type="str"),
            meta=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        with open(p["script"], "rb") as handle:
            script = handle.read()
    except OSError as exc:
        module.fail_json(msg=f"sglang_launch_archive: cannot read the launch script {p['script']}: {exc}")
    sha256 = hashlib.sha256(script).hexdigest()
    if p["expected_sha256"] and p["expected_sha256"] != sha256:
        module.fail_json(
            msg=f"sglang_launch_archive: {p['script']} changed since it was checked (sha256 {sha256}, "
            f"checked {p['expected_sha256']}); something else writes the launch directory. Run the tier again.",
            script_sha256=sha256,
        )
    kept_script, kept_meta = launch_archive_paths(p["script"], p["tier"], sha256)
    meta = meta_document(p["tier"], p["script"], sha256, p["meta"])
    writes = [(path, data, mode) for path, data, mode in ((kept_script, script, 0o750), (kept_meta, meta, 0o640))
              if not _same(path, data)]
    result = dict(changed=bool(writes), script_sha256=sha256, archived_script=kept_script, archived_meta=kept_meta)
    if module.check_mode or not writes:
        module.exit_json(**result)
    try:
        os.makedirs(os.path.dirname(kept_script), mode=0o750, exist_ok=True)
        for path, data, mode in writes:
            _write(path, data, mode)
    except OSError as exc:
        module.fail_json(msg=f"sglang_launch_archive: cannot write the archive {os.path.dirname(kept_script)}: {exc}",
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
