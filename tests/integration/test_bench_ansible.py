"""Role sglang_bench and its modules through real ansible-playbook runs (ansible-runner)
against the simulator on 127.0.0.1, then playbooks/report.yml over the fetched ledger.

The simulator runs with a 64-token context, which gives two honest failures
without any fault injection: a point whose longer prompts are refused (streamed_error: the
refusals come inside HTTP 200 streams, as real SGLang sends them) and a warm-up whose prompt is
too long (warmup_failed: HTTP 400, not streamed).
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

import pytest
import sglang_ledger as ledger
import yaml
from helpers.paths import REPO
from helpers.playbooks import run_play, tail
from helpers.processes import write_server_state
from helpers.sim import start_bench_sim


def run_playbook(folder: Path, plays: list | Path, extravars: dict | None = None, cmdline: str | None = None):
    """Run a playbook (a path, or its plays) on host sim-bench through ansible-runner; return
    (runner, {task name: [(event, res)]})."""
    return run_play(folder, plays, host="sim-bench", extravars=extravars, cmdline=cmdline)


@pytest.fixture(scope="module")
def sim(sim_tokenizer, tmp_path_factory):
    server = start_bench_sim(tmp_path_factory.mktemp("sim"), sim_tokenizer, "--context-length", "64")
    server.tokenizer = sim_tokenizer
    yield server
    server.stop()


@pytest.fixture(scope="module")
def experiment(sim, tmp_path_factory):
    """Three tiers through the role's entry points, the way an experiment playbook calls them."""
    tmp = tmp_path_factory.mktemp("experiment")
    settings = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
    settings["warmup"].update(input_len=16, max_new_tokens=4)  # fits the 64-token context
    settings_file = tmp / "benchmark.yml"
    settings_file.write_text(yaml.safe_dump(settings))
    script, state = write_server_state(tmp, sim.proc.pid, sim.port, "python -m sglang_sim.launch_server --port 0",
                                       started_at="2026-01-01T00:00:00Z")
    # What role sglang_launch rendered: recorded with the secret-looking name redacted.
    launch_env = {"NCCL_P2P_LEVEL": "5", "HF_TOKEN": "secret-value"}
    common = {
        "sglang_bench_port": sim.port,
        "sglang_bench_client": "shim",
        "sglang_bench_python": sys.executable,
        "sglang_bench_results_dir": str(tmp / "host" / "results"),
        "sglang_bench_controller_results_dir": str(tmp / "controller" / "results"),
        "sglang_bench_settings_file": str(settings_file),
        "sglang_bench_dataset_name": "random-ids",
        "sglang_bench_input_len": 16,
        "sglang_bench_output_len": 8,
        "sglang_bench_concurrency": [1, 2],
        "sglang_bench_num_prompts_floor": 4,
        # Not under test here: no window (data/benchmark.yml's 30 s would size every point anew).
        "sglang_bench_min_requests": 0,
        "sglang_bench_min_duration_s": 0,
        "sglang_bench_async": False,  # local connection: no SSH session to outlive
        "sglang_bench_server_state": str(state),
        # What an inventory sets for every role (inventory/local.yml).
        "sglang_lab_port": sim.port,
        "sglang_lab_target": "simulator",
        "sglang_lab_ml_env": str(tmp / "no-ml-env"),
        "sglang_lab_work_dir": str(tmp / "host"),
    }

    def role(entry, name, **task_vars):
        task = {"name": name, "ansible.builtin.include_role": {"name": "sglang_bench", "tasks_from": entry}}
        if task_vars:
            task["vars"] = task_vars
        return task

    def play(name, tier, extra=None, measure=False, compare=True):
        # measure: the warm-up inside the benchmark task (entry point measure, as role
        # sglang_experiment runs it); else the warmup and benchmark entry points one by one.
        steps = [role("measure", "Measure")] if measure else [role("warmup", "Warm up"), role("benchmark", "Benchmark")]
        return {
            "name": name,
            "hosts": "all",
            "gather_facts": False,
            "vars": {**common, "sglang_bench_launch": {"tier": tier, "env": launch_env}, **(extra or {})},
            "tasks": [
                {
                    "name": "Experiment",
                    "block": [*steps, role("record", "Record")],
                    "rescue": [
                        role(
                            "record",
                            "Record the failure",
                            sglang_bench_failed_task="{{ ansible_failed_task }}",
                            sglang_bench_failed_result="{{ ansible_failed_result }}",
                        )
                    ],
                    "always": [role("fetch", "Fetch the ledger")],
                },
                *([role("compare", "Compare")] if compare else []),
            ],
        }

    plays = [
        play("Baseline succeeds", "baseline", measure=True),
        # Prompts drawn from 1..100 tokens against a 64-token context: some get HTTP 400.
        play(
            "A point completes only part of its prompts",
            "t03-single-batch-overlap",
            {
                "sglang_bench_input_len": 100,
                "sglang_bench_random_range_ratio": 0.0,
                "sglang_bench_client_warmup_requests": 0,
                "sglang_bench_num_prompts_floor": 8,
            },
        ),
        # data/benchmark.yml's own warm-up prompt (128 words) does not fit the context.
        play(
            "The warm-up fails",
            "t01-piecewise-cuda-graph",
            {"sglang_bench_settings_file": str(REPO / "data" / "benchmark.yml")},
        ),
        # The same warm-up, inside the measure task: it fails there, and no point runs.
        play(
            "The warm-up fails inside the measure task",
            "t02-mscclpp",
            {"sglang_bench_settings_file": str(REPO / "data" / "benchmark.yml")},
            measure=True,
            compare=False,
        ),
    ]
    runner, results = run_playbook(tmp, plays)
    return {"tmp": tmp, "runner": runner, "results": results, "common": common, "script": script}


