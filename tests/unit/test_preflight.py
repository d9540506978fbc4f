"""Unit: the experiment's preflight checks (plugins/module_utils/sglang_preflight.py), the flag
sources and ownership conflicts of a composed launch (sglang_tiers.compose), and the failure
classes a client's error gives (sglang_failure.decide_failure). Table-driven, on real inputs:
model folders and HF cache layouts written to tmp_path, nvidia-smi snapshots as
nvidia_smi.build_snapshot returns them, this process as "our" server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
import sglang_failure as failure
import sglang_preflight as pf
import sglang_tiers as st
import yaml
from helpers.paths import REPO

BASELINE = {"module": "sglang.launch_server", "flags": {"--model": "m", "--tp-size": 8, "--disable-cuda-graph": True,
                                                         "--port": 8000}}


def launch(**flags):
    """A launch as plan_launch returns it (only what the preflight reads)."""
    model = flags.pop("model", "/models/m")
    target = flags.pop("target", "sglang")
    sources = flags.pop("sources", {})
    merged = {"--model": model, "--port": 30000, **flags}
    return {"flags": merged, "model": model, "target": target, "env": {},
            "flag_sources": {f: sources.get(f, "baseline") for f in merged}}


def messages(problems):
    return " | ".join(p["message"] for p in problems)


# --------------------------------------------------------------------------- flag sources and ownership


@pytest.mark.parametrize(
    ("tier", "override", "conflict"),
    [
        ({"flags_add": {"--ep-size": 8}}, {"--ep-size": 1}, {"flag": "--ep-size", "tier_field": "flags_add",
                                                             "tier_value": 8, "override_value": 1}),
        ({"flags_add": {"--mem-fraction-static": 0.00001}}, {"--mem-fraction-static": 0.3},
         {"flag": "--mem-fraction-static", "tier_field": "flags_add", "tier_value": 0.00001, "override_value": 0.3}),
        ({"flags_remove": ["--disable-cuda-graph"]}, {"--disable-cuda-graph": True},
         {"flag": "--disable-cuda-graph", "tier_field": "flags_remove", "tier_value": None, "override_value": True}),
        ({"flags_add": {"--ep-size": 8}}, {"--ep-size": "8"}, None),  # the same argv tokens
        ({"flags_remove": ["--disable-cuda-graph"]}, {"--disable-cuda-graph": None}, None),  # both drop it
        ({"flags_add": {"--ep-size": 8}}, {"--port": 1}, None),  # the override sets other flags
    ],
)
def test_flag_conflicts(tier, override, conflict):
    assert st.flag_conflicts(tier, override) == ([conflict] if conflict else [])
    assert st.compose(BASELINE, tier, override)["flag_conflicts"] == ([conflict] if conflict else [])


def test_compose_names_who_set_each_flag():
    out = st.compose(BASELINE, {"flags_add": {"--ep-size": 8}, "flags_remove": ["--disable-cuda-graph"]},
                     {"--port": 30000, "--model": "/local"})
    assert out["flag_sources"] == {"--model": "host_override", "--tp-size": "baseline", "--port": "host_override",
                                   "--ep-size": "tier"}


def test_plan_launch_carries_flags_sources_and_conflicts():
    data = REPO / "data"
    baseline = yaml.safe_load((data / "baseline.yml").read_text())
    catalog = yaml.safe_load((data / "tiers.yml").read_text())
    schema = json.loads((data / "tier_schema.json").read_text())
    out = st.plan_launch(baseline=baseline, catalog=catalog, schema=schema, tier_id="t04-ep8", manifest=None,
                         flags_override={"--ep-size": 1})
    launch_ = out["launch"]
    assert launch_["flags"]["--ep-size"] == 1 and launch_["flag_sources"]["--ep-size"] == "host_override"
    assert launch_["flag_conflicts"] == [{"flag": "--ep-size", "tier_field": "flags_add", "tier_value": 8,
                                          "override_value": 1}]


def test_a_conflict_is_a_problem_naming_flag_values_and_fix():
    got = pf.flag_conflict_problems("tiny-nomem", [{"flag": "--mem-fraction-static", "tier_field": "flags_add",
                                                    "tier_value": 1e-05, "override_value": 0.3}])
    assert got[0]["var"] == "sglang_launch_flags_override['--mem-fraction-static']" and got[0]["value"] == 0.3
    text = got[0]["message"]
    assert "tier 'tiny-nomem' sets 1e-05" in text and "sets 0.3" in text and "Drop --mem-fraction-static" in text


# --------------------------------------------------------------------------- benchmark


CFG = {"concurrency": [1, 10, 256, 1024], "num_prompts": {"multiplier": 1, "floor": 8}}


@pytest.mark.parametrize(
    ("timeout", "conversations", "found"),
    [
        (7200, 2048, []),
        ("7200", None, []),
        (7200.0, None, []),
        (None, None, []),
        (0, None, ["sglang_bench_point_timeout_s"]),
        ("abc", None, ["sglang_bench_point_timeout_s"]),
        (True, None, ["sglang_bench_point_timeout_s"]),
        (7200, 1000, ["sglang_experiment_sim_sharegpt_conversations"]),  # the c=1024 point sends 1024 prompts
        (7200, 1024, []),
    ],
)
def test_benchmark_problems(timeout, conversations, found):
    got = pf.benchmark_problems(CFG, timeout, conversations)
    assert [p["var"] for p in got] == found
    if "sglang_experiment_sim_sharegpt_conversations" in found:
        assert "at least 1024" in got[0]["message"]


def test_dataset_path_must_exist_unless_generated(tmp_path):
    present = tmp_path / "share.json"
    present.write_text("[]")
    assert pf.dataset_problems(None) == []
    assert pf.dataset_problems(str(present)) == []
    assert pf.dataset_problems(str(tmp_path / "gen.json"), generated=str(tmp_path / "gen.json")) == []
    got = pf.dataset_problems(str(tmp_path / "missing.json"))
    assert got[0]["var"] == "sglang_bench_dataset_path" and "does not exist" in got[0]["message"]


# --------------------------------------------------------------------------- GPUs needed


@pytest.mark.parametrize(
    ("flags", "needed"),
    [
        ({"--tp-size": 8}, 8),
        ({"--tp": "4", "--dp-size": 2}, 8),
        ({"--tp-size": 8, "--dp-size": 2, "--enable-dp-attention": True}, 8),  # t10: DP groups inside TP8
        ({"--tp-size": 2, "--pp-size": 2}, 4),
        ({}, 1),
        ({"--tp-size": "x"}, 1),
    ],
)
def test_gpus_needed(flags, needed):
    assert pf.gpus_needed(flags) == needed


# --------------------------------------------------------------------------- the port


HOLDER = {"pid": 4242, "cmdline": "python -m http.server 30000", "address": "0.0.0.0:30000"}
SGLANG_HOLDER = {"pid": 4243, "cmdline": "python3 -m sglang.launch_server --port 30000", "address": "0.0.0.0:30000"}
STATE = {"tier": "baseline", "pid": 100, "port": 30000}


@pytest.mark.parametrize(
    ("port", "server_port", "holders", "pids", "compiled", "expect"),
    [
        (30000, 30000, [], set(), (), []),
        (70000, 30000, [], set(), (), ["a TCP port is an integer 1-65535"]),
        (0, 30000, [], set(), (), ["a TCP port is an integer 1-65535"]),
        ("http", 30000, [], set(), (), ["a TCP port is an integer 1-65535"]),
        ("30000", 30000, [], set(), (), []),
        (30000, 30001, [], set(), (), ["but sglang_server_port is 30001"]),
        (30000, 30000, [HOLDER], {100, 101}, (), ["held by pid 4242 (python -m http.server 30000)"]),
        (30000, 30000, [dict(HOLDER, pid=101)], {100, 101}, (), []),  # our server holds it
        (30000, 30000, [SGLANG_HOLDER], set(), pf.stop_patterns(True), []),  # the stop's net stops it
        (30000, 30000, [SGLANG_HOLDER], set(), pf.stop_patterns(False), ["held by pid 4243"]),
        (30000, 30000, [dict(HOLDER, pid=None)], {100}, (), []),  # invisible owner, our server on the port
        (30000, 30000, [dict(HOLDER, pid=None)], set(), (), ["a process this user cannot see"]),
    ],
)
def test_port_problems(port, server_port, holders, pids, compiled, expect):
    got = pf.port_problems(launch(**{"--port": port, "sources": {"--port": "host_override"}}), server_port,
                           None, holders, pids, STATE if pids else None, compiled)
    assert len(got) == len(expect), messages(got)
    for problem, text in zip(got, expect, strict=True):
        assert text in problem["message"]
    if expect and "1-65535" in expect[0]:
        assert got[0]["var"] == "--port" and got[0]["value"] == port
        assert "sglang_lab_port" in got[0]["message"]


def test_the_client_port_must_be_the_servers():
    got = pf.port_problems(launch(), 30000, 8000, [], set())
    assert [p["var"] for p in got] == ["sglang_bench_port"] and "but sglang_bench_port is 8000" in got[0]["message"]


def test_our_pids_are_the_recorded_session():
    me = os.getpid()
    state = {"pid": me, "sid": os.getsid(0), "started_at": "1970-01-01T00:00:00+00:00"}
    assert me in pf.our_pids(state)
    assert pf.our_pids({}) == set()
    assert pf.our_pids({"pid": 2 ** 22 + 7, "sid": None}) == set()  # recorded, no longer running


def test_a_real_foreign_listener_is_found_by_the_lifecycle_helpers():
    from sglang_process import port_holders, port_is_free

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not port_is_free(port)
        got = pf.port_problems(launch(**{"--port": port}), port, port, port_holders(port), set(), None)
    assert len(got) == 1 and f"held by pid {os.getpid()}" in got[0]["message"]


# --------------------------------------------------------------------------- model and tokenizer


def folder(path, *names, index=None):
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_text("{}")
    if index:
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    return path


@pytest.mark.parametrize(
    ("names", "index", "missing"),
    [
        (("config.json", "model.safetensors"), None, []),
        (("config.json", "pytorch_model.bin"), None, []),
        (("model.safetensors",), None, ["config.json"]),
        (("config.json", "tokenizer.json"), None, ["weight files"]),
        (("config.json", "a.safetensors"), {"w1": "a.safetensors", "w2": "b.safetensors"}, ["1 of the 2 shards"]),
        (("config.json", "a.safetensors", "b.safetensors"), {"w1": "a.safetensors", "w2": "b.safetensors"}, []),
    ],
)
def test_weight_problems(tmp_path, names, index, missing):
    got = pf.weight_problems(str(folder(tmp_path / "m", *names, index=index)))
    assert len(got) == len(missing)
    for text, want in zip(got, missing, strict=True):
        assert want in text


def hub_cache(root, repo="org/model", files=("config.json", "model.safetensors", "tokenizer.json"), ref="main"):
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    commit = "a" * 40
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / ref).write_text(commit)
    folder(repo_dir / "snapshots" / commit, *files)
    return commit


def test_hub_snapshot_reads_the_cache_layout(tmp_path):
    commit = hub_cache(tmp_path)
    assert pf.hub_snapshot(str(tmp_path), "org/model") == (str(tmp_path / "models--org--model" / "snapshots" / commit),
                                                           None)
    assert pf.hub_snapshot(str(tmp_path), "org/model", commit)[0].endswith(commit)
    assert "refs/v2 does not exist" in pf.hub_snapshot(str(tmp_path), "org/model", "v2")[1]
    assert "does not exist" in pf.hub_snapshot(str(tmp_path), "org/other")[1]


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("local-complete", None),
        ("local-no-weights", "lacks weight files"),
        ("missing-path", "no such folder on the host"),
        ("hub-complete", None),
        ("hub-not-cached", "not in the HF cache"),
        ("hub-incomplete", "lacks weight files"),
        ("hub-probe-says-missing", "LocalEntryNotFoundError"),
        ("sim-own-folder-missing", None),
        ("sim-other-folder-missing", "The simulator setup writes only its own folder"),
        ("sim-hub-id", "not a Hub id"),
        ("sim-folder-present", None),
    ],
)
def test_model_problems(tmp_path, case, expect):
    cache = tmp_path / "hub"
    cache.mkdir()
    sim_model = str(tmp_path / "work" / "sim-model")
    hub = None
    if case == "local-complete":
        got = launch(model=str(folder(tmp_path / "m", "config.json", "model.safetensors")))
    elif case == "local-no-weights":
        got = launch(model=str(folder(tmp_path / "m", "config.json")))
    elif case == "missing-path":
        got = launch(model=str(tmp_path / "nope"))
    elif case.startswith("hub-"):
        if case == "hub-complete":
            hub_cache(cache)
        elif case == "hub-incomplete":
            hub_cache(cache, files=("config.json",))
        elif case == "hub-probe-says-missing":
            hub = {"org/model": {"path": None, "error": "LocalEntryNotFoundError: not in cache"}}
        got = launch(model="org/model")
    elif case == "sim-own-folder-missing":
        got = launch(model=sim_model, target="simulator")
    elif case == "sim-other-folder-missing":
        got = launch(model=str(tmp_path / "elsewhere"), target="simulator", sources={"--model": "host_override"})
    elif case == "sim-hub-id":
        got = launch(model="org/model", target="simulator")
    else:
        got = launch(model=str(folder(tmp_path / "mine", "config.json", "tokenizer.json")), target="simulator")
    problems = pf.model_problems(got, sim_model, hub, str(cache))
    if expect is None:
        assert problems == [], messages(problems)
    else:
        assert len(problems) == 1 and expect in problems[0]["message"], messages(problems)
        assert problems[0]["var"] == "--model" and problems[0]["value"] == got["model"]


def test_tokenizer_problems(tmp_path):
    cache = tmp_path / "hub"
    hub_cache(cache)
    ok = str(folder(tmp_path / "tok", "tokenizer.json"))
    empty = str(folder(tmp_path / "empty", "config.json"))
    sim = launch(target="simulator")
    assert pf.tokenizer_problems(ok, "sglang_bench_tokenizer", sim) == []
    assert pf.tokenizer_problems("org/model", "sglang_bench_tokenizer", launch(), hf_cache=str(cache)) == []
    assert pf.tokenizer_problems("/gen", "x", sim, sim_model="/gen") == []
    assert "none of tokenizer.json" in pf.tokenizer_problems(empty, "sglang_bench_tokenizer", sim)[0]["message"]
    got = pf.tokenizer_problems("org/absent", "sglang_bench_tokenizer", launch(), hf_cache=str(cache))
    assert got[0]["var"] == "sglang_bench_tokenizer" and "does not load offline" in got[0]["message"]


def test_hub_cache_dir_follows_huggingface_hub():
    assert pf.hub_cache_dir({"HF_HUB_CACHE": "/c"}, "/h") == "/c"
    assert pf.hub_cache_dir({"HF_HOME": "/e"}, "/h") == "/e/hub"
    assert pf.hub_cache_dir({}, "/h") == "/h/hub"


# --------------------------------------------------------------------------- GPUs


def snapshot(n=8, processes=()):
    gpus = [{"index": i, "uuid": f"GPU-{i}", "processes": []} for i in range(n)]
    return {"available": True, "gpus": gpus, "processes": [dict(p) for p in processes], "processes_known": True}


APP = {"pid": 555, "process_name": "python", "used_memory_mib": 8000, "gpu_index": 3}


@pytest.mark.parametrize(
    ("snap", "needed", "pids", "env", "expect"),
    [
        (snapshot(8), 8, set(), {}, []),
        (snapshot(1), 8, set(), {}, ["needs 8 GPU(s)"]),
        (snapshot(8), 8, set(), {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, ["but 4 are visible"]),
        (snapshot(8, [APP]), 8, set(), {}, ["held by pid 555"]),
        (snapshot(8, [APP]), 8, {555}, {}, []),  # our server's memory: the stop frees it
        (snapshot(8, [APP]), 2, set(), {"CUDA_VISIBLE_DEVICES": "0,1"}, []),  # on a GPU the server does not use
        ({"available": False, "error": "nvidia-smi not found"}, 1, set(), {}, ["nvidia-smi does not answer"]),
    ],
)
def test_gpu_problems(snap, needed, pids, env, expect):
    got = pf.gpu_problems(snap, needed, pids, env)
    assert len(got) == len(expect), messages(got)
    for problem, text in zip(got, expect, strict=True):
        assert text in problem["message"]


def test_a_gpu_process_the_stop_would_kill_is_ours():
    snap = snapshot(8, [APP])
    compiled = pf.stop_patterns(True)
    assert pf.gpu_problems(snap, 8, set(), {}, compiled, lambda pid: "sglang::scheduler_TP3") == []
    assert pf.gpu_problems(snap, 8, set(), {}, compiled, lambda pid: "python train.py")


# --------------------------------------------------------------------------- disk


def statvfs(free_mib):
    return lambda path: SimpleNamespace(f_bavail=free_mib, f_frsize=pf.MIB, f_fsid=1)


def test_disk_problems(tmp_path):
    assert pf.disk_problems([str(tmp_path / "logs")], 1024, statvfs(2048)) == []
    got = pf.disk_problems([str(tmp_path / "logs"), str(tmp_path / "results")], 1024, statvfs(100))
    assert len(got) == 1  # one file system, one message
    assert got[0]["var"] == "sglang_experiment_min_free_mib" and "100 MiB free" in got[0]["message"]
    assert pf.existing_ancestor(str(tmp_path / "a" / "b")) == str(tmp_path)


# --------------------------------------------------------------------------- FlashInfer patches


CATALOG = yaml.safe_load((REPO / "data" / "flashinfer_patches.yml").read_text())["patches"]
PATCH_FILES = [spec["patch"] for spec in CATALOG.values()]


def installed(tmp_path, version="0.6.7.post3", state="original"):
    site = tmp_path / "site"
    for spec in CATALOG.values():
        target = site / spec["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(state)
    (site / "flashinfer").mkdir(exist_ok=True)
    return {"version": version, "site": str(site), "module_file": str(site / "flashinfer" / "__init__.py")}


def sha_of(state_by_file):
    def sha(path):
        if not os.path.exists(path):
            return None
        for spec in CATALOG.values():
            if path.endswith(spec["file"]):
                return spec[state_by_file] if state_by_file in spec else "0" * 64
        return None
    return sha


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("ok", []),
        ("not-installed", ["needs flashinfer-python installed"]),
        ("stand-in-on-pythonpath", ["not the installed flashinfer-python"]),
        ("other-version", ["is made for flashinfer-python 0.6.7.post3"] * len(CATALOG)),
        ("file-missing", ["does not have"] * len(CATALOG)),
        ("file-changed", ["neither the original nor the patched file"] * len(CATALOG)),
        ("patch-file-missing", ["is missing from the checkout"] * len(CATALOG)),
        ("unknown-id", ["does not know"]),
    ],
)
def test_flashinfer_problems(tmp_path, case, expect):
    found = installed(tmp_path)
    sha = sha_of("original_sha256")
    wanted = [next(iter(CATALOG))]
    files = PATCH_FILES
    if case == "not-installed":
        found = {"version": None, "site": found["site"], "module_file": "/tmp/site/flashinfer/__init__.py"}
    elif case == "stand-in-on-pythonpath":
        found["module_file"] = "/tmp/site/flashinfer/__init__.py"
    elif case == "other-version":
        found["version"] = "0.6.8"
    elif case == "file-missing":
        sha = lambda path: None  # noqa: E731
    elif case == "file-changed":
        sha = sha_of("nothing")
    elif case == "patch-file-missing":
        files = []
    elif case == "unknown-id":
        wanted = ["no-such-patch"]
    got = pf.flashinfer_problems(found, CATALOG, wanted, files, sha)
    assert [p["check"] for p in got] == ["flashinfer"] * len(expect), messages(got)
    for problem, text in zip(got, expect, strict=True):
        assert text in problem["message"]


def test_patch_states_bring_every_catalog_patch_to_the_tiers_state():
    first, *rest = CATALOG
    states = {p["id"]: p["state"] for p in pf.patch_states(CATALOG, [first])}
    assert states == {first: "present", **{pid: "absent" for pid in rest}}


def test_the_ml_env_probe_runs():
    out = subprocess.run([sys.executable, "-c", pf.PROBE, json.dumps({"flashinfer": True, "hub": [
        {"id": "org/not-cached", "cache_dir": "/nonexistent", "revision": None}]})],
        capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["flashinfer"]["version"] is None  # no flashinfer-python in this venv
    assert answer["hub"]["org/not-cached"]["path"] is None and answer["hub"]["org/not-cached"]["error"]


def test_format_problems_lists_each():
    text = pf.format_problems([pf.problem("port", "--port", 70000, "bad port"), pf.problem("model", "--model", "x",
                                                                                          "no model")])
    assert text.splitlines() == ["The experiment cannot run; nothing was stopped or started:", "- [port] bad port",
                                 "- [model] no model"]


# --------------------------------------------------------------------------- failure classes from the client's error


def warmup(status, body):
    return {"msg": f"sglang_warmup: 1 of 4 warm-up requests failed; first: HTTP {status}: {body}",
            "failure_class": "warmup_failed", "failure_step": "warmup", "status": status, "body": body}


TASK = {"name": "some task", "tags": ["sglang_experiment_warmup"]}
BENCH_TASK = {"name": "Benchmark every point", "tags": ["sglang_experiment_benchmark"]}


@pytest.mark.parametrize(
    ("task", "result", "points", "expected"),
    [
        (TASK, warmup(None, "<urlopen error [Errno 111] Connection refused>"), None, "warmup_refused"),
        (TASK, warmup(None, "timed out"), None, "warmup_timeout"),
        (TASK, warmup(None, "Remote end closed connection without response (RemoteDisconnected)"), None,
         "warmup_connection_lost"),
        (TASK, warmup(200, "<html>not json</html>"), None, "warmup_bad_answer"),
        (TASK, warmup(503, "busy"), None, "warmup_failed"),  # the server's own HTTP answer, status and body kept
        (TASK, {"msg": "urlopen error [Errno 111] Connection refused"}, None, "warmup_refused"),  # no class given
        (BENCH_TASK, {"msg": "Cannot connect to host 127.0.0.1:30000"}, None, "server_unreachable"),
        (BENCH_TASK, {"msg": "Job reached maximum time limit: timeout"}, None, "bench_timeout"),
        (BENCH_TASK, {"msg": "sglang_bench crashed"}, None, "benchmark_failed"),
        (BENCH_TASK, {"msg": "no tokenizer ... timeout", "failure_class": "server_unreachable"}, None,
         "server_unreachable"),  # a module's own specific class is kept
        (BENCH_TASK, {"msg": "1 point failed: Connection refused"},
         [{"concurrency": 1, "repeat": 0, "status": "failed", "failure": {"class": "incomplete_point"}}],
         "incomplete_point"),  # the point's own class comes first
    ],
)
def test_a_live_servers_client_error_gets_a_class(task, result, points, expected):
    got = failure.decide_failure(points, task=task, result=result)
    assert got["class"] == expected
    assert got["step"] in ("warmup", "benchmark")


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [(None, "Connection refused", "refused"), (None, "The read operation timed out", "timeout"),
     (None, "Connection reset by peer", "connection_lost"), (404, "", "http_status"), (200, "x", "bad_answer"),
     (None, "something else", None)],
)
def test_client_error(status, text, kind):
    assert failure.client_error(status, text) == kind


def test_sim_model_complete_is_make_tokenizers_if_missing_test(tmp_path):
    """The preflight's answer decides whether the validate step starts the generator at all, so it must be
    the generator's own --if-missing test, folder state by folder state."""
    from sglang_sim.make_tokenizer import is_complete

    folder = tmp_path / "sim-model"
    states = []

    def both(conversations):
        states.append((pf.sim_model_complete(str(folder), conversations), is_complete(str(folder), conversations)))

    both(0)  # no folder
    folder.mkdir()
    for name in pf.SIM_MODEL_FILES[:-1]:
        (folder / name).write_text("{}")
    both(0)  # a file missing
    (folder / pf.SIM_MODEL_FILES[-1]).write_text("{}")
    both(0)
    both(3)  # no ShareGPT file
    (folder / pf.SIM_SHAREGPT_NAME).write_text("not json")
    both(3)
    (folder / pf.SIM_SHAREGPT_NAME).write_text(json.dumps([{}, {}]))
    both(3)  # too few
    both(2)
    assert [mine for mine, _ in states] == [False, False, True, False, False, False, True]
    assert [mine for mine, _ in states] == [theirs for _, theirs in states]


