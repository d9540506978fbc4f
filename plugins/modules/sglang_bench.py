#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_bench
short_description: Run one benchmark cell (every concurrency point and repeat) with SGLang's bench_serving
version_added: "1.0.0"
description:
  - Runs SGLang's own benchmark client, C(bench_serving), for every point of
    one cell - each repeat (outer) of each concurrency (inner) of O(workload) - against a
    running SGLang server on the target host, in B(one) client process
    (tools/sglang_bench_client.py with C(--plan)). bench_serving is imported
    and the tokenizer loaded once, then bench_serving's own command line
    entry runs once per point.
  - Each point appends one JSONL line to its own C(c<C>_r<R>.jsonl) in
    O(output_dir); the module parses the line each point added and returns
    every point's throughput and latency, with full provenance, under the
    fact C(sglang_bench).
  - With O(mode=parse) it runs nothing and parses the last result line of
    each point's existing file in O(output_dir) instead.
  - A point is C(ok) only when bench_serving's C(completed) equals its
    num_prompts; otherwise it is C(failed) with class C(incomplete_point)
    and the counts. A complete point that cannot be believed - a mean TTFT of
    0, retokenized output far below the reported output, more request errors
    than failed requests, or C([http_server] Error) lines in the server's log
    (O(server_state)'s C(log)) while it ran - is C(failed) with class
    C(streamed_error) - real SGLang answers a streamed request that fails
    validation with HTTP 200 and an error chunk, which bench_serving counts as
    completed. A point without a result line is C(failed) with
    C(server_unreachable), C(incomplete_point), C(bench_timeout),
    C(hf_gated_or_offline) or C(bench_client_failed), classified from its
    own client output.
  - Provenance - tier, final server argv and env, launch script sha256,
    SGLang/FlashInfer/torch/CUDA versions, C(/server_info), GPU facts from
    nvidia-smi, host, git revision, timestamps and whether the target is the
    simulator - is collected once on the target host, after the points.
  - O(ml_env_python) defaults to the first element of O(client_command).
  - With O(warmup) (role sglang_bench's C(measure) entry point passes it), the
    server is warmed up before the first point, as module M(sglang_warmup) does
    (requests to C(/generate), one round per level), B(while) the client process
    imports bench_serving. The client is started with C(--wait-go) and runs its
    first point only after every warm-up request succeeded; a failed warm-up ends
    the client before any point and fails the task with the warm-up's
    C(failure_class) (C(warmup_failed)), C(failure_step) (C(warmup)), C(status)
    and C(body). Without it no warm-up runs (the C(benchmark) entry point).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_facts
  - sglang_lab_provenance
  - sglang_lab_server
  - sglang_lab_workload
  - sglang_lab_workload.client
  - sglang_lab_warmup
options:
  mode:
    description:
      - C(run) runs the client; C(parse) only parses the files in O(output_dir).
    type: str
    choices: [run, parse]
    default: run
  output_dir:
    description:
      - Directory on the target host for the cell's files - per point
        bench_serving's JSONL C(c<C>_r<R>.jsonl) (bench_serving appends; only
        the line this run adds is parsed in C(run) mode, the last line in
        C(parse) mode) and its output C(c<C>_r<R>.jsonl.log); the client's
        plan C(plan.json) and its own output C(client.log). Created when
        missing.
    type: path
    required: true
  client_command:
    description:
      - The command that starts the client loader, before its C(--plan)
        argument, for example C([<ml-env>/bin/python,
        <dir>/sglang_bench_client.py]) (no torch; light package shells) or
        C([<ml-env>/bin/python, <dir>/sglang_bench_client.py, --full-sglang])
        (the full SGLang install).
      - Required when O(mode=run).
    type: list
    elements: str
  client_warmup_requests:
    description:
      - bench_serving's own C(--warmup-requests) before each point.
      - Unset, 0 when O(warmup) runs (its rounds just warmed every measured level), else
        bench_serving's default (1).
      - With 0 (and no cache flush) the client also skips the 1 s pause that bench_serving's
        C(benchmark) makes after its warm-up; the point's C(settle_pause_skipped) says so
        (tools/sglang_bench_client.py, "The settle pause").
    type: int
  standby_dir:
    description:
      - Directory of a client started in standby beside the server (module
        M(sglang_bench_standby)). When a client runs there with the same
        O(client_command) and O(client_env), the first client process is that
        one - bench_serving already imported while the server loaded - instead
        of a new one; otherwise a new client starts as without this option,
        and a standby client of another command is ended.
      - The result's C(client_runs[0].standby) says which happened.
    type: path
  sizes_file:
    description:
      - JSON file on the host that keeps, per point (its bench_serving arguments and window), the
        most prompts a run of it has sent. A point with a measurement window starts at that count
        when it is larger than its planned one, and the points of this run add theirs. Every start
        of one workload then sends the same prompts, and arms of one comparison too
        (module_utils sglang_point_sizes; docs/benchmark.md, "Prompt counts kept across starts").
      - A point that started from it carries C(pinned) (C(planned), C(num_prompts)).
      - Unset - no count is kept or used.
    type: path
  point_timeout:
    description:
      - Seconds one point may run - a deadline inside the client process
        (SIGALRM). A point past it is stopped and fails with class
        C(bench_timeout); the next point runs in the same process unless
        O(stop_on_failure).
    type: int
    default: 7200
  timeout:
    description:
      - Seconds the whole client process may run; then its process group is
        killed, the point it was running fails with class C(bench_timeout)
        and points it had not started fail as C(bench_timeout) too (not
        started). Default - the number of
        points times O(point_timeout), plus 300 for the client's start.
    type: int
  stop_on_failure:
    description:
      - End the cell at the first C(failed) point; the remaining
        points do not run (RV(not_run)). A C(too_short) point is no failure -
        the points after it run. With C(false) every point runs; a
        client process that dies is started again for the points it did not
        start.
    type: bool
    default: true
  fail_on_incomplete:
    description:
      - Fail the task when a point is not C(ok). With C(false) the task
        succeeds and each point's C(status) and C(failure) tell.
    type: bool
    default: true
  tier:
    description: Tier id recorded in the provenance.
    type: str
  quality:
    description:
      - The output-quality check's prompt set (data/quality.yml as role sglang_bench resolves it -
        C(name), C(version), C(enabled), C(sampling), C(batch_size), C(timeout_s), C(prompts)),
        checked before any request is sent.
      - After the last point, when no point failed, its prompts go to the same server's native
        C(/generate), greedily, one at a time and once more in batches, each pass from a flushed
        prefix cache; RV(quality) is the record's C(quality) block (module_utils/sglang_quality.py,
        docs/quality.md). Part of this task, not a task of its own, so a cycle makes one module
        call fewer.
      - A failed request never fails the task - the block says C(status=failed) and the points
        are kept. With C(enabled=false), or in check mode, nothing is sent and the block says
        C(status=off).
      - Unset - no quality check.
    type: dict