def ledger_records(path: Path) -> list[dict]:
    records, problems = ledger.read_ledger(str(path))
    assert problems == []
    return records


def test_ledger_lands_on_the_controller(experiment):
    runner, common = experiment["runner"], experiment["common"]
    assert runner.status == "successful", tail(runner)  # failures were rescued and recorded
    host_ledger = Path(common["sglang_bench_results_dir"]) / "ledger.jsonl"
    controller_ledger = Path(common["sglang_bench_controller_results_dir"]) / "sim-bench" / "ledger.jsonl"
    assert controller_ledger.read_bytes() == host_ledger.read_bytes()
    for line in controller_ledger.read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"ledger holds non-JSON {c}"))
    records = ledger_records(controller_ledger)
    tiers = ["baseline", "t03-single-batch-overlap", "t01-piecewise-cuda-graph", "t02-mscclpp"]
    assert [r["tier"] for r in records] == tiers
    assert len({r["run_id"] for r in records}) == 4 and len({r["record_id"] for r in records}) == 4
    assert all(ledger.validate_record(r) == [] for r in records)


def test_successful_run_record(experiment, sim):
    common = experiment["common"]
    record = ledger_records(Path(common["sglang_bench_results_dir"]) / "ledger.jsonl")[0]
    assert record["status"] == "success" and record["failure"] is None
    assert record["host"] == "sim-bench" and record["target_is_simulator"] is True
    assert [(p["concurrency"], p["status"]) for p in record["points"]] == [(1, "ok"), (2, "ok")]
    # The whole cell ran as one task, in one client process.
    ((event, cell),) = experiment["results"]["Benchmark every point in one client process for tier baseline"]
    assert event == "runner_on_ok" and len(cell["client_runs"]) == 1, cell.get("client_runs")
    assert cell["client_runs"][0]["points"] == ["c1_r0", "c2_r0"] and cell["not_run"] == []
    assert cell["cmd"][-2:] == ["--plan", str(Path(record["points"][0]["output_file"]).parent / "plan.json")]
    for point in record["points"]:
        assert point["num_prompts"] == max(2 * point["concurrency"], 4)
        assert point["completed"] == point["num_prompts"] and point["failed"] == 0
        assert point["total_output_tokens"] == point["num_prompts"] * 8  # range ratio 1.0
        assert point["output_throughput"] > 0 and point["total_throughput"] > point["output_throughput"]
        raw = Path(point["output_file"])
        assert raw.parent.name == record["run_id"] and raw.is_file()
        argv = point["command"]
        assert argv[argv.index("--random-range-ratio") + 1] == "1.0"
        assert argv[argv.index("--request-rate") + 1] == "inf"
        assert argv[argv.index("--tokenizer") + 1] == str(sim.tokenizer)  # asked from /server_info
    workload = record["workload"]
    assert (workload["input_len"], workload["output_len"], workload["random_range_ratio"]) == (16, 8, 1.0)
    assert workload["request_rate"] == "inf" and workload["concurrency"] == [1, 2]
    assert record["server_info"]["synthetic"] is True and record["server_info"]["port"] == sim.port
    assert record["model"]["served_model_name"] == "glm-5"
    launch = record["launch"]
    assert launch["script_sha256"] == hashlib.sha256(experiment["script"].read_bytes()).hexdigest()
    assert launch["env"] == {"HF_TOKEN": "<redacted>", "NCCL_P2P_LEVEL": "5"}
    assert "sglang_sim.launch_server" in " ".join(launch["argv"])  # read from /proc of the server pid
    assert record["versions"]["sglang"] == metadata.version("sglang")
    assert record["gpu"]["available"] is False and record["gpu"]["error_class"] == "missing"
    assert record["started_at"] < record["ended_at"]


