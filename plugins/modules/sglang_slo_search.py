#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_slo_search
short_description: Find the highest concurrency (or request rate) at which a live SGLang server meets an SLO
version_added: "1.0.0"
description:
  - Bisects one load dimension - C(--max-concurrency), or C(--request-rate)
    in whole requests per second - between O(low) and O(high) on a server
    that is already running, and returns the highest value at which every
    entry of O(slo) holds (for example C(p99_ttft_ms <= 500) and
    C(median_tpot_ms <= 50)). The server is never restarted between probes.
  - Each probe is one point of SGLang's own benchmark client, C(bench_serving),
    run by the project's loader (tools/sglang_bench_client.py C(--plan) with
    a one-point plan, the same plan, argv and result rules as M(sglang_bench)),
    in its own directory under O(output_dir). A probe whose point failed
    (incomplete, timed out, streamed errors, client failure) does not meet the
    SLO and is recorded with its failure.
  - The low end is measured first; when it already fails there is no answer
    (RV(slo_search.answer) null, RV(slo_search.outcome) C(low_fails)). Then
    the high end; when it passes the answer is O(high) and the search is not
    bounded (C(high_passes)). Otherwise the bracket is halved until the
    highest passing and the lowest failing value are at most O(tolerance)
    apart (C(bracketed)).
  - Bisection assumes the SLO's verdict is monotone in the load. With
    O(confirm) the deciding value is measured again at the end; any pair of
    probes that contradicts the assumption is listed in
    RV(slo_search.warnings) and RV(slo_search.consistent) is false.
  - The search - every probe, the answer and the provenance - is appended as
    one JSON line to O(output) (the ledger's append protocol, docs/ledger.md;
    a line whose record id is already there is not appended again).
    docs/slo-search.md describes the method and the line.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_provenance
  - sglang_lab_server
  - sglang_lab_workload
  - sglang_lab_workload.client
options:
  slo:
    description:
      - The SLO, every entry of which must hold at a load for it to pass. An
        entry is C({metric, max}) for a latency - C(<stat>_<ttft|tpot|itl|e2e_latency>_ms)
        with stat C(mean), C(median), C(std) or C(pNN), the names of
        bench_serving's result line (C(p99_ttft_ms), C(median_tpot_ms), ...)
        - or C({metric, min}) for a throughput (C(output_throughput),
        C(total_throughput), C(request_throughput), C(input_throughput)).
      - A metric this bench_serving does not write (C(p90_tpot_ms) before
        SGLang 0.5.17, say) makes every probe fail; the task then fails and
        says so.
      - Every probe sends at least the requests the highest bounded percentile
        needs, ceil(1 / (1 - q)) (p99 100, p95 20), whatever the num_prompts
        rule gives; a percentile a probe still cannot support fails it as
        C(insufficient_samples) (docs/slo-search.md).
    type: list
    elements: dict
    required: true
  dimension:
    description:
      - The load that is searched. C(concurrency) varies C(--max-concurrency)
        at the workload's fixed request rate (O(workload.request_rate)); C(request_rate) varies C(--request-rate)
        (whole requests per second) at the fixed O(max_concurrency).
    type: str
    choices: [concurrency, request_rate]
    default: concurrency
  low:
    description: Lowest value searched; measured first.
    type: int
    default: 1
  high:
    description: Highest value searched; measured second.
    type: int
    required: true
  tolerance:
    description:
      - The search stops when the highest passing and the lowest failing value
        are at most this far apart; the true threshold lies in
        C([answer, answer + tolerance)).
    type: int
    default: 1
  confirm:
    description:
      - Measure the answer (or O(low), when there is none) once more at the
        end, so that a measurement that cannot be repeated shows up as a
        warning.
    type: bool
    default: true
  max_concurrency:
    description:
      - C(--max-concurrency) of every probe when O(dimension=request_rate).
        Required then; not used otherwise.
    type: int
  output:
    description:
      - JSONL file on the target host to append the search's line to (created
        when missing). Not the experiment ledger - its readers take every line
        for a benchmark record.
    type: path
    required: true
  mode:
    description: File mode of a newly created O(output).
    type: raw
    default: "0640"
  output_dir:
    description:
      - Directory on the target host for the probes' files, one folder per
        probe C(p<NN>_<c|r><value>) with M(sglang_bench)'s files - the plan,
        the client's log and bench_serving's JSONL and output. Created when
        missing.
    type: path
    required: true
  client_command:
    description:
      - The client loader's command line up to its C(--plan) argument, as for
        M(sglang_bench) (for example C([<ml-env>/bin/python,
        <dir>/sglang_bench_client.py])).
    type: list
    elements: str
    required: true
  client_warmup_requests:
    description:
      - bench_serving's own C(--warmup-requests) before each probe (its default
        is 1), when O(probe_warmup) does not set it.
    type: int
  probe_warmup:
    description:
      - With O(dimension=concurrency), each probe's bench_serving warm-up
        (C(--warmup-requests), sent all at once, at most 32 output tokens each,
        not measured) has as many requests as the probe's concurrency, so the
        batch shape the probe measures has run before its first measured
        request - SGLang compiles kernels and captures graphs per batch shape.
      - With C(false), or O(dimension=request_rate), O(client_warmup_requests) applies.
    type: bool
    default: true
  point_timeout:
    description:
      - Seconds one probe may run - a deadline inside the client process. A
        probe past it fails with class C(bench_timeout) and does not meet the SLO.
    type: int
    default: 7200
  timeout:
    description:
      - Seconds one probe's client process may run; then its process group is
        killed. Default - O(point_timeout) plus 300 for the client's start.
    type: int
  tier:
    description: Tier id of the running server, recorded with the search.
    type: str
    required: true
  campaign:
    description:
      - The campaign this search belongs to (role sglang_campaign), kept as the line's
        C(campaign) so that a campaign's report and resume find it (C(name), C(tier), C(key)).
    type: dict
  host:
    description: The inventory host name recorded as the line's C(host); defaults to the machine's hostname.
    type: str
  run_id:
    description: Id of this search run; made from the UTC time and the tier when omitted.
    type: str
  record_id:
    description:
      - Id of the line. Default - derived from O(host), O(run_id)
        and O(tier), so a retried task with the same run id appends nothing
        the second time.
    type: str
