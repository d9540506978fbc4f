#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_bench_compare
short_description: Compare a ledger record with the baseline, with an interval for each verdict
version_added: "1.0.0"
description:
  - Reads the JSONL ledger and compares one record, concurrency by
    concurrency, with the baseline tier's records from the same host, target
    kind, model and workload (dataset, input and output length, range ratio).
  - The arms are server starts - the record and the earlier successful records
    of its tier with the same launch script, against the baseline's records
    with the latest baseline script - compared by the campaign's method
    (module_utils/sglang_interval.py, docs/campaign-statistics.md) - the ratio
    of geometric means with Welch's t interval on the log scale, simultaneous
    at O(confidence) over the record's tested comparisons (output tok/s and
    mean TPOT per concurrency; total tok/s is shown and follows output tok/s).
  - The verdict is C(better) or C(worse) only when the interval excludes 0,
    else C(indistinguishable); C(no_verdict) with one server start a side (the
    change is still shown) and for repeats within one start a side, whose
    interval is shown but does not cover start-to-start variation.
    TPOT is better when lower. There is no fixed noise threshold.
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
  confidence:
    description: Simultaneous confidence of the intervals (data/benchmark.yml confidence), between 0 and 1.
    type: float
    default: 0.95
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
    confidence: 0.95
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_bench_compare:
      description:
        - record_id, tier, host, status, confidence, baseline_tier, rule,
          family (size, confidence, comparison_confidence), and points - per
          concurrency the scope (server_starts or within_server), the record
          ids of both arms, the host's A/A floor (aa_floor, or null) and, per
          metric (output_throughput, total_throughput, mean_tpot_ms),
          in_family, candidate and baseline summaries (n, median, min, max,
          spread_pct), delta_pct, ci_low_pct, ci_high_pct, verdict (better,
          worse, indistinguishable, no_verdict, no_baseline, no_data), reason
          and notes; quality, the output-quality check's comparison
          (module_utils/sglang_quality.py quality_comparison - verdict
          C(outputs unchanged), C(outputs changed (agreement 62 % vs A/A 100 %)),
          C(no baseline outputs), C(quality check off) or C(quality check failed (...)),
          below_floor, baseline_record_id, single, batch, aa; docs/quality.md);
          table, the same as fixed-width text (labelled SYNTHETIC
          for a simulator record), the table the experiment prints, with the
          quality verdict under the speed rows.
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_compare import confidence_problem, ledger_comparison
from ansible.module_utils.sglang_ledger import read_ledger


def main():
    argument_spec = dict(
        ledger=dict(type="path", required=True),
        record_id=dict(type="str"),
        confidence=dict(type="float", default=0.95),
        baseline_tier=dict(type="str", default="baseline"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    problem = confidence_problem(p["confidence"])
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
    comparison = ledger_comparison(record, records, p["confidence"], p["baseline_tier"], problems)
    module.exit_json(changed=False, ansible_facts={"sglang_bench_compare": comparison})


if __name__ == "__main__":
    main()