def test_streamed_error_point_record(experiment):
    # Too-long prompts: like real SGLang 0.5.17 (tests/fixtures/real-sglang/), the simulator answers
    # each streamed request with HTTP 200 and an error chunk, and bench_serving counts it as completed.
    common = experiment["common"]
    record = ledger_records(Path(common["sglang_bench_results_dir"]) / "ledger.jsonl")[1]
    assert record["status"] == "failed"
    assert record["failure"]["class"] == "streamed_error" and record["failure"]["concurrency"] == 1
    point = record["points"][0]
    raw = json.loads(Path(point["output_file"]).read_text().splitlines()[-1])
    assert raw["completed"] == point["num_prompts"] == point["completed"]  # what bench_serving said
    assert point["status"] == "failed" and point["failure"]["class"] == "streamed_error"
    # This server was not started by the lifecycle (no server.json, so no server log to read): the
    # refused requests show in the output the client reports but could not retokenize.
    assert any("retokenized" in s for s in point["failure"]["signals"]), point["failure"]
    counted = f"counted {point['num_prompts']} of {point['num_prompts']} requests as completed"
    assert counted in record["failure"]["message"]
    assert len(record["points"]) == 1  # the sweep stopped at the failed point
    task = "Benchmark every point in one client process for tier t03-single-batch-overlap"
    ((event, cell),) = experiment["results"][task]
    assert cell["not_run"] == ["c2_r0"] and len(cell["client_runs"]) == 1


def test_warmup_failure_record(experiment):
    common, results = experiment["common"], experiment["results"]
    record = ledger_records(Path(common["sglang_bench_results_dir"]) / "ledger.jsonl")[2]
    assert record["status"] == "failed" and record["points"] == []
    failure = record["failure"]
    assert failure["class"] == "warmup_failed" and failure["step"] == "warmup" and failure["status"] == 400
    assert "context length" in failure["body"]
    failed = [
        res for event, res in results["Warm the server up with requests to /generate"] if event == "runner_on_failed"
    ]
    assert len(failed) == 1 and "HTTP 400" in failed[0]["msg"]


def test_measure_warms_up_while_the_client_imports_and_records_the_rounds(experiment):
    common = experiment["common"]
    record = ledger_records(Path(common["sglang_bench_results_dir"]) / "ledger.jsonl")[0]
    # One round per measured concurrency (1, 2), each of max(level, warmup.requests) requests.
    requests = yaml.safe_load((experiment["tmp"] / "benchmark.yml").read_text())["warmup"]["requests"]
    rounds = [(c, max(c, requests)) for c in (1, 2)]
    assert [(r["concurrency"], r["requests"]) for r in record["warmup"]["per_level"]] == rounds
    assert record["warmup"]["succeeded"] == record["warmup"]["requests"] == sum(n for _c, n in rounds)
    ((event, cell),) = experiment["results"]["Benchmark every point in one client process for tier baseline"]
    assert cell["warmup"] == record["warmup"]
    # The client waited for the warm-up: "go" came after "ready", before the first point.
    log = Path(cell["client_runs"][0]["log"]).read_text()
    events = [json.loads(line.split(" ", 1)[1])["event"] for line in log.splitlines()
              if line.startswith("SGLANG_BENCH_POINT ")]
    assert events[:3] == ["ready", "go", "start"], events


