#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_campaign_plan
short_description: Plan what is left of a campaign on a host, from its ledger
version_added: "1.0.0"
description:
  - Expands a checked campaign (filter sglang_campaign_load) into its cells - every
    (arm, workload, repeat) in run order - and gives each its content key, a sha256 of the
    launch script, the server environment, the resolved versions, the resolved workload and
    the seed (module_utils/sglang_campaign.py; docs/campaign.md).
  - Reads the host's ledger, the campaign's state. A cell whose latest record with the same
    key is final (a success, or a failure of a deterministic class) is C(done) and is not run
    again; every other cell is C(pending), and the pending cells are grouped into server
    starts.
  - Resolves every workload's benchmark settings first (module_utils/sglang_bench_settings.py)
    and fails naming each bad one, before anything is touched.
  - Warns when a done cell's record was measured on a node whose fingerprint (hostname, kernel,
    project revision, GPUs, SGLang version) differs from this one.
  - Never writes.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
options:
  campaign:
    description: The campaign as filter sglang_campaign_load returns it (checked, defaults filled in).
    type: dict
    required: true
  launches:
    description:
      - Per tier of the campaign, what was validated - C(script_sha256) (the rendered launch
        script's), C(env) (the server environment) and C(versions).
    type: dict
    required: true
  settings_data:
    description: The benchmark settings file's content (data/benchmark.yml).
    type: dict
    required: true
  settings_overrides:
    description: The inventory's sglang_bench_* overrides (null = the file's value).
    type: dict
    default: {}
  settings_file:
    description: The settings file's path, named in errors and recorded.
    type: str
  ledger:
    description: Path of the host's ledger.
    type: path
    required: true
  host:
    description: The inventory host whose records count.
    type: str
    required: true
  slo_output:
    description: The host's SLO searches file (role sglang_bench's sglang_bench_slo_output); a missing one is empty.
    type: path
  fingerprint:
    description:
      - What is known of the node besides its hostname and kernel, which the module reads itself
        (C(git_revision), C(gpus), C(sglang_version)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Plan the campaign
  sglang_campaign_plan:
    campaign: "{{ 'data/campaigns/demo.yml' | sglang_campaign_load(schema, tier_ids) }}"
    launches: "{{ launches }}"
    settings_data: "{{ lookup('ansible.builtin.file', 'data/benchmark.yml') | from_yaml }}"
    ledger: /var/lib/sglang-lab/results/ledger.jsonl
    host: "{{ inventory_hostname }}"
  register: plan
"""

RETURN = r"""
plan:
  description:
    - C(cells) (every cell - C(cell), C(arm), C(role), C(tier), C(workload), C(repeat), C(index),
      C(key), C(state) C(done) or C(pending), and C(record_id)/C(status) when done or
      C(attempt)/C(previous_failure) when pending), C(groups) (the server starts to run, each
      with its C(cells)), C(counts) (total, done, failed, pending, retrying, starts),
      C(warnings), C(mean_cell_seconds) (of this campaign's earlier records, for the ETA),
      C(calibration) (the calibration cell, its record when final, else the group to run; null
      without calibration), C(slo_search) (the SLO search's key and whether it is done; null
      without one).
  returned: success
  type: dict
workloads:
  description: Each workload's resolved benchmark settings, by workload name.
  returned: success
  type: dict
fingerprint:
  description: The node's fingerprint as recorded in each cell's record.
  returned: success
  type: dict
"""

import platform
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_bench_settings import SettingsError, resolve_settings
from ansible.module_utils.sglang_campaign import plan
from ansible.module_utils.sglang_ledger import read_ledger


def main():
    argument_spec = dict(
        campaign=dict(type="dict", required=True),
        launches=dict(type="dict", required=True),
        settings_data=dict(type="dict", required=True),
        settings_overrides=dict(type="dict", default={}),
        settings_file=dict(type="str"),
        ledger=dict(type="path", required=True),
        host=dict(type="str", required=True),
        fingerprint=dict(type="dict", default={}),
        slo_output=dict(type="path"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    campaign = p["campaign"]
    workloads, problems = {}, []
    for workload in campaign["workloads"]:
        try:
            workloads[workload["name"]] = resolve_settings(
                p["settings_data"], p["settings_overrides"], p["settings_file"], workload.get("settings")
            )
        except SettingsError as exc:
            problems += [f"workload {workload['name']}: {problem}" for problem in exc.problems]
    missing = sorted({t for t in [campaign["baseline"], *campaign["tiers"]]} - set(p["launches"]))
    if missing:
        problems.append(f"no validated launch for tier(s) {', '.join(missing)}")
    if problems:
        module.fail_json(msg="sglang_campaign_plan: the campaign cannot run: " + "; ".join(problems) + ".")
    try:
        records, skipped = read_ledger(p["ledger"])
    except OSError as exc:
        module.fail_json(msg=f"sglang_campaign_plan: cannot read {p['ledger']}: {exc}; check sglang_bench_results_dir.")
    slo_records = []
    if p["slo_output"]:
        try:
            slo_records, _skipped = read_ledger(p["slo_output"])
        except OSError as exc:
            module.fail_json(msg=f"sglang_campaign_plan: cannot read {p['slo_output']}: {exc}.")
    fingerprint = {"hostname": socket.gethostname(), "kernel": platform.release(), **p["fingerprint"]}
    result = plan(campaign, p["launches"], workloads, records, p["host"], fingerprint, slo_records)
    result["ledger_problems"] = skipped
    for warning in result["warnings"]:
        module.warn(warning)
    module.exit_json(changed=False, plan=result, workloads=workloads, fingerprint=fingerprint)


if __name__ == "__main__":
    main()