attributes:
  check_mode:
    support: full
    details: Returns the plan and the command it would run; runs nothing and writes nothing.
  idempotent:
    support: none
    details: Every run sends load to the server and appends to the files in O(output_dir).
notes:
  - The client loader must exist on the target host; role sglang_bench copies
    tools/sglang_bench_client.py there.
  - Run the task with C(async) on a remote host so a long cell does not
    depend on one SSH session; role sglang_bench derives the async budget
    from the number of points and O(point_timeout).
seealso:
  - module: sglang_ledger_append
  - module: sglang_warmup
"""

EXAMPLES = r"""
- name: Benchmark concurrency 1, 10, 256 and 1024 in one client process
  sglang_bench:
    client_command: [/root/ml-env/bin/python, /var/lib/sglang-lab/results/client/sglang_bench_client.py, --full-sglang]
    client_env:
      HF_HUB_OFFLINE: "1"
    port: 8000
    workload:
      concurrency: [1, 10, 256, 1024]
      repeats: 1
      num_prompts: {multiplier: 2, floor: 10}
      input_len: 1024
      output_len: 1024
    tokenizer: lukealonso/GLM-5-NVFP4
    output_dir: /var/lib/sglang-lab/results/raw/run1
    point_timeout: 7200
    tier: baseline
    fail_on_incomplete: false
  async: 29700
  poll: 10

