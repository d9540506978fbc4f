"""The JSONL ledger: strict JSON, validation, append-only and atomic appends."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat

import pytest
import sglang_ledger as ledger


def strict_loads(line: str):
    """json.loads that rejects Infinity/NaN, as any strict JSON reader would."""

    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(line, parse_constant=reject)


def make_point(concurrency=1, repeat=0, status="ok", **extra):
    point = {"concurrency": concurrency, "repeat": repeat, "num_prompts": 10, "status": status}
    if status == "failed":
        point["failure"] = {"class": "incomplete_point", "message": "completed 7 of 10"}
    point.update(extra)
    return point


def make_record(**overrides):
    record = ledger.build_record(
        host="sim-local",
        tier="baseline",
        run_id="run-1",
        workload={"input_len": 1024, "output_len": 1024, "request_rate": float("inf")},
        points=[make_point(1), make_point(10)],
    )
    record.update(overrides)
    return record


# ------------------------------------------------------------ JSON safety


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (float("nan"), None),
        (1.5, 1.5),
        ({"a": [float("inf"), (1, float("nan"))]}, {"a": ["inf", [1, None]]}),
        ({"request_rate": float("inf"), "n": 3}, {"request_rate": "inf", "n": 3}),
    ],
)
def test_to_json_safe(value, expected):
    assert ledger.to_json_safe(value) == expected


def test_bench_serving_infinity_becomes_strict_json():
    # bench_serving writes Infinity; Python accepts it, strict JSON does not.
    raw = json.loads('{"request_rate": Infinity, "completed": 10}')
    with pytest.raises(ValueError):
        strict_loads(json.dumps(raw))
    record = make_record(workload={"request_rate": raw["request_rate"]})
    line = ledger.encode_record(record).decode()
    assert line.endswith("\n") and line.count("\n") == 1
    assert strict_loads(line)["workload"]["request_rate"] == "inf"


# ------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda r: r.pop("tier"), "missing key 'tier'"),
        (lambda r: r.update(schema_version=2), "schema_version 2"),
        (lambda r: r.update(status="maybe"), "status 'maybe'"),
        (lambda r: r.update(status="failed", failure=None), "failure.class"),
        (lambda r: r.update(failure={"class": "hang"}), "failure null"),
        (lambda r: r.update(points="none"), "key 'points' must be list"),
        (lambda r: r["points"].append({"concurrency": 1}), "points[2].repeat"),
        (lambda r: r["points"].append(make_point(status="odd")), "points[2].status 'odd'"),
        (lambda r: r["points"].append(dict(make_point(status="failed"), failure=None)), "points[2] failed"),
    ],
)
def test_validate_record_reports_problems(mutate, problem):
    record = make_record()
    assert ledger.validate_record(record) == []
    mutate(record)
    problems = ledger.validate_record(record)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("points", "failure", "status", "failure_class"),
    [
        ([make_point(1), make_point(10)], None, "success", None),
        ([make_point(1), make_point(10, status="failed")], None, "failed", "incomplete_point"),
        ([], None, "failed", "no_points"),
        ([make_point(1)], {"class": "dynamo_fp4_jit", "step": "start"}, "failed", "dynamo_fp4_jit"),
        ([make_point(1, status="failed")], {"class": "process_exited"}, "failed", "process_exited"),
    ],
)
def test_build_record_status(points, failure, status, failure_class):
    record = ledger.build_record("h", "t", "r", {}, points=points, failure=failure)
    assert record["status"] == status
    assert (record["failure"] or {}).get("class") == failure_class
    assert record["schema_version"] == ledger.SCHEMA_VERSION
    assert ledger.validate_record(record) == []


def test_failure_from_point_names_the_point():
    record = ledger.build_record("h", "t", "r", {}, points=[make_point(1), make_point(256, status="failed")])
    assert record["failure"]["concurrency"] == 256
    assert record["failure"]["step"] == "benchmark"


# ------------------------------------------------------------ appending


def test_append_creates_ledger_with_mode(tmp_path):
    path = tmp_path / "ledger.jsonl"
    written = ledger.append_record(str(path), make_record(), mode=0o640)
    assert written["appended"] and written["offset"] == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_size == written["bytes"]


def test_append_never_rewrites_earlier_bytes(tmp_path):
    path = tmp_path / "ledger.jsonl"
    first = make_record(tier="baseline")
    ledger.append_record(str(path), first)
    before = path.read_bytes()
    digest = hashlib.sha256(before).hexdigest()
    ino = path.stat().st_ino
    for index in range(5):
        written = ledger.append_record(str(path), make_record(tier=f"t0{index}"))
        assert written["offset"] >= len(before)
    after = path.read_bytes()
    assert hashlib.sha256(after[: len(before)]).hexdigest() == digest
    assert path.stat().st_ino == ino  # same file: no temp file + rename
    records, problems = ledger.read_ledger(str(path))
    assert problems == []
    assert [r["tier"] for r in records] == ["baseline", "t00", "t01", "t02", "t03", "t04"]
    assert records[0] == strict_loads(before.decode())


def test_same_record_id_is_not_appended_twice(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record = make_record()
    assert ledger.append_record(str(path), record)["appended"] is True
    size = path.stat().st_size
    again = ledger.append_record(str(path), record)
    assert again["appended"] is False and again["bytes"] == 0
    assert path.stat().st_size == size


def test_invalid_record_leaves_no_trace(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with pytest.raises(ValueError, match="invalid ledger record"):
        ledger.append_record(str(path), {"tier": "baseline"})
    assert not path.exists()


def test_torn_line_is_kept_and_next_record_starts_clean(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger.append_record(str(path), make_record(tier="baseline"))
    # An appender that died in the middle of its write leaves half a line.
    with open(path, "ab") as handle:
        handle.write(b'{"schema_version": 1, "tier": "t01", "points": [')
    torn = path.read_bytes()
    written = ledger.append_record(str(path), make_record(tier="t02"))
    assert written["repaired_torn_line"] is True
    data = path.read_bytes()
    assert data.startswith(torn)  # the torn bytes are never rewritten
    records, problems = ledger.read_ledger(str(path))
    assert [r["tier"] for r in records] == ["baseline", "t02"]
    assert len(problems) == 1 and problems[0]["line"] == 2


def test_read_missing_ledger_is_empty(tmp_path):
    assert ledger.read_ledger(str(tmp_path / "absent.jsonl")) == ([], [])


PAYLOAD = 200_000  # far above PIPE_BUF (4096): a plain write() could interleave


def _appender(path: str, worker: int, count: int) -> None:
    for index in range(count):
        pattern = f"{worker}-{index}-".encode()
        blob = (pattern * (PAYLOAD // len(pattern) + 1))[:PAYLOAD]
        record = make_record(
            tier=f"w{worker}",
            run_id=f"{worker}-{index}",
            blob=blob.decode(),
            blob_sha256=hashlib.sha256(blob).hexdigest(),
        )
        ledger.append_record(path, record)


def test_concurrent_appenders_never_interleave(tmp_path):
    path = str(tmp_path / "ledger.jsonl")
    workers, count = 4, 12
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_appender, args=(path, w, count)) for w in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    records, problems = ledger.read_ledger(path)
    assert problems == []
    assert len(records) == workers * count
    for record in records:
        assert hashlib.sha256(record["blob"].encode()).hexdigest() == record["blob_sha256"]
    # Each worker's own records stay in its append order.
    for worker in range(workers):
        runs = [r["run_id"] for r in records if r["tier"] == f"w{worker}"]
        assert runs == [f"{worker}-{i}" for i in range(count)]
    with open(path, "rb") as handle:
        assert handle.read().count(b"\n") == workers * count
    assert os.path.getsize(path) > workers * count * PAYLOAD


def test_the_record_keeps_the_workload_whole_with_extra_request_body(tmp_path):
    """sglang_ledger_append takes the workload whole (WORKLOAD_ARGUMENT_SPEC): extra_request_body
    lands in the record's workload, {} when the resolved workload left it at its default; a body
    that is no JSON object is refused by the workload's one check."""
    from helpers.modules import run_module

    base = {"input_len": 16, "output_len": 8, "concurrency": [1]}
    common = dict(ledger=str(tmp_path / "ledger.jsonl"), run_id="r1", host="h", tier="baseline",
                  failure={"class": "hang", "step": "ready", "message": "no answer"}, collect_provenance=False,
                  _ansible_check_mode=True)
    body = {"sampling_params": {"temperature": 0.7, "max_new_tokens": 8}}
    res = run_module("sglang_ledger_append", tmp_path, workload=dict(base, extra_request_body=body), **common)
    assert res["record"]["workload"]["extra_request_body"] == body
    res = run_module("sglang_ledger_append", tmp_path, workload=base, **common)
    assert res["record"]["workload"]["extra_request_body"] == {}
    res = run_module("sglang_ledger_append", tmp_path, workload=dict(base, extra_request_body={"sampling_params": {}}),
                     **common)
    assert res["failed"] is True and "extra_request_body has a sampling_params without max_new_tokens" in res["msg"]