attributes:
  check_mode:
    support: full
    details:
      - Checks the SLO and the range and returns RV(plan) (the most probes the
        search can take, the time budget and the first probe's command);
        sends nothing and writes nothing.
  idempotent:
    support: none
    details: Every run sends load to the server and writes probe files; O(output) gains a line per new run id.
notes:
  - The server must already run; the module neither starts nor stops it.
    playbooks/slo_search.yml puts the tier on the server first (role
    sglang_experiment C(switch_tier), which keeps a server that already runs
    the tier's script).
  - Each probe starts the client loader once (imports bench_serving, loads
    the tokenizer); a cell of M(sglang_bench) shares one process, but a
    bisection only knows its next point after the last one.
seealso:
  - module: sglang_bench
  - module: sglang_ledger_append
"""

EXAMPLES = r"""
- name: Highest concurrency with p99 TTFT <= 500 ms and median TPOT <= 60 ms
  sglang_slo_search:
    client_command: [/root/ml-env/bin/python, /var/lib/sglang-lab/results/client/sglang_bench_client.py, --full-sglang]
    client_env:
      HF_HUB_OFFLINE: "1"
    port: 8000
    tier: baseline
    host: "{{ inventory_hostname }}"
    slo:
      - metric: p99_ttft_ms
        max: 500
      - metric: median_tpot_ms
        max: 60
    low: 1
    high: 1024
    tolerance: 8
    workload:
      num_prompts: {multiplier: 2, floor: 10}
      input_len: 1024
      output_len: 1024
    tokenizer: lukealonso/GLM-5-NVFP4
    output: /var/lib/sglang-lab/results/slo_search.jsonl
    output_dir: /var/lib/sglang-lab/results/raw/slo-run1
  register: search
  async: 90000
  poll: 30

- name: Highest request rate (req/s) at 256 concurrent requests with p99 TTFT <= 2 s
  sglang_slo_search:
    client_command: [/root/ml-env/bin/python, /var/lib/sglang-lab/results/client/sglang_bench_client.py, --full-sglang]
    port: 8000
    tier: baseline
    slo: [{metric: p99_ttft_ms, max: 2000}]
    dimension: request_rate
    max_concurrency: 256
    low: 1
    high: 64
    workload:
      num_prompts: {multiplier: 30, floor: 64}
      input_len: 1024
      output_len: 1024
    output: /var/lib/sglang-lab/results/slo_search.jsonl
    output_dir: /var/lib/sglang-lab/results/raw/slo-run2
"""

RETURN = r"""
slo_search:
  description: The search. Null in check mode.
  returned: always
  type: dict
  contains:
    tier:
      description: Tier id of the server searched.
      type: str
    slo:
      description: The SLO as checked - a list of C({metric, bound, limit}), bound C(max) or C(min).
      type: list
      elements: dict
    dimension:
      description: C(concurrency) or C(request_rate).
      type: str
    fixed:
      description: The other dimension's fixed value - C({request_rate}) or C({max_concurrency}).
      type: dict
    low:
      description: O(low).
      type: int
    high:
      description: O(high).
      type: int
    tolerance:
      description: O(tolerance).
      type: int
    probes:
      description:
        - Every probe in the order it ran - C(index), C(value) (the probed
          load), C(concurrency), C(request_rate), C(num_prompts), C(met)
          (every SLO entry held and the point was ok), C(checks) (per SLO
          entry - C(metric), C(bound), C(limit), C(value), C(met),
          C(missing)), C(metrics) (the point's numeric bench_serving metrics,
          plus the SLO's own when only the raw result line had them),
          C(error) (C({class, message}) of a failed probe, else null),
          C(status) (the point's C(ok)/C(failed)), C(wall_s), C(output_file),
          C(client_log).
      type: list
      elements: dict
      sample:
        - index: 0
          value: 1
          concurrency: 1
          request_rate: inf
          num_prompts: 8
          met: true
          checks: [{metric: p99_ttft_ms, bound: max, limit: 400.0, value: 61.2, met: true, missing: false}]
          error: null
    answer:
      description:
        - The highest value that met the SLO - within O(tolerance) below the
          true threshold when bracketed, O(high) when not bounded; null when
          even O(low) failed.
      type: int
    bounded:
      description: Whether a failing value within O(tolerance) above the answer was measured.
      type: bool
    outcome:
      description: C(bracketed), C(low_fails) or C(high_passes).
      type: str
    reason:
      description: The outcome in one sentence.
      type: str
    bracket:
      description: The final C([highest passing, lowest failing]) when bracketed, else null.
      type: list
      elements: int
    steps:
      description: How many probes ran (confirmation included).
      type: int
    max_probes:
      description: The most probes this range and tolerance could take.
      type: int
    warnings:
      description: Probe pairs that contradict the monotonicity assumption.
      type: list
      elements: str
    consistent:
      description: False when RV(slo_search.warnings) is not empty.
      type: bool
    synthetic:
      description: True when the server is the simulator (its numbers are SYNTHETIC); null when unknown.
      type: bool
    workload:
      description:
        - The workload every probe used - O(workload) without the settings a search does not use
          (C(concurrency), C(repeats), C(confidence), C(warmup)) and its C(request_rate), with
          C(dimension) and C(fixed) (the request rate or the concurrency held); C(num_prompts) is
          O(num_prompts) when given.
      type: dict
    run_id:
      description: Id of this search run.
      type: str
    record_id:
      description: Id of the line in O(output).
      type: str
    started_at:
      description: UTC time the first probe started.
      type: str
    ended_at:
      description: UTC time the last probe ended.
      type: str
record:
  description:
    - The line appended to O(output) - the ledger's record keys
      (C(schema_version), C(record_id), C(run_id), C(recorded_at), C(host),
      C(tier), C(status), C(failure), C(workload), C(points) - each probe's
      full bench_serving point - and the provenance keys) with C(kind)
      C(slo_search) and the search under C(slo_search).
  returned: when the search ran
  type: dict
appended:
  description: Whether a line was appended (false when the record id was already in O(output)).
  returned: when the search ran
  type: bool
output:
  description: Path of O(output).
  returned: always
  type: str
plan:
  description:
    - The search's plan - C(max_probes), C(probe_timeout_s) (one probe's
      client limit), C(budget_s) (every probe's limit plus 600 s, for an
      C(async) task) and C(first_command) (the first probe's client command
      line).
  returned: always
  type: dict
"""

import os
import socket
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_bench_points import (
    METRIC_KEYS,
    build_client_argv,
    client_settings,
    default_timeout,
    failed_point,
    format_request_rate,
    num_prompts_for,
    plan_points,
    point_extras,
    read_new_results,
    run_plan,
    shared_prefix_prompts,
    unsupported_percentiles,
)
from ansible.module_utils.sglang_ledger import (
    POINT_OK,
    PROVENANCE_KEYS,
    SCHEMA_VERSION,
    STATUS_FAILED,
    STATUS_SUCCESS,
    append_record,
    to_json_safe,
    utc_now,
)
from ansible.module_utils.sglang_provenance import (
    PROVENANCE_ARGUMENT_SPEC,
    fetch_server_info,
    provenance_from_params,
    server_log,
    server_tokenizer,
    target_is_simulator,
)
from ansible.module_utils.sglang_slo import (
    SloError,
    describe_slo,
    goodput_target_problems,
    max_probes,
    parse_slo,
    probe_metrics,
    probe_min_requests,
    search,
)
from ansible.module_utils.sglang_workload_options import (
    CLIENT_ARGUMENT_SPEC,
    WORKLOAD_ARGUMENT_SPEC,
    workload_problems,
)

# Seconds beyond every probe's client limit for an async task: provenance and the append.
BUDGET_SLACK_S = 600
# A probe's keys taken from the probe callable's detail into the returned probe.
PROBE_DETAIL_KEYS = ("concurrency", "request_rate", "num_prompts", "status", "output_file", "client_log")
RECORD_UUID_NAMESPACE = uuid.UUID("6f6a3a52-6c0b-4c1e-9a53-736c6f736561")
# Workload settings left out of a search's recorded workload: those it does not use, and the
# request rate (its C(fixed) when held, else the dimension searched).
UNUSED_SETTINGS = ("concurrency", "repeats", "confidence", "warmup", "request_rate", "request_rates")


def _fail(module, message, **extra):
    module.fail_json(msg=f"sglang_slo_search: {message}", **extra)


def _validate(module):
    """The SLO, the range and the workload options; returns the parsed SLO."""
    p = module.params
    try:
        slo = parse_slo(p["slo"])
        max_probes(p["low"], p["high"], p["tolerance"], p["confirm"])
    except SloError as exc:
        _fail(module, f"{exc}. Fix the search's settings (role variables sglang_bench_slo, sglang_bench_slo_low, "
              "_high, _tolerance; -e slo=... for playbooks/slo_search.yml).")
    if p["dimension"] == "request_rate" and not p["max_concurrency"]:
        _fail(module, "dimension request_rate needs max_concurrency, the --max-concurrency of every probe "
              "(role variable sglang_bench_slo_max_concurrency).")
    if p["max_concurrency"] is not None and p["max_concurrency"] < 1:
        _fail(module, "max_concurrency must be >= 1, got {}.".format(p["max_concurrency"]))
    workload = p["workload"]
    problems = [f"workload {name} {rule}" for name, rule in workload_problems(workload)]
    problems += goodput_target_problems(slo, workload)
    if p["num_prompts"] is None and not workload.get("num_prompts"):
        problems.append("give num_prompts or the workload's num_prompts rule (multiplier and floor)")
    for name in ("num_prompts", "point_timeout", "timeout"):
        if p[name] is not None and p[name] < 1:
            problems.append(f"{name} must be >= 1, got {p[name]}")
    if problems:
        _fail(module, "{}; fix the value passed to the module (role sglang_bench: data/benchmark.yml, its "
              "sglang_bench_* overrides or the campaign workload).".format("; ".join(problems)))
    return slo


def _tokenizer(module):
    """The tokenizer the server loaded (/server_info tokenizer_path, else model_path)."""
    p = module.params
    if p["tokenizer"]:
        return p["tokenizer"]
    tokenizer, reason = server_tokenizer(p["address"], p["port"])
    if tokenizer:
        return tokenizer
    if module.check_mode:
        return "<tokenizer from /server_info>"
    _fail(
        module,
        "no tokenizer for the benchmark client: tokenizer is not set and http://{}:{}/server_info gave none "
        "({}). The search needs a running server: start the tier first (playbooks/slo_search.yml does), or "
        "set sglang_bench_tokenizer.".format(p["address"], p["port"], reason),
        failure_class="server_unreachable",
    )


class Prober:
    """Runs one probe - a one-point plan of the benchmark client - per call (side effect)."""

    def __init__(self, module, slo, tokenizer):
        self.module = module
        self.p = module.params
        self.slo = slo
        self.tokenizer = tokenizer
        self.count = 0
        self.points = []
        self.server_log = server_log(self.p["server_state"])
        # The requests a probe needs for every percentile (p99: 100) and goodput share the SLO bounds.
        self.min_requests = probe_min_requests(slo, self.p["workload"])

    def spec(self, value, index):
        """The probe's planned point, with its bench_serving argv (sglang_bench_points' helpers)."""
        p = self.p
        by_rate = p["dimension"] == "request_rate"
        concurrency = p["max_concurrency"] if by_rate else value
        workload = p["workload"]
        rate = str(value) if by_rate else workload["request_rate"]
        rule = workload["num_prompts"] or {}
        prompts = p["num_prompts"] or num_prompts_for(value, rule.get("multiplier"), rule.get("floor"))
        # Sized to support the SLO's percentiles: a p99 from 16 requests is their maximum.
        prompts = max(prompts, self.min_requests)
        probe_dir = os.path.join(p["output_dir"], "p{:02d}_{}{}".format(index, "r" if by_rate else "c", value))
        measurement = workload["measurement"] or {}
        prompts = max(prompts, int(measurement.get("min_requests") or 0))
        # generated-shared-prefix sends whole groups: the count is a multiple of them.
        prompts = shared_prefix_prompts(prompts, workload.get("gsp_num_groups"))
        spec = plan_points([concurrency], 1, probe_dir, num_prompts=prompts)[0]
        # Each probe from a flushed cache when the workload says cold: a value probed again would
        # otherwise measure the first probe's cache hits (the same seed sends the same prompts).
        spec.update(point_extras(workload, p["address"], p["port"]))
        spec["probe_dir"] = probe_dir
        spec["request_rate"] = format_request_rate(rate)
        warmup = concurrency if (p["probe_warmup"] and not by_rate) else p["client_warmup_requests"]
        spec["argv"] = build_client_argv(
            [],
            host=p["address"],
            port=p["port"],
            concurrency=concurrency,
            num_prompts=prompts,
            output_file=spec["output_file"],
            tokenizer=self.tokenizer,
            request_rate=rate,
            model=p["model"],
            served_model_name=p["served_model_name"],
            output_details=p["output_details"],
            warmup_requests=warmup,
            extra_args=p["extra_args"],
            **client_settings(workload),
        )
        return spec

    def probe_timeout(self):
        return self.p["timeout"] or default_timeout(1, self.p["point_timeout"])

    def __call__(self, value):
        p = self.p
        spec = self.spec(value, self.count)
        self.count += 1
        os.makedirs(spec["probe_dir"], 0o750, exist_ok=True)
        # bench_serving appends: a folder reused by a retried run id keeps older lines.
        offset = os.path.getsize(spec["output_file"]) if os.path.exists(spec["output_file"]) else 0
        try:
            points, outcome = run_plan(
                p["client_command"],
                [spec],
                os.path.join(spec["probe_dir"], "plan.json"),
                os.path.join(spec["probe_dir"], "client.log"),
                env=p["client_env"],
                point_timeout=p["point_timeout"],
                timeout=self.probe_timeout(),
                stop_on_failure=True,
                server_log=self.server_log,
            )
        except OSError as exc:
            points = [failed_point(spec["concurrency"], 0, spec["num_prompts"], "bench_client_failed",
                                   f"cannot start the client {p['client_command'][0]!r}: {exc}")]
        point = points[0] if points else failed_point(
            spec["concurrency"], 0, spec["num_prompts"], "bench_client_failed", "the client ran no point"
        )
        point = dict(point, request_rate=spec["request_rate"])
        self.points.append(point)
        results = read_new_results(spec["output_file"], offset)
        metrics = dict(
            (key, point[key]) for key in METRIC_KEYS
            if isinstance(point.get(key), (int, float)) and not isinstance(point.get(key), bool)
        )
        raw = dict(results[-1]) if results else {}
        # A percentile the probe's sample cannot support is no value, from the point or the raw line.
        withheld = dict(point.get("withheld_percentiles") or {})
        withheld.update(unsupported_percentiles(raw, point.get("samples") or {}))
        for key in withheld:
            raw.pop(key, None)
        metrics.update(probe_metrics(self.slo, point, raw))
        error = None
        if point.get("status") != POINT_OK:
            failure = point.get("failure") or {}
            error = {"class": failure.get("class") or "probe_failed", "message": failure.get("message") or ""}
        else:
            short = {c["metric"]: withheld[c["metric"]] for c in self.slo if c["metric"] in withheld}
            if short:
                error = {"class": "insufficient_samples", "message": "; ".join(
                    f"{key}: n/a (n={entry['n']}, needs {entry['min_n']})" for key, entry in sorted(short.items())
                )}
        return {
            "metrics": metrics,
            "error": error,
            "concurrency": spec["concurrency"],
            "request_rate": spec["request_rate"],
            "num_prompts": spec["num_prompts"],
            "status": point.get("status"),
            "output_file": spec["output_file"],
            "client_log": point.get("client_log") or spec["log"],
        }


def _provenance(module):
    p = module.params
    if not p["collect_provenance"]:
        info, _reason = fetch_server_info(p["address"], p["port"], timeout=5.0)
        synthetic = target_is_simulator(info, p["launch_argv"], p["launch_script"])
        return {"collected": False, "target_is_simulator": synthetic}
    return provenance_from_params(
        module,
        client_python=p["client_command"][0],
        model=p["model"] or p["tokenizer"],
        client={"command_prefix": list(p["client_command"]), "env": dict(p["client_env"]), "mode": "slo_search"},
    )


def _workload(p):
    """The workload the probes used: the module's, less what a search does not use, with the
    dimension searched and the one held fixed."""
    fixed = (
        {"max_concurrency": p["max_concurrency"]}
        if p["dimension"] == "request_rate"
        else {"request_rate": format_request_rate(p["workload"]["request_rate"])}
    )
    workload = {key: value for key, value in p["workload"].items() if key not in UNUSED_SETTINGS}
    if p["num_prompts"] is not None:
        workload["num_prompts"] = p["num_prompts"]
    workload.update(dimension=p["dimension"], fixed=fixed)
    return workload


def _probe_view(probe):
    view = dict((key, probe[key]) for key in ("index", "value", "met", "checks", "metrics", "error", "wall_s"))
    for key in PROBE_DETAIL_KEYS:
        view[key] = probe["detail"].get(key)
    return view


def main():
    argument_spec = dict(
        slo=dict(type="list", elements="dict", required=True),
        dimension=dict(type="str", choices=["concurrency", "request_rate"], default="concurrency"),
        low=dict(type="int", default=1),
        high=dict(type="int", required=True),
        tolerance=dict(type="int", default=1),
        confirm=dict(type="bool", default=True),
        max_concurrency=dict(type="int"),
        campaign=dict(type="dict"),
        output=dict(type="path", required=True),
        mode=dict(type="raw", default="0640"),
        output_dir=dict(type="path", required=True),
        client_command=dict(type="list", elements="str", required=True),
        address=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        client_warmup_requests=dict(type="int"),
        probe_warmup=dict(type="bool", default=True),
        point_timeout=dict(type="int", default=7200),
        timeout=dict(type="int"),
        tier=dict(type="str", required=True),
        host=dict(type="str"),
        run_id=dict(type="str"),
        record_id=dict(type="str"),
    )
    argument_spec.update(WORKLOAD_ARGUMENT_SPEC)
    argument_spec.update(CLIENT_ARGUMENT_SPEC)
    argument_spec.update(PROVENANCE_ARGUMENT_SPEC)
    module = AnsibleModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
    )
    p = module.params
    slo = _validate(module)
    try:
        file_mode = int(str(p["mode"]), 8)
    except ValueError:
        _fail(module, 'mode {!r} is not an octal file mode such as "0640".'.format(p["mode"]))

    prober = Prober(module, slo, _tokenizer(module))
    most = max_probes(p["low"], p["high"], p["tolerance"], p["confirm"])
    first = prober.spec(p["low"], 0)
    plan = {
        "max_probes": most,
        "probe_timeout_s": prober.probe_timeout(),
        "budget_s": most * prober.probe_timeout() + BUDGET_SLACK_S,
        "first_command": list(p["client_command"]) + list(first["argv"]),
    }
    if module.check_mode:
        module.exit_json(
            changed=False,
            slo_search=None,
            plan=plan,
            output=p["output"],
            msg="check mode: would bisect {} over [{}, {}] (tolerance {}) for {} in at most {} probes".format(
                p["dimension"], p["low"], p["high"], p["tolerance"], describe_slo(slo), most
            ),
        )

    host = p["host"] or socket.gethostname()
    started_at = utc_now()
    run_id = p["run_id"] or "{}-{}-slo".format(started_at.replace("-", "").replace(":", "")[:15] + "Z", p["tier"])
    record_id = p["record_id"] or str(
        uuid.uuid5(RECORD_UUID_NAMESPACE, "{}/{}/{}/slo_search".format(host, run_id, p["tier"]))
    )
    try:
        os.makedirs(p["output_dir"], 0o750, exist_ok=True)
    except OSError as exc:
        _fail(module, "cannot create {} for the probes' files: {}".format(p["output_dir"], exc))
    found = search(prober, slo, p["low"], p["high"], p["tolerance"], confirm=p["confirm"])
    ended_at = utc_now()
    provenance = _provenance(module)
    workload = _workload(p)
    probes = [_probe_view(probe) for probe in found["probes"]]
    result = {
        "tier": p["tier"],
        "slo": slo,
        "dimension": p["dimension"],
        "fixed": workload["fixed"],
        "low": p["low"],
        "high": p["high"],
        "tolerance": p["tolerance"],
        "probes": probes,
        "answer": found["answer"],
        "bounded": found["bounded"],
        "outcome": found["outcome"],
        "reason": found["reason"],
        "bracket": found["bracket"],
        "steps": found["steps"],
        "max_probes": most,
        "warnings": found["warnings"],
        "consistent": found["consistent"],
        "synthetic": provenance.get("target_is_simulator"),
        "workload": workload,
        "run_id": run_id,
        "record_id": record_id,
        "started_at": started_at,
        "ended_at": ended_at,
    }
    # Nothing was measured at all (the server did not answer, the client cannot start): a failed search.
    measured = [probe for probe in probes if probe["status"] == POINT_OK]
    missing = sorted(set(
        check["metric"] for probe in measured for check in probe["checks"] if check["missing"]
    ))
    failure = None
    if not measured:
        error = probes[0]["error"] or {"class": "probe_failed", "message": ""}
        failure = {
            "class": error["class"],
            "step": "slo_search",
            "message": "no probe completed: {}".format(error["message"]),
        }
    elif any((probe["error"] or {}).get("class") == "insufficient_samples" for probe in measured):
        short = next(probe for probe in measured if (probe["error"] or {}).get("class") == "insufficient_samples")
        failure = {
            "class": "insufficient_samples",
            "step": "slo_search",
            "message": f"probe {short['index']} ({short['value']}): {short['error']['message']}; give more "
                       "prompts per probe (num_prompts) or bound a lower percentile",
        }
    elif missing:
        failure = {
            "class": "metric_missing",
            "step": "slo_search",
            "message": "bench_serving's result line has no {} (it has: {})".format(
                ", ".join(missing), ", ".join(sorted(k for k in measured[0]["metrics"] if k.endswith("_ms")))
            ),
        }
    record = {
        "schema_version": SCHEMA_VERSION,
        "kind": "slo_search",
        "record_id": record_id,
        "run_id": run_id,
        "recorded_at": utc_now(),
        "started_at": started_at,
        "ended_at": ended_at,
        "host": host,
        "tier": p["tier"],
        "status": STATUS_FAILED if failure else STATUS_SUCCESS,
        "failure": failure,
        "workload": workload,
        "points": prober.points,
        "slo_search": result,
    }
    if p["campaign"]:
        record["campaign"] = dict(p["campaign"])
    for key in PROVENANCE_KEYS:
        record[key] = provenance.get(key)
    record = to_json_safe(record)
    try:
        written = append_record(p["output"], record, mode=file_mode)
    except (OSError, ValueError) as exc:
        _fail(module, "cannot append the search to {}: {}".format(p["output"], exc), slo_search=to_json_safe(result))
    outcome = dict(
        changed=True,
        slo_search=to_json_safe(result),
        record=record,
        appended=written["appended"],
        output=p["output"],
        plan=plan,
    )
    if failure:
        _fail(module, "{} - the search has no answer it can stand by. The probes are kept in {} and {}.".format(
            failure["message"], p["output"], p["output_dir"]), **outcome)
    module.exit_json(msg=found["reason"], **outcome)


if __name__ == "__main__":
    main()