- name: Parse the files of a cell written earlier
  sglang_bench:
    mode: parse
    output_dir: /var/lib/sglang-lab/results/raw/run1
    workload: {concurrency: [10], input_len: 1024, output_len: 1024}
    num_prompts: 20
    collect_provenance: false
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_bench:
      description: The points, their provenance, the plan and the client command.
      type: dict
      returned: always
      contains:
        points:
          description:
            - One entry per point that ran, in plan order (repeats outer,
              concurrency inner); empty in check mode. Keys follow
              bench_serving's JSONL (see docs/ledger.md) - C(output_throughput)
              and C(total_throughput) (tok/s), C(request_throughput) (req/s),
              C(mean/median/p99_ttft_ms), C(..._tpot_ms), C(..._itl_ms),
              C(..._e2e_latency_ms), C(duration) (s) - plus C(concurrency),
              C(repeat), C(num_prompts), C(completed), C(failed)
              (num_prompts - completed), C(status) (ok or failed), C(failure),
              C(started_at), C(ended_at), C(wall_s), C(output_file),
              C(client_log), C(command) (the equivalent single-point client
              command line).
          type: list
          elements: dict
          returned: always
          sample:
            - concurrency: 1024
              repeat: 0
              num_prompts: 2048
              completed: 2048
              failed: 0
              status: ok
              output_throughput: 1520.55
              total_throughput: 3028.87
              mean_tpot_ms: 523.0
        provenance:
          description:
            - Where the numbers came from - tier, hostname, server_info,
              target_is_simulator, model, launch (script, script_sha256, argv,
              env), versions, gpu, git_revision, client, collected_at, and the
              reasons for anything null. Null in check mode.
          type: dict
          returned: always
        plan:
          description:
            - The planned points - C(id) (C(c<C>_r<R>)), C(concurrency),
              C(repeat), C(num_prompts), C(output_file), C(log) and, in
              C(run) mode, C(argv) (bench_serving's arguments).
          type: list
          elements: dict
          returned: always
        command:
          description: The client command line (run) or null (parse).
          type: list
          returned: always
        check_mode:
          description: Whether the module ran in check mode.
          type: bool
          returned: always
points:
  description: Same as RV(ansible_facts.sglang_bench.points), also returned when the task fails.
  returned: always
  type: list
  elements: dict
cmd:
  description: The client command line of the first client process.
  returned: when O(mode=run)
  type: list
warmup:
  description:
    - With O(warmup), the warm-up's summary as M(sglang_warmup) returns it - C(url), C(requests),
      C(succeeded), C(seconds), C(per_level) (C(concurrency), C(requests), C(seconds)),
      C(latency_s), C(completion_tokens); in check mode C(url) and C(would_send). Also returned when
      the warm-up failed.
  returned: when O(warmup) is given
  type: dict
client_runs:
  description:
    - One entry per client process started - C(pid), C(bench_module) (the
      bench_serving module it imported), C(rc), C(timed_out), C(log),
      C(command) and C(points) (the ids of the points it ran). One entry
      unless a client died and O(stop_on_failure=false) restarted it.
  returned: when the client ran
  type: list
  elements: dict
not_run:
  description:
    - Ids of planned points that did not run (after a failed point, or when the time was used up).
    - Those the time limit left unstarted are also in RV(points), as failed C(bench_timeout) points.
  returned: when the client ran
  type: list
  elements: str
output_tail:
  description: Last lines of the client process's own output (its per-point output is in each point's C(client_log)).
  returned: when the client ran
  type: str
client_rc:
  description:
    - Exit status of the last client process (not C(rc), which Ansible would
      read as the task's own failure; the points' C(status) say what failed).
  returned: when the client ran
  type: int
