#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_bench_compare
short_description: Compare a ledger record with the latest successful baseline
version_added: "1.0.0"
description:
  - Reads the JSONL ledger and compares one record, concurrency by
    concurrency, with the latest successful record of the baseline tier from
    the same host, target kind, model and workload (dataset, input and output
    length, range ratio).
  - For output tok/s, total tok/s and mean TPOT it returns the median over
    repeats with its spread (min/max; IQR from four repeats), the change in
    percent and a verdict - C(better), C(worse) or C(within_noise) against
    O(threshold_pct), which the result states. TPOT is better when lower.
  - Reads only; never changes the ledger.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_facts
options:
  record_id:
    description: The record to compare; the ledger's last record when omitted.
    type: str
  ledger:
    description: Path of the ledger.
    type: path
    required: true
  threshold_pct:
    description: Noise threshold in percent (data/benchmark.yml noise_threshold_pct).
    type: float
    required: true
  baseline_tier:
    description: Tier id of the baseline.
    type: str
    default: baseline
seealso:
  - module: sglang_ledger_append
"""

EXAMPLES = r"""
- name: Compare the record just appended
  sglang_bench_compare:
    ledger: /var/lib/sglang-lab/results/ledger.jsonl
    record_id: "{{ record.record_id }}"
    threshold_pct: 5
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_bench_compare:
      description:
        - record_id, tier, host, status, threshold_pct, baseline_tier, rule, and
          points - per concurrency the baseline record id and, per metric
          (output_throughput, total_throughput, mean_tpot_ms), candidate and
          baseline summaries (n, median, min, max, spread_pct, q1/q3/iqr),
          delta_pct and verdict (better, worse, within_noise, no_baseline,
          no_data); table, the same as fixed-width text (labelled SYNTHETIC
          for a simulator record), the table the experiment prints.
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_compare import ledger_comparison, threshold_problem
from ansible.module_utils.sglang_ledger import read_ledger


def main():
    argument_spec = dict(
        ledger=dict(type="path", required=True),
        record_id=dict(type="str"),
        threshold_pct=dict(type="float", required=True),
        baseline_tier=dict(type="str", default="baseline"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    problem = threshold_problem(p["threshold_pct"])
    if problem:
        module.fail_json(msg="sglang_bench_compare: " + problem)
    try:
        records, problems = read_ledger(p["ledger"])
    except OSError as exc:
        module.fail_json(msg="sglang_bench_compare: cannot read {}: {}".format(p["ledger"], exc))
    if module.check_mode and (
        not records or (p["record_id"] and not any(r.get("record_id") == p["record_id"] for r in records))
    ):
        # In check mode the record step appended nothing: nothing to compare yet.
        module.exit_json(
            changed=False,
            msg="check mode: the record is not in the ledger yet; nothing to compare",
            ansible_facts={"sglang_bench_compare": None},
        )
    if not records:
        module.fail_json(
            msg="sglang_bench_compare: the ledger {} has no records; run the benchmark and record steps first.".format(
                p["ledger"]
            )
        )
    if p["record_id"]:
        matches = [r for r in records if r.get("record_id") == p["record_id"]]
        if not matches:
            module.fail_json(msg="sglang_bench_compare: record {} is not in {}.".format(p["record_id"], p["ledger"]))
        record = matches[-1]
    else:
        record = records[-1]
    comparison = ledger_comparison(record, records, p["threshold_pct"], p["baseline_tier"], problems)
    module.exit_json(changed=False, ansible_facts={"sglang_bench_compare": comparison})


if __name__ == "__main__":
    main()