def test_a_warmup_that_fails_inside_measure_runs_no_point(experiment):
    common, results = experiment["common"], experiment["results"]
    record = ledger_records(Path(common["sglang_bench_results_dir"]) / "ledger.jsonl")[3]
    assert record["tier"] == "t02-mscclpp" and record["status"] == "failed" and record["points"] == []
    failure = record["failure"]
    assert failure["class"] == "warmup_failed" and failure["step"] == "warmup" and failure["status"] == 400
    assert "context length" in failure["body"]
    assert record["warmup"]["succeeded"] < record["warmup"]["requests"]  # the failed round is kept
    ((event, cell),) = results["Benchmark every point in one client process for tier t02-mscclpp"]
    assert event == "runner_on_failed" and "HTTP 400" in cell["msg"] and cell["points"] == []
    raw = Path(common["sglang_bench_results_dir"]) / "raw" / record["run_id"]
    assert list(raw.glob("*.jsonl")) == []  # bench_serving never ran


def test_compare_runs_on_the_record(experiment):
    compares = [
        res
        for event, res in experiment["results"]["Compare the record with the latest successful baseline"]
        if event == "runner_on_ok"
    ]
    facts = [res["ansible_facts"]["sglang_bench_compare"] for res in compares]
    assert [f["tier"] for f in facts] == ["baseline", "t03-single-batch-overlap", "t01-piecewise-cuda-graph"]
    first = facts[0]
    assert first["confidence"] == 0.95
    assert {m["verdict"] for p in first["points"] for m in p["metrics"].values()} == {"no_baseline"}