quality:
  description:
    - The output-quality check's block (C(status) ok, failed or off, C(prompt_set), C(sampling),
      C(batch_size), C(url), C(seconds), C(outputs), C(batch_vs_single), C(cache_flush), C(error);
      docs/ledger.md). Absent when a point failed - the record step then records the failure.
  returned: when O(quality) is given and no point failed
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_bench_points import (
    Beside,
    build_client_argv,
    client_settings,
    default_timeout,
    end_standby,
    plan_points,
    point_extras,
    point_from_result,
    point_tags,
    point_warmup_requests,
    read_new_results,
    read_standby,
    run_plan,
    standby_key,
    tail,
)
from ansible.module_utils.sglang_ledger import POINT_FAILED
from ansible.module_utils.sglang_point_sizes import load as load_sizes
from ansible.module_utils.sglang_point_sizes import pin, remember
from ansible.module_utils.sglang_process import Interrupted, raise_on_sigterm
from ansible.module_utils.sglang_provenance import (
    PROVENANCE_ARGUMENT_SPEC,
    provenance_from_params,
    server_log,
    server_tokenizer,
)
from ansible.module_utils.sglang_quality import check_prompt_set, quality_block
from ansible.module_utils.sglang_warmup_rounds import (
    WARMUP_SETTINGS_OPTIONS,
    check_settings,
    generate_url,
    requests_in,
    run_warmup,
    settings_from_spec,
    warmup_rounds,
)
from ansible.module_utils.sglang_workload_options import (
    CLIENT_ARGUMENT_SPEC,
    WORKLOAD_ARGUMENT_SPEC,
    workload_problems,
)

PLAN_NAME = "plan.json"
CLIENT_LOG_NAME = "client.log"


def _provenance(module, client):
    p = module.params
    if not p["collect_provenance"]:
        return {"collected": False, "client": client}
    return provenance_from_params(
        module,
        client_python=(p["client_command"] or [None])[0],
        model=p["model"] or p["tokenizer"],
        client=client,
    )


def _validate(module):
    p = module.params
    workload = p["workload"]
    problems = [f"workload {name} {rule}" for name, rule in workload_problems(workload)]
    if not workload.get("concurrency"):
        problems.append("workload concurrency must list at least one point")
    if p["num_prompts"] is None and not workload.get("num_prompts"):
        problems.append("give num_prompts or the workload's num_prompts rule (multiplier and floor)")
    for name in ("num_prompts", "point_timeout", "timeout"):
        if p[name] is not None and p[name] < 1:
            problems.append(f"{name} must be >= 1, got {p[name]}")
    if problems:
        module.fail_json(
            msg="sglang_bench: {}; fix the value passed to the module (role sglang_bench: data/benchmark.yml, "
            "its sglang_bench_* overrides or the campaign workload).".format("; ".join(problems))
        )
    if p["quality"] is not None:
        problems = check_prompt_set(p["quality"])
        if problems:
            module.fail_json(
                msg="sglang_bench: the output-quality check's prompt set is not valid: {}. Fix data/quality.yml "
                "(docs/quality.md).".format("; ".join(problems))
            )


def _parse(module, specs):
    points, missing = [], []
    for spec in specs:
        results = read_new_results(spec["output_file"], 0)
        if not results:
            missing.append(spec["output_file"])
            continue
        point = point_from_result(results[-1], spec["concurrency"], spec["repeat"], spec["num_prompts"])
        point["output_file"] = spec["output_file"]
        point.update(point_tags(spec))
        points.append(point)
    if missing:
        module.fail_json(
            msg="sglang_bench: no bench_serving result line in {}; run the benchmark first or point "
            "output_dir at the cell's directory.".format(", ".join(missing))
        )
    facts = {
        "points": points,
        "provenance": _provenance(module, {"mode": "parse"}),
        "plan": specs,
        "command": None,
        "check_mode": module.check_mode,
    }
    module.exit_json(changed=False, points=points, ansible_facts={"sglang_bench": facts})