@pytest.mark.parametrize("mode, refused", [("0640", False), ("640", False), (None, False), ("rw", True),
                                           ("0999", True), ("77777", True)])
def test_the_ledger_mode_is_read_as_the_record_step_reads_it(mode, refused):
    """A mode the record step would refuse after the whole benchmark is refused before the lock."""
    found = pf.ledger_mode_problems(mode)
    assert bool(found) is refused
    if refused:
        assert found[0]["var"] == "sglang_bench_ledger_mode" and repr(mode) in found[0]["message"]


# --- SGLang's own parser, the preflight's last check (module sglang_experiment_preflight, option parser) -------

FAKE_ML_ENV_PYTHON = """#!/bin/bash
# A stand-in for the ml-env's python: the fingerprint from importlib.metadata, then prepare_server_args,
# which refuses --bad. Each parser run leaves a line in $0.runs.
if [[ "$2" == *importlib* ]]; then
  echo '{"installed": true, "version": "0.5.17", "server_args": "/x/server_args.py", "server_args_sha256": "abc"}'
  exit 0
fi
echo run >> "$0.runs"
if [[ " $* " == *" --bad "* ]]; then echo "error: unrecognized arguments: --bad" >&2; exit 2; fi
echo "SGLang accepted the argv: ServerArgs m"
"""


