#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_ledger_append
short_description: Append one experiment record to the JSONL ledger
version_added: "1.0.0"
description:
  - Builds a ledger record (schema_version 1, docs/ledger.md) for one
    experiment run of one tier - its benchmark points, its failure class if
    any step failed, and its provenance - and appends it as one line to the
    ledger on the target host.
  - The ledger is append-only. The line is written with one O_APPEND write
    under an exclusive lock and fsynced; earlier bytes are never rewritten.
    A record whose O(record_id) is already present is not appended again.
  - A run that failed still gets a record, with O(failure) (for example the
    crash class found in the server log) and whatever points completed.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_provenance
  - sglang_lab_workload
options:
  ledger:
    description: Path of the ledger on the target host; created when missing.
    type: path
    required: true
  mode:
    description: File mode of a newly created ledger.
    type: raw
    default: "0640"
  record_id:
    description:
      - Id of the record. Give one fixed per run so a retried task does not
        append twice; a fresh id is made when omitted.
    type: str
  run_id:
    description: Id of the experiment run.
    type: str
    required: true
  host:
    description: The inventory host name the record belongs to.
    type: str
    required: true
  tier:
    description: Tier id (C(baseline), C(t01-piecewise-cuda-graph), ...).
    type: str
    required: true
  points:
    description: Points as returned by module sglang_bench (ok and failed).
    type: list
    elements: dict
    default: []
  failure:
    description:
      - The run's failure - C(class) (a crash class from
        data/crash_signatures.yml or a benchmark class such as
        C(warmup_failed)), C(step), C(message) and any evidence. When
        omitted, the failure is decided from O(crash), O(failed_task),
        O(failed_result) and the points (module_utils/sglang_failure.py
        decide_failure, the one place that decides it).
    type: dict
  failed_task:
    description:
      - C(ansible_failed_task) of the rescue that records a failed run (its
        C(name) and C(tags); the C(sglang_experiment_<step>) tag names the step).
    type: dict
  failed_result:
    description: C(ansible_failed_result) of that rescue (C(msg), C(failure_class), C(port), ...).
    type: dict
  crash:
    description:
      - The server's classified crash, C(sglang_server_crash) as role
        sglang_server's ready-wait sets it (C(crash_class), C(crash_line),
        C(explanation), C(remedy), C(excerpt), ...).
    type: dict
  started_at:
    description: When the run started (ISO 8601 UTC).
    type: str
  provenance:
    description:
      - Provenance from the last sglang_bench call. Keys it lacks are
        collected now when O(collect_provenance) is true.
    type: dict
    default: {}
  server_address:
    description: Address of the SGLang server, for C(/server_info).
    type: str
    default: 127.0.0.1
  server_port:
    description: Port of the SGLang server.
    type: int
    default: 30000
  model:
    description: Model path or name recorded when C(/server_info) is not available.
    type: str
  warmup:
    description:
      - Module sglang_warmup's summary of the warm-up before the points (its rounds per
        concurrency and their seconds), kept as the record's C(warmup).
    type: dict
  campaign:
    description:
      - The campaign cell this run is (name, cell, key, arm, role, tier, workload, repeat,
        attempt, fingerprint; see docs/campaign.md), kept as the record's C(campaign). The
        campaign's resume reads it back.
    type: dict
  quality:
    description:
      - The output-quality check's block (M(sglang_bench)'s C(quality) option; the greedy outputs of
        data/quality.yml's prompts), kept as
        the record's C(quality), with C(comparison) added - the outputs held against the host's latest
        earlier baseline record of the same prompt set, and the A/A floor (docs/quality.md). The
        comparison is made from the ledger as it is before the append, so the record keeps it.
    type: dict
  compare:
    description:
      - Also compare the record with the baseline, as module
        M(sglang_bench_compare) does, from the ledger this module just wrote, and return it as
        the fact C(sglang_bench_compare) (null in check mode). One module call where the record
        and the comparison took two (role sglang_experiment's record step asks for it).
    type: dict
    suboptions:
      confidence:
        type: float
        default: 0.95
        description: The simultaneous confidence of the comparison's intervals, as for M(sglang_bench_compare).
      baseline_tier:
        type: str
        default: baseline
        description: The tier compared against, as for M(sglang_bench_compare).
  controller_copy:
    description:
      - Where the controller keeps its copy of the ledger (role sglang_bench passes
        C(<sglang_bench_controller_results_dir>/<inventory_hostname>/ledger.jsonl)). Handled by the
        action plugin of the same name on the controller, after the append, the module itself only
        returns C(ledger_checksum) - the action copies the ledger over the task's connection, checks
        the checksum and renames the copy into place, so the fetch step has nothing left to do.
      - Nothing is copied in check mode, after a failure, or with become (the fetch step then copies
        it); C(controller_copy) in the result says what happened.
    type: path
attributes:
  check_mode:
    support: full
    details: Builds and validates the record and returns it; appends nothing.
  idempotent:
    support: partial
    details: Idempotent for a fixed O(record_id); a fresh id always appends.
seealso:
  - module: sglang_bench
  - module: sglang_bench_compare
"""

EXAMPLES = r"""
- name: Record a successful run
  sglang_ledger_append:
    ledger: /var/lib/sglang-lab/results/ledger.jsonl
    record_id: "{{ run_record_id }}"
    run_id: "{{ run_id }}"
    host: "{{ inventory_hostname }}"
    tier: baseline
    workload: "{{ bench_workload }}"
    points: "{{ bench_points }}"

- name: Record a run whose server crashed while loading
  sglang_ledger_append:
    ledger: /var/lib/sglang-lab/results/ledger.jsonl
    run_id: "{{ run_id }}"
    host: "{{ inventory_hostname }}"
    tier: t01-piecewise-cuda-graph
    workload: "{{ bench_workload }}"
    failure:
      class: dynamo_fp4_jit
      step: start
      message: torch._dynamo.exc.Unsupported while capturing graphs
"""

RETURN = r"""
record:
  description: The record as appended (or as it would be, in check mode).
  returned: always
  type: dict
record_id:
  description: Id of the record.
  returned: always
  type: str
ledger:
  description: Path of the ledger.
  returned: always
  type: str
appended:
  description: Whether a line was appended (false in check mode or when the id was present).
  returned: always
  type: bool
offset:
  description: Byte offset where the record's line starts.
  returned: when appended
  type: int
bytes:
  description: Bytes written.
  returned: always
  type: int
ledger_checksum:
  description:
    - The sha1 of the whole ledger after the append (Ansible's checksum).
    - The action checks its copy against it.
  returned: when the ledger exists
  type: str
controller_copy:
  description:
    - With O(controller_copy) (set by the action plugin) C(path), C(copied), C(in_sync) (the controller's copy
      is the host's ledger now) and C(reason) (why nothing was copied, else null).
  returned: with O(controller_copy), unless the module failed
  type: dict
ansible_facts:
  description: With O(compare), the comparison.
  returned: with O(compare)
  type: dict
  contains:
    sglang_bench_compare:
      description: What M(sglang_bench_compare) returns for the record (null in check mode).
      type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_compare import confidence_problem, ledger_comparison
from ansible.module_utils.sglang_ledger import (
    PROVENANCE_KEYS,
    append_record,
    build_record,
    encode_record,
    launch_flag_sources,
    ledger_file_mode,
    new_record_id,
    read_ledger,
    utc_now,
    validate_record,
)
from ansible.module_utils.sglang_provenance import PROVENANCE_ARGUMENT_SPEC, provenance_from_params
from ansible.module_utils.sglang_quality import quality_comparison
from ansible.module_utils.sglang_workload_options import WORKLOAD_ARGUMENT_SPEC, workload_problems


def _merge_provenance(module):
    p = module.params
    given = dict(p["provenance"] or {})
    missing = [k for k in PROVENANCE_KEYS if given.get(k) in (None, {}, [])]
    if not p["collect_provenance"] or not missing:
        return given
    fresh = provenance_from_params(
        module,
        host_key="server_address",
        port_key="server_port",
        model=p["model"],
        fetch_info="server_info" in missing,
        server_info_timeout=5.0,
    )
    merged = dict(given)
    for key in missing:
        if fresh.get(key) not in (None, {}, []):
            merged[key] = fresh[key]
    # Without a live server, the simulator flag comes from the launch argv.
    if merged.get("target_is_simulator") is None:
        merged["target_is_simulator"] = fresh.get("target_is_simulator")
    # A model path from the module beats a null one from server_info.
    model = merged.get("model") or {}
    if isinstance(model, dict) and not model.get("model_path") and p["model"]:
        merged["model"] = dict(model, model_path=p["model"])
    reasons = dict(given.get("reasons") or {})
    reasons.update(fresh.get("reasons") or {})
    merged["reasons"] = reasons
    return merged


def _comparison(module, record):
    """The record as the ledger now holds it (its line for this record id, the last, as module
    sglang_bench_compare picks it) compared with the latest successful baseline of the ledger just written."""
    p = module.params
    try:
        records, problems = read_ledger(p["ledger"])
    except OSError as exc:
        module.fail_json(msg=f"sglang_ledger_append: the record was appended, but the ledger {p['ledger']} "
                         f"cannot be read back to compare it: {exc}")
    kept = [r for r in records if r.get("record_id") == record["record_id"]]
    return ledger_comparison(kept[-1] if kept else record, records, p["compare"]["confidence"],
                             p["compare"]["baseline_tier"], problems)


def _quality_comparison(module, record):
    """The record's outputs against the ledger's baselines before it (the comparison kept in the record)."""
    p = module.params
    baseline_tier = (p["compare"] or {}).get("baseline_tier") or "baseline"
    try:
        records, _ = read_ledger(p["ledger"])
    except OSError as exc:
        return {"status": "failed", "verdict": f"quality check failed (the ledger cannot be read: {exc})"}
    comparison = quality_comparison(record, records, baseline_tier)
    # The block itself holds these already.
    for key in ("status", "prompt_set", "batch_vs_single", "seconds", "error"):
        comparison.pop(key, None)
    return comparison


def main():
    argument_spec = dict(
        ledger=dict(type="path", required=True),
        mode=dict(type="raw", default="0640"),
        record_id=dict(type="str"),
        run_id=dict(type="str", required=True),
        host=dict(type="str", required=True),
        tier=dict(type="str", required=True),
        points=dict(type="list", elements="dict", default=[]),
        failure=dict(type="dict"),
        failed_task=dict(type="dict"),
        failed_result=dict(type="dict"),
        crash=dict(type="dict"),
        started_at=dict(type="str"),
        provenance=dict(type="dict", default={}),
        server_address=dict(type="str", default="127.0.0.1"),
        server_port=dict(type="int", default=30000),
        model=dict(type="str"),
        warmup=dict(type="dict"),
        campaign=dict(type="dict"),
        quality=dict(type="dict"),
        controller_copy=dict(type="path"),
        compare=dict(
            type="dict",
            options=dict(
                confidence=dict(type="float", default=0.95),
                baseline_tier=dict(type="str", default="baseline"),
            ),
        ),
    )
    argument_spec.update(PROVENANCE_ARGUMENT_SPEC)
    argument_spec.update(WORKLOAD_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    problems = workload_problems(p["workload"])
    if problems:
        module.fail_json(
            msg="sglang_ledger_append: the workload is not one the benchmark can have run: {}.".format(
                "; ".join(f"{name} {rule}" for name, rule in problems)
            )
        )
    try:
        mode = ledger_file_mode(p["mode"])
    except ValueError:
        module.fail_json(
            msg='sglang_ledger_append: mode {!r} is not an octal file mode such as "0640".'.format(p["mode"])
        )
    problem = confidence_problem(p["compare"]["confidence"]) if p["compare"] else None
    if problem:
        module.fail_json(msg="sglang_ledger_append: compare." + problem)
    failure = p["failure"] or None
    if failure is not None and not failure.get("class"):
        module.fail_json(
            msg="sglang_ledger_append: failure needs a 'class' (a crash class from "
            "data/crash_signatures.yml or a benchmark class such as warmup_failed); "
            f"got keys {sorted(failure)}."
        )
    provenance = _merge_provenance(module)
    launch = provenance.get("launch")
    if isinstance(launch, dict) and launch.get("flag_sources") is None:
        launch["flag_sources"], why = launch_flag_sources(p["tier"], launch)
        if why:
            launch.setdefault("reasons", {})["flag_sources"] = why
    record = build_record(
        host=p["host"],
        tier=p["tier"],
        run_id=p["run_id"],
        workload=p["workload"],
        points=[pt for pt in p["points"] if pt],
        failure=failure,
        started_at=p["started_at"],
        ended_at=utc_now(),
        provenance=provenance,
        record_id=p["record_id"] or new_record_id(),
        failed_task=p["failed_task"],
        failed_result=p["failed_result"],
        crash=p["crash"],
        warmup=p["warmup"],
        campaign=p["campaign"],
        quality=p["quality"],
    )
    if record.get("quality"):
        record["quality"]["comparison"] = _quality_comparison(module, record)
    problems = validate_record(record)
    if problems:
        module.fail_json(
            msg="sglang_ledger_append: the record for tier {} is invalid: {}. Check the "
            "points passed in (they must come from module sglang_bench).".format(p["tier"], "; ".join(problems)),
            record=record,
        )
    result = dict(record=record, record_id=record["record_id"], ledger=p["ledger"])
    if module.check_mode:
        existing, _ = read_ledger(p["ledger"])
        present = any(r.get("record_id") == record["record_id"] for r in existing)
        if p["compare"]:
            result["ansible_facts"] = {"sglang_bench_compare": None}  # nothing appended: nothing to compare
        module.exit_json(changed=not present, appended=False, bytes=len(encode_record(record)), **result)
    directory = os.path.dirname(p["ledger"])
    if directory and not os.path.isdir(directory):
        try:
            os.makedirs(directory, 0o750)
        except OSError as exc:
            module.fail_json(
                msg=f"sglang_ledger_append: cannot create {directory}: {exc}; set "
                "sglang_bench_results_dir to a writable directory."
            )
    try:
        written = append_record(p["ledger"], record, mode=mode)
    except OSError as exc:
        module.fail_json(
            msg="sglang_ledger_append: cannot append to {}: {}; check the path and "
            "permissions of sglang_bench_results_dir.".format(p["ledger"], exc),
            **result,
        )
    if p["compare"]:
        result["ansible_facts"] = {"sglang_bench_compare": _comparison(module, record)}
    result["ledger_checksum"] = module.sha1(p["ledger"])
    module.exit_json(
        changed=written["appended"],
        appended=written["appended"],
        offset=written["offset"],
        bytes=written["bytes"],
        repaired_torn_line=written["repaired_torn_line"],
        **result,
    )


if __name__ == "__main__":
    main()