def _server_tokenizer(module):
    """The tokenizer the server loaded (/server_info tokenizer_path, else model_path)."""
    p = module.params
    tokenizer, reason = server_tokenizer(p["address"], p["port"])
    if tokenizer:
        return tokenizer
    if module.check_mode:
        return "<tokenizer from /server_info>"
    module.fail_json(
        msg="sglang_bench: no tokenizer for the benchmark client: tokenizer is not set and "
        "http://{}:{}/server_info gave none ({}). Start the server first, or set "
        "sglang_bench_tokenizer to the model path (GPU node) or the tokenizer folder "
        "(simulator).".format(p["address"], p["port"], reason),
        failure_class="server_unreachable",
    )


def _warmup_plan(module):
    """The warm-up to run before the points (O(warmup)), as run_warmup's arguments, else None.

    ``concurrency`` C(measured) warms up once per level (the measured concurrencies); an
    integer sends every request at that concurrency, as module sglang_warmup does
    (settings_from_spec decides, for both).
    """
    spec = module.params["warmup"]
    if spec is None:
        return None
    try:
        settings = settings_from_spec(spec, measured_levels=module.params["workload"]["concurrency"])
    except ValueError as exc:
        module.fail_json(msg=f"sglang_bench: {exc}")
    problem = check_settings(settings)
    if problem:
        module.fail_json(msg=f"sglang_bench: warm-up {problem}")
    return {
        "url": generate_url(module.params["address"], module.params["port"]),
        "rounds": warmup_rounds(settings["requests"], settings["concurrency"], settings["levels"]),
        "input_len": settings["input_len"],
        "max_new_tokens": settings["max_new_tokens"],
        "timeout": settings["timeout"],
    }


class _WarmupGate:
    """run_plan's gate: the warm-up, run while the client process imports bench_serving."""

    def __init__(self, plan):
        self.plan = plan
        self.summary = None
        self.failure = None

    def __call__(self):
        self.summary, self.failure = run_warmup(**self.plan)
        return self.failure is None


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _interrupted(module, exc, specs, offsets, gate):
    """Fail with class interrupted and the points that completed before the signal (their
    result lines are in the output files; the client's group was killed by then)."""
    done = []
    for spec in specs:
        results = read_new_results(spec["output_file"], offsets.get(spec["id"], 0))
        if results:
            point = point_from_result(results[-1], spec["concurrency"], spec["repeat"], spec["num_prompts"])
            point["output_file"] = spec["output_file"]
            point.update(point_tags(spec))
            done.append(point)
    name = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
    warmed = gate is None or gate.summary is not None
    module.fail_json(
        msg=f"sglang_bench: interrupted by {name} during the {'benchmark' if warmed else 'warm-up'}; "
        f"{len(done)} of {len(specs)} point(s) had completed; the client's processes were ended.",
        failure_class="interrupted",
        failure_step="benchmark" if warmed else "warmup",
        points=done,
        warmup=gate.summary if gate else None,
    )


def _quality(module, points, gate):
    """The output-quality check on the server the points just measured (option quality). Nothing
    here loses the points: a request that fails is in the block, and anything else becomes a
    failed block too; an interrupt fails the task as interrupted, with every point."""
    p = module.params
    try:
        return quality_block(p["address"], p["port"], p["quality"])
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through raise_on_sigterm
        name = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
        module.fail_json(
            msg=f"sglang_bench: interrupted by {name} during the output-quality check, after all "
            f"{len(points)} point(s) had completed.",
            failure_class="interrupted",
            failure_step="benchmark",
            points=points,
            warmup=gate.summary if gate else None,
        )
    except Exception as exc:  # noqa: BLE001 - the record keeps the benchmark whatever the check hits
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}