def test_report_playbook_builds_synthetic_report(experiment, tmp_path, tier_pages):
    results_dir = Path(experiment["common"]["sglang_bench_controller_results_dir"])
    docs = tier_pages  # the pages as tools/render_tier_docs.py writes them, status markers included
    extravars = {"report_results_dir": str(results_dir), "report_tier_docs_dir": str(docs)}
    runner, results = run_playbook(tmp_path, REPO / "playbooks" / "report.yml", extravars)
    assert runner.status == "successful", tail(runner)
    ((event, res),) = results["Write the markdown report, the chart and the tier status blocks"]
    assert res["changed"] is True
    markdown = (results_dir / "report.md").read_text()
    assert markdown.startswith("# SGLang throughput report — SYNTHETIC")
    baseline = ledger_records(results_dir / "sim-bench" / "ledger.jsonl")[0]
    for point in baseline["points"]:
        row = (
            f"| {point['concurrency']} | {point['output_throughput']:,.2f} | {point['total_throughput']:,.2f} "
            f"| {point['mean_tpot_ms']:,.2f} |"
        )
        assert row in markdown
    assert "`streamed_error`" in markdown and "`warmup_failed`" in markdown
    png = (results_dir / "throughput.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000 and b"SYNTHETIC" in png
    assert "**tested** on sim-bench (SYNTHETIC simulator)" in (docs / "baseline.md").read_text()
    assert (
        "**blocked** on sim-bench (SYNTHETIC simulator): `warmup_failed`"
        in (docs / "t01-piecewise-cuda-graph.md").read_text()
    )
    # The report is idempotent: a second run changes nothing.
    runner, results = run_playbook(tmp_path, REPO / "playbooks" / "report.yml", extravars)
    ((event, res),) = results["Write the markdown report, the chart and the tier status blocks"]
    assert runner.status == "successful" and res["changed"] is False


MODULE_PLAY = """
- name: Modules in check mode and alone
  hosts: all
  gather_facts: false
  tasks:
    - name: Bench in check mode
      sglang_bench:
        client_command: [{python}, {shim}]
        port: {port}
        workload:
          concurrency: [2, 4]
          repeats: 2
          num_prompts: {{multiplier: 2, floor: 3}}
          input_len: 16
          output_len: 8
        tokenizer: {tokenizer}
        output_dir: {out}
      check_mode: true
    - name: Warm-up in check mode
      sglang_warmup:
        port: {port}
      check_mode: true
    - name: Ledger append in check mode
      sglang_ledger_append:
        ledger: {ledger}
        run_id: r1
        host: sim-bench
        tier: baseline
        workload: {{input_len: 16, output_len: 8}}
        failure: {{class: hang, step: ready, message: no answer}}
        server_port: {port}
      check_mode: true
    - name: Parse a bench_serving file
      sglang_bench:
        mode: parse
        output_dir: {raw}
        workload: {{concurrency: [1], input_len: 16, output_len: 8}}
        num_prompts: {raw_prompts}
        collect_provenance: false
    - name: Bad concurrency is refused
      sglang_bench:
        mode: parse
        output_dir: {raw}
        workload: {{concurrency: [1, 0], input_len: 16, output_len: 8}}
        num_prompts: 1
      ignore_errors: true
"""


def test_modules_check_mode_and_parse(experiment, sim, tmp_path):
    baseline = ledger_records(Path(experiment["common"]["sglang_bench_results_dir"]) / "ledger.jsonl")[0]
    raw_point = baseline["points"][0]
    out, led = tmp_path / "never", tmp_path / "never-ledger.jsonl"
    playbook = tmp_path / "modules.yml"
    playbook.write_text(
        MODULE_PLAY.format(
            python=json.dumps(sys.executable),
            shim=json.dumps(str(REPO / "tools" / "sglang_bench_client.py")),
            port=sim.port,
            tokenizer=json.dumps(str(sim.tokenizer)),
            out=json.dumps(str(out)),
            ledger=json.dumps(str(led)),
            raw=json.dumps(str(Path(raw_point["output_file"]).parent)),
            raw_prompts=raw_point["num_prompts"],
        )
    )
    log_lines = len(sim.log().splitlines())
    runner, results = run_playbook(tmp_path, playbook)
    assert runner.status == "successful", tail(runner)

    ((event, res),) = results["Bench in check mode"]
    facts = res["ansible_facts"]["sglang_bench"]
    assert event == "runner_on_ok" and res["changed"] is True and facts["check_mode"] is True
    assert facts["points"] == [] and facts["provenance"] is None
    assert facts["command"] == [sys.executable, str(REPO / "tools" / "sglang_bench_client.py"), "--plan",
                                str(out / "plan.json")]
    # The plan: repeats outer, concurrency inner; num_prompts = max(2 * c, 3).
    assert [(s["repeat"], s["concurrency"], s["num_prompts"]) for s in facts["plan"]] == [
        (0, 2, 4), (0, 4, 8), (1, 2, 4), (1, 4, 8)
    ]
    argv = facts["plan"][3]["argv"]
    assert argv[argv.index("--output-file") + 1] == str(out / "c4_r1.jsonl")
    assert not out.exists()  # nothing written in check mode

    ((event, res),) = results["Warm-up in check mode"]
    assert event == "runner_on_ok" and res["changed"] is False and res["warmup"]["requests"] == 0
    assert "POST /generate" not in "\n".join(sim.log().splitlines()[log_lines:])

    ((event, res),) = results["Ledger append in check mode"]
    assert event == "runner_on_ok" and res["appended"] is False and not led.exists()
    assert res["record"]["status"] == "failed" and res["record"]["failure"]["class"] == "hang"

    ((event, res),) = results["Parse a bench_serving file"]
    (point,) = res["ansible_facts"]["sglang_bench"]["points"]
    assert event == "runner_on_ok" and res["changed"] is False
    assert point["output_throughput"] == raw_point["output_throughput"] and point["status"] == "ok"

    ((event, res),) = results["Bad concurrency is refused"]
    assert event == "runner_on_failed"
    assert "workload concurrency must be a non-empty list of integers >= 1" in res["msg"]


def test_a_setting_with_no_role_variable_reaches_the_points_and_the_record(experiment, sim, tmp_path):
    """sglang_bench_workload_override sets extra_request_body, a setting with no variable of its own:
    the role resolves the workload once and hands it whole to the benchmark (its points ask for 4 new
    tokens where output_len says 8) and to the record, whose workload keeps the body."""
    body = {"sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    common = dict(
        experiment["common"],
        sglang_bench_results_dir=str(tmp_path / "host" / "results"),
        sglang_bench_controller_results_dir=str(tmp_path / "controller" / "results"),
        sglang_lab_work_dir=str(tmp_path / "host"),
        sglang_bench_workload_override={"extra_request_body": body},
    )
    play = {
        "name": "A workload with an extra request body",
        "hosts": "all",
        "gather_facts": False,
        "vars": {**common, "sglang_bench_launch": {"tier": "baseline"}},
        "tasks": [
            {"name": f"Entry point {entry}",
             "ansible.builtin.include_role": {"name": "sglang_bench", "tasks_from": entry}}
            for entry in ("benchmark", "record")
        ],
    }
    runner, _results = run_playbook(tmp_path, [play])
    assert runner.status == "successful", tail(runner)
    (record,) = ledger_records(tmp_path / "host" / "results" / "ledger.jsonl")
    assert record["status"] == "success" and record["workload"]["extra_request_body"] == body
    assert [(p["status"], p["total_output_tokens"]) for p in record["points"]] == [
        ("ok", p["num_prompts"] * 4) for p in record["points"]
    ]
