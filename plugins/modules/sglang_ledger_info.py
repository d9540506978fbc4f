#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_ledger_info
short_description: Answer the experiment's questions about a host's ledger
version_added: "1.0.0"
description:
  - Reads the JSONL ledger (docs/ledger.md) on the target host and answers
    the queries the experiment cycle asks, in one place - the last record
    of the host (or the one with O(record_id)), its last known-good tier,
    and its latest successful baseline record.
  - The last known-good tier is the tier of the host's latest successful
    record, else O(baseline_tier) - the tier role sglang_experiment starts
    again after a failure.
  - Torn or foreign lines are skipped and reported in C(problems); a missing
    ledger is an empty one. Never writes.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_facts
options:
  ledger:
    description: Path of the ledger on the target host.
    type: path
    required: true
  host:
    description: The inventory host whose records count (records name their host).
    type: str
    required: true
  record_id:
    description: Return this record as C(record) instead of the host's last one.
    type: str
  baseline_tier:
    description: The baseline's tier id, and the known-good tier when the host has no successful record.
    type: str
    default: baseline
  restore:
    description:
      - Also say what the experiment's restore starts (C(restore) in the result;
        module_utils/sglang_ledger.py restore_plan) - the last good record's launch
        script, verified by sha256 on this host (the kept copy in the archive
        first, then the script), its recorded environment without redacted values,
        and the patches its kept C(.json) records. Reads the two scripts and the
        C(.json); writes nothing.
    type: bool
    default: false
  tiers:
    description:
      - The tier catalog (tier id to its entry, as role sglang_launch loads it);
        a restore whose kept C(.json) cannot be read takes the tier's
        C(patches) from here.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Ask the ledger for the record just written and the tier to restore
  sglang_ledger_info:
    ledger: /var/lib/sglang-lab/results/ledger.jsonl
    host: "{{ inventory_hostname }}"
  register: ledger_info

- name: Show the last known-good tier
  ansible.builtin.debug:
    msg: "{{ ledger_info.ansible_facts.sglang_ledger_info.last_good_tier }}"
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_ledger_info:
      description:
        - C(count) (the host's records), C(record) (the host's last record,
          or the one asked for; null when none), C(last_good_tier),
          C(last_good_record_id), C(baseline) (the latest successful record
          of O(baseline_tier); null when none), C(problems) (skipped lines),
          and with O(restore) C(restore) - C(tier), C(record_id),
          C(from_record) (false when there is nothing to restore from; render C(tier)
          fresh), C(script) (the verified path, null when none has the
          recorded bytes), C(script_sha256), C(patches), C(patches_from)
          (C(kept) or C(catalog)), C(env), C(checked) (each path and its
          sha256), C(problem) (why the restore must refuse, else null) and
          C(msg).
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_ledger import ledger_info, read_ledger, restore_plan
from ansible.module_utils.sglang_process import file_sha256_or_none


def main():
    argument_spec = dict(
        ledger=dict(type="path", required=True),
        host=dict(type="str", required=True),
        record_id=dict(type="str"),
        baseline_tier=dict(type="str", default="baseline"),
        restore=dict(type="bool", default=False),
        tiers=dict(type="dict", default={}),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    try:
        records, problems = read_ledger(p["ledger"])
    except OSError as exc:
        module.fail_json(
            msg="sglang_ledger_info: cannot read {}: {}; check sglang_bench_results_dir.".format(p["ledger"], exc)
        )
    info = ledger_info(records, p["host"], record_id=p["record_id"], baseline_tier=p["baseline_tier"])
    if p["record_id"] and info["record"] is None:
        module.fail_json(
            msg="sglang_ledger_info: record {} of host {} is not in {}.".format(p["record_id"], p["host"], p["ledger"])
        )
    info["problems"] = problems
    if p["restore"]:
        info["restore"] = restore_plan(records, p["host"], baseline_tier=p["baseline_tier"],
                                       tiers=p["tiers"], sha256_of=file_sha256_or_none)
    module.exit_json(changed=False, ansible_facts={"sglang_ledger_info": info})


if __name__ == "__main__":
    main()