def main():
    argument_spec = dict(
        mode=dict(type="str", choices=["run", "parse"], default="run"),
        warmup=dict(type="dict", options=WARMUP_SETTINGS_OPTIONS),
        output_dir=dict(type="path", required=True),
        client_command=dict(type="list", elements="str"),
        address=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        client_warmup_requests=dict(type="int"),
        point_timeout=dict(type="int", default=7200),
        timeout=dict(type="int"),
        stop_on_failure=dict(type="bool", default=True),
        fail_on_incomplete=dict(type="bool", default=True),
        tier=dict(type="str"),
        standby_dir=dict(type="path"),
        sizes_file=dict(type="path"),
        quality=dict(type="dict"),
    )
    argument_spec.update(WORKLOAD_ARGUMENT_SPEC)
    argument_spec.update(CLIENT_ARGUMENT_SPEC)
    argument_spec.update(PROVENANCE_ARGUMENT_SPEC)
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[("mode", "run", ("client_command",))],
        supports_check_mode=True,
    )
    p = module.params
    raise_on_sigterm()
    _validate(module)
    workload = p["workload"]
    output_dir = p["output_dir"]
    measurement = workload["measurement"] or {}
    rule = workload["num_prompts"] or {}
    specs = plan_points(
        workload["concurrency"],
        workload["repeats"],
        output_dir,
        num_prompts=p["num_prompts"],
        multiplier=None if p["num_prompts"] else rule.get("multiplier"),
        floor=None if p["num_prompts"] else rule.get("floor"),
        min_requests=measurement.get("min_requests") or 0,
        groups=workload.get("gsp_num_groups"),
        rates=workload.get("request_rates"),
        min_duration_s=measurement.get("min_duration_s") or 0,
    )
    for spec in specs:
        spec.update(point_extras(workload, p["address"], p["port"]))

    if p["mode"] == "parse":
        _parse(module, specs)
    warmup = _warmup_plan(module)

    if not p["tokenizer"]:
        p["tokenizer"] = _server_tokenizer(module)

    def client_argv(spec):
        return build_client_argv(
            [],
            host=p["address"],
            port=p["port"],
            concurrency=spec["concurrency"],
            num_prompts=spec["num_prompts"],
            output_file=spec["output_file"],
            tokenizer=p["tokenizer"],
            request_rate=spec.get("request_rate", workload["request_rate"]),
            model=p["model"],
            served_model_name=p["served_model_name"],
            output_details=p["output_details"],
            warmup_requests=point_warmup_requests(p["client_warmup_requests"], bool(warmup)),
            extra_args=p["extra_args"],
            **client_settings(workload),
        )

    sizes = load_sizes(p["sizes_file"])
    try:
        for spec in specs:
            spec["argv"] = client_argv(spec)
            # A point this host sized before starts at that size (sglang_point_sizes): every start of one
            # workload sends the same prompts.
            kept = pin(spec, sizes, workload.get("gsp_num_groups"))
            if kept:
                spec["pinned"] = {"planned": spec["num_prompts"], "num_prompts": kept}
                spec["num_prompts"] = kept
                spec["argv"] = client_argv(spec)
    except ValueError as exc:
        module.fail_json(
            msg="sglang_bench: the workload's bench_serving arguments cannot be built (request_rate {!r}): {}.".format(
                workload["request_rate"], exc
            )
        )
    plan_path = os.path.join(output_dir, PLAN_NAME)
    log_path = os.path.join(output_dir, CLIENT_LOG_NAME)
    command = list(p["client_command"]) + ["--plan", plan_path]
    timeout = p["timeout"] or default_timeout(len(specs), p["point_timeout"])
    client = {"command_prefix": list(p["client_command"]), "env": dict(p["client_env"])}

    if module.check_mode:
        facts = {"points": [], "provenance": None, "plan": specs, "command": command, "check_mode": True}
        extra = {}
        if warmup:
            extra["warmup"] = {"url": warmup["url"], "would_send": requests_in(warmup["rounds"])}
        if p["quality"] is not None:
            extra["quality"] = quality_block(p["address"], p["port"], p["quality"], check_mode=True)
        module.exit_json(
            changed=True,
            cmd=command,
            points=[],
            msg="check mode: would run {}{} points in one client process: {}".format(
                "a warm-up of {} requests, then ".format(extra["warmup"]["would_send"]) if warmup else "",
                len(specs),
                " ".join(command),
            ),
            ansible_facts={"sglang_bench": facts},
            **extra,
        )

    if not os.path.isdir(output_dir):
        try:
            os.makedirs(output_dir, 0o750)
        except OSError as exc:
            module.fail_json(msg=f"sglang_bench: cannot create {output_dir} for the output files: {exc}")
    gate = _WarmupGate(warmup) if warmup else None
    offsets = {spec["id"]: _size(spec["output_file"]) for spec in specs}
    standby = None
    if p["standby_dir"]:
        standby = read_standby(p["standby_dir"])
        if standby and standby.get("key") != standby_key(p["client_command"], p["client_env"]):
            end_standby(p["standby_dir"], "a client of another command or environment is wanted")
            standby = None
    try:
        points, outcome = run_plan(
            p["client_command"],
            specs,
            plan_path,
            log_path,
            env=p["client_env"],
            point_timeout=p["point_timeout"],
            timeout=timeout,
            stop_on_failure=p["stop_on_failure"],
            server_log=server_log(p["server_state"]),
            gate=gate,
            standby=standby,
        )
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through raise_on_sigterm: the client is gone
        _interrupted(module, exc, specs, offsets, gate)
    except OSError as exc:
        module.fail_json(
            msg=f"sglang_bench: cannot start the client {command[0]!r}: {exc}; check client_command "
            "(role variable sglang_bench_client).",
            cmd=command,
        )
    if gate and gate.failure:
        # The warm-up failed: no point ran, the client was told to stop. The failure is the
        # warm-up's own (step warmup), as module sglang_warmup reports it.
        module.fail_json(
            msg="sglang_bench: " + gate.failure["msg"],
            failure_class=gate.failure["failure_class"],
            failure_step=gate.failure["failure_step"],
            status=gate.failure["status"],
            body=gate.failure["body"],
            warmup=gate.summary,
            points=[],
            cmd=command,
        )
    try:
        remember(p["sizes_file"], specs, points)
    except OSError as exc:  # a hint for the next run, never a reason to lose this one's points
        module.warn(f"sglang_bench: cannot keep the points' prompt counts in {p['sizes_file']}: {exc}")
    runs = outcome.get("runs") or [{}]
    # Whether the first client process was the standby one, imported while the server loaded.
    client["standby"] = bool(runs[0].get("standby"))
    failed = [point for point in points if point["status"] == POINT_FAILED]
    quality = None
    if p["quality"] is not None and not failed:
        # Where the numbers came from (/server_info, nvidia-smi, the ml-env's versions: a Python start
        # and a package scan there) is read while the quality check's requests run, every point being
        # measured by then: neither waits for the other.
        provenance = Beside(_provenance, module, client)
        quality = _quality(module, points, gate)
        provenance = provenance.result()
    else:
        provenance = _provenance(module, client)
    facts = {
        "points": points,
        "provenance": provenance,
        "plan": specs,
        "command": command,
        "check_mode": False,
    }
    result = dict(
        changed=True,
        cmd=command,
        client_rc=outcome["rc"],
        client_runs=outcome["runs"],
        not_run=outcome["not_run"],
        points=points,
        output_tail=tail(outcome["output"], 3000),
        ansible_facts={"sglang_bench": facts},
    )
    if gate:
        result["warmup"] = gate.summary
    if quality is not None:
        result["quality"] = quality
    if failed and p["fail_on_incomplete"]:
        module.fail_json(
            msg="sglang_bench: {} of {} point(s) failed: {}. Client output: {}".format(
                len(failed),
                len(points),
                "; ".join(
                    "concurrency {} repeat {} ({}): {}".format(
                        point["concurrency"], point["repeat"], point["failure"]["class"], point["failure"]["message"]
                    )
                    for point in failed
                ),
                ", ".join(point.get("client_log") or log_path for point in failed),
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