def fake_python(tmp_path):
    path = tmp_path / "python"
    path.write_text(FAKE_ML_ENV_PYTHON)
    path.chmod(0o755)
    return path


def parser_launch(python, *extra):
    return {"tier": "t03", "interpreter": str(python), "argv": ["--model-path", "m", "--tp-size", "8", *extra],
            "env": {"SGLANG_X": "1"}}


def test_the_preflights_parser_check_keeps_an_acceptance_and_refuses_with_sglangs_words(tmp_path):
    import sglang_experiment_preflight as module

    python = fake_python(tmp_path)
    settings = {"cache_dir": str(tmp_path / "cache"), "timeout": 30}
    verdict, problems = module._real_parser(parser_launch(python), settings)
    assert problems == [] and verdict["accepted"] and not verdict["cached"]
    again, problems = module._real_parser(parser_launch(python), settings)
    assert problems == [] and again["cached"] and again["key"] == verdict["key"]
    assert (tmp_path / "python.runs").read_text().count("run") == 1  # the second answer is the memo's
    refused, problems = module._real_parser(parser_launch(python, "--bad"), settings)
    assert refused["accepted"] is False and len(problems) == 1
    assert problems[0]["check"] == "real_parser"
    assert "rejected tier 't03'" in problems[0]["message"] and "unrecognized arguments: --bad" in problems[0]["message"]
    gone, problems = module._real_parser(parser_launch(tmp_path / "no-python"), settings)
    assert gone is None and "could not check tier 't03'" in problems[0]["message"]


def test_the_parser_waits_for_every_other_check(tmp_path):
    """A launch refused for something that needs no SGLang (port 0, no model) never reaches SGLang's parser."""
    from helpers.modules import run_module

    python = fake_python(tmp_path)
    launch = dict(parser_launch(python), flags={"--port": 0}, target="sglang", model=str(tmp_path / "no-model"))
    result = run_module("sglang_experiment_preflight", tmp_path, tier="t03", launch=launch, run_dir=str(tmp_path),
                        bench_settings={"concurrency": [1]}, parser={"cache_dir": str(tmp_path / "cache")})
    assert result["failed"] and "port" in result["checks"], result
    assert "real_parser" not in result["checks"] and "parser" not in result
    assert not (tmp_path / "python.runs").exists() and not (tmp_path / "cache").exists()
