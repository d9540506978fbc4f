"""Unit tests of the SGLang-protocol simulator's pure parts (simulator/sglang_sim).

The simulator is SYNTHETIC; these tests check that it parses SGLang's command
line, lays out SGLang's process tree, applies its documented speed table and
builds an offline tokenizer -- not any performance number.
"""

from __future__ import annotations

import asyncio
import filecmp
import gzip
import json
import re

import pytest
from helpers.paths import FIXTURES, REPO
from sglang_sim import config, manifest, metrics, procs, radix_cache, sglang_rules, throughput, tokenizer, topology
from sglang_sim import server as ls
from sglang_sim.engine import Engine, GenRequest

# A small manifest in the contract's format, covering each option kind SGLang uses.
MINI = {
    "sglang_version": "0.5.10.post1",
    "source": "test",
    "source_sha256": None,
    "options": [
        {"flags": ["--model-path", "--model"], "dest": "model_path", "takes_value": True, "nargs": None,
         "type": "str", "choices": None, "action": "store", "deprecated": False, "replacement": None,
         "default": None},
        {"flags": ["--tokenizer-path"], "dest": "tokenizer_path", "takes_value": True, "nargs": None,
         "type": "str", "choices": None, "action": "store", "deprecated": False, "replacement": None,
         "default": None},
        {"flags": ["--served-model-name"], "dest": "served_model_name", "takes_value": True,
         "nargs": None, "type": "str", "choices": None, "action": "store", "deprecated": False,
         "replacement": None, "default": None},
        {"flags": ["--port"], "dest": "port", "takes_value": True, "nargs": None, "type": "int",
         "choices": None, "action": "store", "deprecated": False, "replacement": None, "default": 30000},
        {"flags": ["--tensor-parallel-size", "--tp-size"], "dest": "tensor_parallel_size",
         "takes_value": True, "nargs": None, "type": "int", "choices": None, "action": "store",
         "deprecated": False, "replacement": None, "default": 1},
        {"flags": ["--kv-cache-dtype"], "dest": "kv_cache_dtype", "takes_value": True, "nargs": None,
         "type": "str", "choices": ["auto", "fp8_e4m3"], "action": "store", "deprecated": False,
         "replacement": None, "default": "auto"},
        {"flags": ["--disable-cuda-graph"], "dest": "disable_cuda_graph", "takes_value": False,
         "nargs": None, "type": None, "choices": None, "action": "store_true", "deprecated": False,
         "replacement": None, "default": False},
        {"flags": ["--cuda-graph-bs"], "dest": "cuda_graph_bs", "takes_value": True, "nargs": "+",
         "type": "int", "choices": None, "action": "store", "deprecated": False, "replacement": None,
         "default": None},
        {"flags": ["--max-total-tokens"], "dest": "max_total_tokens", "takes_value": True, "nargs": None,
         "type": "human_readable_int", "choices": None, "action": "store", "deprecated": False,
         "replacement": None, "default": None},
        {"flags": ["--enable-thing"], "dest": "enable_thing", "takes_value": False, "nargs": None,
         "type": None, "choices": None, "action": "BooleanOptionalAction", "deprecated": False,
         "replacement": None, "default": True},
        {"flags": ["--enable-piecewise-cuda-graph"], "dest": "enable_piecewise_cuda_graph",
         "takes_value": False, "nargs": None, "type": None, "choices": None, "action": "DeprecatedAction",
         "deprecated": True, "replacement": None, "default": None},
        {"flags": ["--stream-output"], "dest": "incremental_streaming_output", "takes_value": False,
         "nargs": 0, "type": None, "choices": None, "action": "DeprecatedStoreTrueAction",
         "deprecated": True, "replacement": "--incremental-streaming-output", "default": False},
        # deprecated in its help text only: SGLang parses it as store_true, warns after parsing
        {"flags": ["--enable-nan-detection"], "dest": "enable_nan_detection", "takes_value": False,
         "nargs": 0, "type": None, "choices": None, "action": "store_true", "deprecated": True,
         "deprecated_by": "help", "replacement": None, "default": False},
        {"flags": ["--tool-call-parser"], "dest": "tool_call_parser", "takes_value": True, "nargs": None,
         "type": "str", "choices": ["glm", "glm45", "glm47"], "action": "store", "deprecated": False,
         "replacement": None, "default": None},
    ],
}


def parse(argv, warnings=None):
    sink = warnings if warnings is not None else []
    return manifest.parse_server_args(argv, MINI, sink.append)


# --- manifest / command line ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "key", "expected"),
    [
        (["--model", "m"], "model_path", "m"),
        (["--model-path", "m"], "tokenizer_path", "m"),
        (["--model-path", "m"], "served_model_name", "m"),
        (["--model-path", "m", "--served-model-name", "glm-5"], "served_model_name", "glm-5"),
        (["--model-path", "m", "--tp-size", "8"], "tp_size", 8),
        (["--model-path", "m", "--tensor-parallel-size", "4"], "tp_size", 4),
        (["--model-path", "m", "--kv-cache-dtype", "fp8_e4m3"], "kv_cache_dtype", "fp8_e4m3"),
        (["--model-path", "m", "--disable-cuda-graph"], "disable_cuda_graph", True),
        (["--model-path", "m"], "disable_cuda_graph", False),
        (["--model-path", "m", "--cuda-graph-bs", "1", "2", "4"], "cuda_graph_bs", [1, 2, 4]),
        (["--model-path", "m", "--max-total-tokens", "25.6k"], "max_total_tokens", 25600),
        (["--model-path", "m", "--max-total-tokens", "1Ki"], "max_total_tokens", 1024),
        (["--model-path", "m", "--no-enable-thing"], "enable_thing", False),
        (["--model-path", "m", "--port", "8000"], "port", 8000),
        (["--model-path", "m", "--stream-output"], "incremental_streaming_output", True),
    ],
)
def test_parse_server_args_values(argv, key, expected):
    assert parse(argv)[key] == expected


def test_parse_uses_servergargs_names_and_drops_noop_deprecated():
    args = parse(["--model-path", "m", "--enable-piecewise-cuda-graph"])
    assert "tensor_parallel_size" not in args and args["tp_size"] == 1
    assert "enable_piecewise_cuda_graph" not in args


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model-path", "m", "--bogus-flag"], "unrecognized arguments: --bogus-flag"),
        (["--model-path", "m", "--kv-cache-dtype", "fp5"], "invalid choice: 'fp5'"),
        (["--model-path", "m", "--port", "abc"], "argument --port: invalid int value: 'abc'"),
        (["--model-path", "m", "--port", "70000"], "argument --port: 70000 is out of range (1-65535)"),
        (["--model-path", "m", "--port", "0"], "argument --port: 0 is out of range (1-65535)"),
        (["--port", "8000"], "the following arguments are required: --model-path/--model"),
        (["--model-path", "m", "--tp", "2"], "unrecognized arguments: --tp 2"),  # no abbreviations
    ],
)
def test_parse_errors_are_one_argparse_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("launch_server.py: error: ")
    assert message in err


@pytest.mark.parametrize(
    ("flag", "text"),
    [
        ("--enable-piecewise-cuda-graph",
         "The command line argument '--enable-piecewise-cuda-graph' is deprecated and will be "
         "removed in future versions."),
        ("--stream-output",
         "'--stream-output' is deprecated and will be removed in a future release. "
         "Use '--incremental-streaming-output' instead."),
    ],
)
def test_deprecated_flags_warn_like_sglang(flag, text):
    warnings: list[str] = []
    parse(["--model-path", "m", flag], warnings)
    assert warnings == [text]
    assert manifest.sglang_warning_text(text) == f"\033[1;33m{text}\033[0m"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model-path", "m"], []),
        (["--model-path", "m", "--tool-call-parser", "glm47"], []),
        (["--model-path", "m", "--tool-call-parser", "glm45"],
         ["The tool_call_parser 'glm45' is deprecated. Please use 'glm' instead."]),
        (["--model-path", "m", "--enable-nan-detection"],
         ["--enable-nan-detection is deprecated. Use SGLANG_SPEC_NAN_DETECTION=1 and "
          "SGLANG_SPEC_OOB_DETECTION=1 instead."]),
    ],
)
def test_help_only_deprecations_parse_then_warn_like_post_init(argv, expected):
    parse_time: list[str] = []
    args = parse(argv, parse_time)
    assert parse_time == []
    assert manifest.post_parse_warnings(args) == expected


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"options": []},
        {"sglang_version": "x", "options": [{"flags": ["port"], "dest": "port"}]},
        {"sglang_version": "x", "options": [{"flags": ["--port"]}]},
    ],
)
def test_check_manifest_rejects_malformed(data):
    with pytest.raises(manifest.ManifestError):
        manifest.check_manifest(data)


def test_resolve_manifest_path(tmp_path, monkeypatch):
    good = tmp_path / "m.json"
    good.write_text(json.dumps(MINI))
    assert manifest.resolve_manifest_path({"SGLANG_SIM_MANIFEST": str(good)}) == good
    with pytest.raises(manifest.ManifestError, match="does not name a file"):
        manifest.resolve_manifest_path({"SGLANG_SIM_MANIFEST": str(tmp_path / "none.json")})
    monkeypatch.setattr(manifest, "default_manifest_paths", lambda: [tmp_path / "a.json"])
    with pytest.raises(manifest.ManifestError, match="no flag manifest found") as exc:
        manifest.resolve_manifest_path({})
    assert "\n" not in str(exc.value)
    (tmp_path / "a.json").write_text(json.dumps(MINI))
    assert manifest.resolve_manifest_path({}) == tmp_path / "a.json"
    with pytest.raises(manifest.ManifestError, match="cannot read"):
        bad = tmp_path / "bad.json"
        bad.write_text("{")
        manifest.load_manifest(bad)


def test_default_manifest_path_is_the_repo_data_path():
    assert manifest.default_manifest_paths()[0] == REPO / "data/flag_manifests/sglang-0.5.10.post1.json"


def test_server_args_repr_shape():
    assert manifest.server_args_repr({"a": 1, "b": "x"}) == "server_args=ServerArgs(a=1, b='x')"


# --- environment knobs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "attr", "expected"),
    [
        ({}, "load_seconds", 2.0),
        ({}, "speed", 1.0),
        ({}, "faults", frozenset()),
        ({"SGLANG_SIM_LOAD_SECONDS": "0"}, "load_seconds", 0.0),
        ({"SGLANG_SIM_SPEED": "25"}, "speed", 25.0),
        ({"SGLANG_SIM_FAULT": "hang, ignore_sigterm"}, "faults", frozenset({"hang", "ignore_sigterm"})),
        ({"SGLANG_SIM_FAULT_AFTER": "3"}, "fault_after", 3),
        ({"SGLANG_SIM_TOKENIZER": "/t"}, "tokenizer", "/t"),
        ({"SGLANG_SIM_GPU_MEM_MB": "1024"}, "gpu", config.GpuConfig(mem_mb=1024)),
        ({"SGLANG_SIM_NCCL_ALLREDUCE": "1"}, "gpu", config.GpuConfig(nccl_allreduce=True)),
        ({"SGLANG_SIM_NCCL_ALLREDUCE": "off"}, "gpu", config.GpuConfig()),
        ({}, "crash_diagnostics", True),
        ({"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0"}, "crash_diagnostics", True),  # the coredump one is still on
        ({"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "n", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "False"},
         "crash_diagnostics", False),
    ],
)
def test_parse_env(env, attr, expected):
    assert getattr(config.parse_env(env), attr) == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SGLANG_SIM_FAULT": "explode"}, "unknown fault(s) explode"),
        ({"SGLANG_SIM_SPEED": "0"}, "must be > 0"),
        ({"SGLANG_SIM_SPEED": "fast"}, "is not a number"),
        ({"SGLANG_SIM_SPEED": "inf"}, "must be a finite number"),
        ({"SGLANG_SIM_LOAD_SECONDS": "-1"}, "must be >= 0"),
        ({"SGLANG_SIM_FAULT_AFTER": "two"}, "is not an integer"),
        ({"SGLANG_SIM_GPU_MEM_MB": "-5"}, "must be >= 0"),
        ({"SGLANG_SIM_NCCL_ALLREDUCE": "maybe"}, "is not a boolean"),
        ({"SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "maybe"}, "is not a valid boolean value"),
    ],
)
def test_parse_env_rejects(env, message):
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.parse_env(env)


def test_diagnostics_sleep_is_scaled_by_the_speed():
    assert config.parse_env({}).diagnostics_sleep_seconds == 5.0
    assert config.parse_env({"SGLANG_SIM_SPEED": "10"}).diagnostics_sleep_seconds == 0.5
    off = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
    assert config.parse_env(off).diagnostics_sleep_seconds == 0.0
    assert config.parse_env({}).describe()["crash_diagnostics_sleep_s"] == 5.0


def test_gpu_config_enabled():
    assert not config.GpuConfig().enabled
    assert config.GpuConfig(mem_mb=1).enabled
    assert config.GpuConfig(nccl_allreduce=True).enabled


def test_check_gpu_mode_needs_torch():
    cfg = config.parse_env({"SGLANG_SIM_GPU_MEM_MB": "64"})
    with pytest.raises(config.ConfigError, match="needs torch"):
        ls.check_gpu_mode(cfg, find_spec=lambda name: None)
    ls.check_gpu_mode(cfg, find_spec=lambda name: object())
    ls.check_gpu_mode(config.parse_env({}), find_spec=lambda name: None)


def test_gpu_setup_reports_missing_torch_or_cuda():
    """Without torch+CUDA, GPU mode fails with a message naming what is missing."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("CUDA is available here: the error path for a missing GPU cannot be shown")
    ctx = {"gpu": {"enabled": True, "mem_mb": 16, "nccl_allreduce": False}, "world_size": 1}
    with pytest.raises(RuntimeError, match="not importable|is_available\\(\\) is False"):
        procs.gpu_setup({"gpu_id": 0, "title": "sglang::scheduler", "index": 0}, ctx)


def test_gpu_setup_holds_memory_on_a_real_gpu():
    torch = pytest.importorskip("torch", reason="GPU mode needs torch; torch is not installed here")
    if not torch.cuda.is_available():
        pytest.skip("GPU mode needs CUDA; torch.cuda.is_available() is False here")
    ctx = {"gpu": {"enabled": True, "mem_mb": 16, "nccl_allreduce": False}, "world_size": 1}
    held = procs.gpu_setup({"gpu_id": 0, "title": "sglang::scheduler", "index": 0}, ctx)
    assert held and held[0].numel() == 16 * 1024 * 1024 and held[0].is_cuda


# --- process tree layout -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "titles", "gpus", "controller"),
    [
        ({}, ["sglang::scheduler"], [0], False),
        ({"tp_size": 2}, ["sglang::scheduler_TP0", "sglang::scheduler_TP1"], [0, 1], False),
        ({"tp_size": 4, "ep_size": 4}, [f"sglang::scheduler_TP{i}_EP{i}" for i in range(4)],
         [0, 1, 2, 3], False),
        ({"tp_size": 4, "ep_size": 2}, ["sglang::scheduler_TP0_EP0", "sglang::scheduler_TP1_EP0",
                                        "sglang::scheduler_TP2_EP1", "sglang::scheduler_TP3_EP1"],
         [0, 1, 2, 3], False),
        ({"dp_size": 2}, ["sglang::scheduler_DP0", "sglang::scheduler_DP1"], [0, 1], True),
        ({"dp_size": 2, "tp_size": 4},
         [f"sglang::scheduler_DP{d}_TP{t}" for d in range(2) for t in range(4)], list(range(8)), True),
        ({"dp_size": 2, "tp_size": 4, "enable_dp_attention": True},
         [f"sglang::scheduler_DP{t // 2}_TP{t}" for t in range(4)], [0, 1, 2, 3], True),
        ({"pp_size": 2, "tp_size": 2},
         ["sglang::scheduler_PP0_TP0", "sglang::scheduler_PP0_TP1", "sglang::scheduler_PP1_TP0",
          "sglang::scheduler_PP1_TP1"], [0, 1, 2, 3], False),
        ({"tp_size": 2, "base_gpu_id": 4, "gpu_id_step": 2},
         ["sglang::scheduler_TP0", "sglang::scheduler_TP1"], [4, 6], False),
    ],
)
def test_topology(args, titles, gpus, controller):
    topo = topology.build_topology(args)
    assert [s.title for s in topo.schedulers] == titles
    assert [s.gpu_id for s in topo.schedulers] == gpus
    assert topo.uses_dp_controller is controller
    assert [s.index for s in topo.schedulers] == list(range(len(titles)))


def test_topology_log_prefix():
    spec = topology.build_topology({"dp_size": 2, "tp_size": 2}).schedulers[3]
    assert spec.prefix == " DP1 TP1"


# --- throughput table ------------------------------------------------------------------


def test_throughput_curve_shape():
    """Per-request speed falls and total throughput rises with concurrency."""
    model = throughput.build_model({})
    rates = [model.steady_output_rate(c) for c in (1, 10, 256, 1024)]
    per_request = [r / c for r, c in zip(rates, (1, 10, 256, 1024), strict=True)]
    assert rates == sorted(rates) and len(set(rates)) == 4
    assert per_request == sorted(per_request, reverse=True)
    assert model.decode_step_seconds(1024) > model.decode_step_seconds(1)
    assert model.prefill_seconds(2048) > model.prefill_seconds(0)


@pytest.mark.parametrize(
    ("effect", "args", "matches"),
    [
        ({"dest": "x", "when": True}, {"x": True}, True),
        ({"dest": "x", "when": True}, {"x": False}, False),
        ({"dest": "x", "when": True}, {}, False),
        ({"dest": "x", "when": False}, {"x": False}, True),
        ({"dest": "x", "when": False}, {}, True),
        ({"dest": "x", "when": 8}, {"x": 8}, True),
        ({"dest": "x", "when": 8}, {"x": 4}, False),
        ({"dest": "x", "when": "fp8_e4m3"}, {"x": "fp8_e4m3"}, True),
        ({"dest": "x", "when": "set"}, {"x": "a"}, True),
        ({"dest": "x", "when": "set"}, {"x": None}, False),
    ],
)
def test_effect_matches(effect, args, matches):
    assert throughput.effect_matches(effect, args) is matches


def test_flag_effects_multiply_and_limits_apply():
    table = {
        "model": {"decode_step_ms": 100.0, "decode_step_ms_per_request": 1.0, "prefill_step_ms": 10.0,
                  "prefill_ms_per_token": 0.1, "max_prefill_tokens": 4096, "max_running_requests": 64,
                  "decode_log_interval": 40},
        "flag_effects": [
            {"dest": "a", "when": True, "decode_speedup": 1.25},
            {"dest": "b", "when": 2, "decode_speedup": 2.0, "prefill_speedup": 4.0},
        ],
    }
    plain = throughput.build_model({}, table)
    fast = throughput.build_model({"a": True, "b": 2, "max_running_requests": 8,
                                   "num_continuous_decode_steps": 16}, table)
    assert fast.decode_step_seconds(10) == pytest.approx(plain.decode_step_seconds(10) / 2.5)
    assert fast.prefill_seconds(100) == pytest.approx(plain.prefill_seconds(100) / 4.0)
    assert (plain.max_running_requests, fast.max_running_requests) == (64, 8)
    assert fast.continuous_decode_steps == 16
    assert [e["dest"] for e in fast.describe()["flag_effects_applied"]] == ["a", "b"]
    assert fast.describe()["synthetic"] is True


def test_shipped_table_effects_name_real_sglang_flags(tmp_path):
    """Every flag the table keys on is a dest the manifest (SGLang) has."""
    from helpers.sim import manifest_for_tests

    path, _ = manifest_for_tests(tmp_path)
    data = json.loads(path.read_text())
    dests = {manifest.CLI_DEST_RENAMES.get(o["dest"], o["dest"]) for o in data["options"]}
    for effect in throughput.load_table()["flag_effects"]:
        assert effect["dest"] in dests, effect


# --- tokenizer -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return tokenizer.make_tokenizer(tmp_path_factory.mktemp("tok"), sharegpt_conversations=5)


def test_make_tokenizer_is_deterministic(tok_dir, tmp_path):
    again = tokenizer.make_tokenizer(tmp_path / "again", sharegpt_conversations=5)
    names = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json",
             "synthetic_sharegpt.json"]
    match, mismatch, errors = filecmp.cmpfiles(tok_dir, again, names, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert json.loads((tok_dir / "config.json").read_text())["sglang_sim_synthetic"] is True


def test_autotokenizer_loads_offline_and_random_ids_round_trip(tok_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(str(tok_dir), trust_remote_code=True)
    assert tok.vocab_size == tokenizer.DEFAULT_VOCAB_SIZE
    assert tok.num_special_tokens_to_add() == 0
    assert "chat_template" in tok.init_kwargs
    # bench_serving's random-ids dataset: consecutive ids from a random offset.
    for offset in (0, 17, 4000, 8180):
        ids = [(offset + j) % tok.vocab_size for j in range(96)]
        assert tok.encode(tok.decode(ids), add_special_tokens=False) == ids


def test_text_codec_counts_like_the_tokenizer(tok_dir):
    codec = tokenizer.TextCodec(tok_dir)
    text = "the server is up, and the batch is 1024 tokens long."
    # 11 words and 2 punctuation marks
    assert codec.count(text) == 13
    assert tokenizer.heuristic_token_count(text) == 13
    assert tokenizer.TextCodec(None).count(text) == 13
    first = [codec.output_token(7, i) for i in range(5)]
    assert first == [codec.output_token(7, i) for i in range(5)]
    assert all(piece.startswith(" ") and piece.strip().isalpha() for _, piece in first)


def test_sharegpt_file_shape(tok_dir):
    data = json.loads((tok_dir / "synthetic_sharegpt.json").read_text())
    assert len(data) == 5
    assert [t["from"] for t in data[0]["conversations"]] == ["human", "gpt"]
    assert data[0]["id"].startswith("sglang-sim-synthetic-")


# --- engine ----------------------------------------------------------------------------


async def run_to_end(engine, reqs):
    """Submit ``reqs`` to a running engine and wait until every one has finished."""
    for req in reqs:
        engine.submit(req)
    for req in reqs:
        while not req.finished:
            await req.changed.wait()
            req.changed.clear()


def _run_engine(requests_spec, **model_args):
    async def main():
        model = throughput.build_model(model_args)
        engine = Engine(model, tokenizer.TextCodec(None), speed=1e6, max_total_num_tokens=10**6,
                        cuda_graph=False)
        task = asyncio.create_task(engine.run())
        peak = 0

        async def monitor():
            nonlocal peak
            while True:
                peak = max(peak, len(engine.running))
                await asyncio.sleep(0)

        mon = asyncio.create_task(monitor())
        reqs = [GenRequest(rid=str(i), prompt_tokens=p, max_new_tokens=n, ignore_eos=e, seed=i)
                for i, (p, n, e) in enumerate(requests_spec)]
        await run_to_end(engine, reqs)
        task.cancel()
        mon.cancel()
        return reqs, peak

    return asyncio.run(main())


def test_engine_honours_max_new_tokens_with_ignore_eos():
    reqs, _ = _run_engine([(10, 5, True), (20, 33, True), (5, 1, True), (5, 0, True)])
    assert [r.completion_tokens for r in reqs] == [5, 33, 1, 0]
    assert all(r.finish_reason == {"type": "length", "length": r.max_new_tokens} for r in reqs)
    assert reqs[1].text_after(30) == reqs[1].text[reqs[1].text_ends[29]:]


def test_engine_stops_at_synthetic_eos_without_ignore_eos():
    reqs, _ = _run_engine([(10, 4000, False) for _ in range(8)])
    stopped = [r for r in reqs if r.finish_reason["type"] == "stop"]
    assert stopped, "with 4000 tokens allowed, some requests must hit the synthetic EOS"
    assert all(r.completion_tokens < 4000 for r in stopped)


def test_engine_respects_max_running_requests():
    reqs, peak = _run_engine([(10, 20, True)] * 9, max_running_requests=3)
    assert all(r.completion_tokens == 20 for r in reqs)
    assert peak == 3


# --- launch_server helpers ---------------------------------------------------------------


def test_bind_error_text_is_uvicorns():
    assert ls.bind_error_text("0.0.0.0", 8000) == (
        "[Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"
    )


@pytest.mark.parametrize(("tp", "threshold"), [(1, 0.6607), (2, 0.3304), (8, 0.0826)])
def test_kv_cache_threshold_is_sglangs_rule_on_the_synthetic_weights(tp, threshold):
    """Fatal at or below weights / memory before the weights (62.40 GB / TP of 94.44 GB)."""
    assert ls.kv_cache_min_fraction({"tp_size": tp}) == pytest.approx(threshold, abs=1e-4)
    pre = procs.SYNTH_GPU_TOTAL_GB - procs.SYNTH_INIT_GB
    weights = procs.synthetic_weights_gb({"tp_size": tp})
    assert sglang_rules.kv_cache_shortfall(pre, weights, threshold + 0.001) is None
    short = sglang_rules.kv_cache_shortfall(pre, weights, 0.00001)
    assert short["minimum"] == pytest.approx(threshold, abs=1e-4)
    assert short["suggested"] == pytest.approx(-(-threshold * 1000 // 1) / 1000)


def test_kv_cache_tokens_grow_with_tp_and_fraction():
    assert ls.kv_cache_tokens({"tp_size": 8}) > ls.kv_cache_tokens({"tp_size": 2})
    assert ls.kv_cache_tokens({"tp_size": 8, "mem_fraction_static": 0.92}) > ls.kv_cache_tokens({"tp_size": 8})


def test_resolve_tokenizer_dir(tok_dir, tmp_path):
    cfg = config.parse_env({})
    assert ls.resolve_tokenizer_dir(cfg, {"model_path": str(tok_dir)}) == str(tok_dir)
    assert ls.resolve_tokenizer_dir(cfg, {"model_path": "lukealonso/GLM-5-NVFP4"}) is None
    env_cfg = config.parse_env({"SGLANG_SIM_TOKENIZER": str(tok_dir)})
    assert ls.resolve_tokenizer_dir(env_cfg, {"model_path": "x"}) == str(tok_dir)
    with pytest.raises(config.ConfigError, match="has no tokenizer.json"):
        ls.resolve_tokenizer_dir(config.parse_env({"SGLANG_SIM_TOKENIZER": str(tmp_path)}), {})


def test_the_projects_baseline_launch_parses(tmp_path):
    """data/baseline.yml's flags, rendered with the contract's value semantics, parse."""
    import yaml
    from helpers.sim import manifest_for_tests

    baseline_file = REPO / "data" / "baseline.yml"
    baseline = yaml.safe_load(baseline_file.read_text())
    argv: list[str] = []
    for flag, value in baseline["flags"].items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    path, _ = manifest_for_tests(tmp_path)
    args = manifest.parse_server_args(argv, manifest.load_manifest(path))
    assert args["tp_size"] == baseline["flags"]["--tp-size"]
    assert [s.title for s in topology.build_topology(args).schedulers][-1] == "sglang::scheduler_TP7"


def _state(context_len: int, **args):
    from sglang_sim.http_api import ServerState

    engine = Engine(throughput.build_model({}), tokenizer.TextCodec(None), speed=1.0,
                    max_total_num_tokens=1000, cuda_graph=False)
    return ServerState(args, engine, {"context_len": context_len})


@pytest.mark.parametrize(
    ("prompt_words", "max_new", "args", "expected"),
    [
        (10, 20, {}, 20),
        (10, None, {}, 54),  # default 128, capped by the context
        (10, 60, {}, "Requested token count exceeds the model's maximum context length of 64 tokens. "
                     "You requested a total of 70 tokens: 10 tokens from the input messages and 60 "
                     "tokens for the completion."),
        (64, 1, {}, "The input (64 tokens) is longer than the model's context length (64 tokens)."),
        (10, 60, {"allow_auto_truncate": True}, 54),
        (10, -1, {}, "max_new_tokens must be a non-negative integer"),
    ],
)
def test_request_validation_follows_sglang(prompt_words, max_new, args, expected):
    from sglang_sim.http_api import _new_request

    state = _state(64, **args)
    text = " ".join(["word"] * prompt_words)
    if isinstance(expected, int):
        assert _new_request(state, text, None, max_new, True).max_new_tokens == expected
    else:
        with pytest.raises(ValueError) as exc:
            _new_request(state, text, None, max_new, True)
        assert expected in str(exc.value)


@pytest.mark.parametrize(("cds", "tokens_before_admit"), [(1, 2), (4, 5), (16, 17)])
def test_continuous_decode_steps_delay_admission(cds, tokens_before_admit):
    """--num-continuous-decode-steps N: a waiting request joins after N decode iterations."""

    async def main():
        model = throughput.build_model({"num_continuous_decode_steps": cds})
        engine = Engine(model, tokenizer.TextCodec(None), speed=1e6, max_total_num_tokens=10**6,
                        cuda_graph=False)
        task = asyncio.create_task(engine.run())
        first = GenRequest(rid="a", prompt_tokens=4, max_new_tokens=100, seed=1)
        engine.submit(first)
        await first.changed.wait()
        assert first.completion_tokens == 1
        second = GenRequest(rid="b", prompt_tokens=4, max_new_tokens=3, seed=2)
        engine.submit(second)
        await second.changed.wait()
        seen = first.completion_tokens
        task.cancel()
        return seen

    assert asyncio.run(main()) == tokens_before_admit


# --- what SGLang decides, release by release (sglang_rules) ------------------------------------

REAL_SGLANG = FIXTURES / "real-sglang"


@pytest.mark.parametrize(
    ("version", "key", "new"),
    [("0.5.10.post1", (0, 5, 10, 1), False), ("0.5.10", (0, 5, 10, 0), False), ("0.5.9", (0, 5, 9, 0), False),
     ("0.5.11", (0, 5, 11, 0), True), ("0.5.17", (0, 5, 17, 0), True), ("0.5.23", (0, 5, 23, 0), True),
     ("0.6.0rc1", (0, 6, 0, 0), True), (None, (0,), False)],
)
def test_version_family(version, key, new):
    assert sglang_rules.version_key(version) == key
    assert sglang_rules.is_new_family(version) is new


@pytest.mark.parametrize(
    ("args", "model_config", "piecewise"),
    [
        ({}, {}, True),
        ({}, {"architectures": ["GlmMoeDsaForCausalLM"]}, False),  # GLM-5
        ({}, {"architectures": ["DeepseekV3ForCausalLM"], "index_topk": 2048}, False),  # NSA
        ({}, {"architectures": ["DeepseekV3ForCausalLM"]}, True),
        ({"enable_dp_attention": True}, {}, False),
        ({"enable_torch_compile": True}, {}, False),
        ({"speculative_algorithm": "EAGLE"}, {}, False),
        ({"pp_size": 2}, {}, False),
        ({"moe_a2a_backend": "deepep"}, {}, False),
        ({"moe_a2a_backend": "none"}, {}, True),
        ({"disaggregation_mode": "prefill"}, {}, False),
        ({"moe_runner_backend": "flashinfer_trtllm"}, {}, False),
        ({"moe_runner_backend": "flashinfer_trtllm"}, {"architectures": ["GptOssForCausalLM"]}, True),
        ({"disable_piecewise_cuda_graph": True}, {}, False),
        ({"enable_torch_compile": True, "enforce_piecewise_cuda_graph": True},
         {"architectures": ["GlmMoeDsaForCausalLM"]}, True),
    ],
)
def test_pin_piecewise_auto_disable(args, model_config, piecewise):
    plan = sglang_rules.pin_graph_plan(args, model_config)
    assert plan["piecewise"] is piecewise
    assert plan["decode"] is True


def test_pin_moe_runner_rule_logs_its_line():
    plan = sglang_rules.pin_graph_plan({"moe_runner_backend": "flashinfer_mxfp4"}, {})
    assert plan["main_lines"] == [
        "Piecewise cuda graph is disabled for MoE runner backend 'flashinfer_mxfp4' (bypassed topk "
        "is incompatible with torch.compile)."
    ]
    assert sglang_rules.pin_graph_plan({"disable_cuda_graph": True}, {})["decode"] is False


def _recorded_list(line_start: str, key: str) -> list[int]:
    text = (REAL_SGLANG / "probe-0.5.17-h200-tp1-graphs" / "server_cudagraph.log").read_text()
    line = next(x for x in text.splitlines() if line_start in x)
    return json.loads(line.split(f"{key}=", 1)[1].split("]", 1)[0] + "]")


def test_new_family_capture_sizes_are_the_recorded_ones():
    assert sglang_rules.prefill_capture_sizes(8192) == _recorded_list("prefill CUDA graph begin", "num_tokens")
    assert sglang_rules.decode_capture_sizes(16) == _recorded_list("decode CUDA graph begin", "bs")
    assert sglang_rules.decode_capture_sizes(8) == [1, 2, 4, 8]
    assert sglang_rules.decode_capture_sizes(20) == [1, 2, 4, 8, 12, 16, 20]
    assert sglang_rules.decode_capture_sizes(4, padding_disabled=True) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("args", "prefill", "decode", "line"),
    [
        ({}, "breakable", "full", None),
        ({"enable_torch_compile": True, "enable_dp_attention": True}, "breakable", "full", None),
        ({"disable_cuda_graph": True}, "disabled", "disabled", None),
        ({"disable_cuda_graph": True, "cuda_graph_backend_prefill": "full"}, "full", "disabled", None),
        ({"disable_prefill_cuda_graph": True}, "disabled", "full", None),
        ({"cuda_graph_backend_decode": "disabled"}, "breakable", "disabled", None),
        ({"pp_size": 2}, "disabled", "full", "Disabling breakable prefill CUDA graph by default for pipeline"),
        ({"pp_size": 2, "cuda_graph_backend_prefill": "breakable"}, "breakable", "full", None),
        ({"enable_two_batch_overlap": True}, "disabled", "full",
         "Breakable CUDA graph is incompatible with two-batch overlap; disabling prefill CUDA graph."),
        ({"attn_cp_size": 2}, "disabled", "full", None),
    ],
)
def test_new_family_graph_plan(args, prefill, decode, line):
    plan = sglang_rules.new_graph_plan(args)
    assert (plan["prefill"], plan["decode"]) == (prefill, decode)
    if line is None:
        assert plan["main_lines"] == []
    else:
        assert len(plan["main_lines"]) == 1 and plan["main_lines"][0].startswith(line)
    assert plan["prefill_num_tokens"][-1] == 8192 and plan["decode_bs"][-1] == 256


def test_new_family_kv_cache_message_is_the_recorded_one():
    text = (REAL_SGLANG / "probe-0.5.17-h200-tp1" / "server_tiny_mem.log").read_text()
    recorded = next(line for line in text.splitlines() if line.startswith("ValueError: "))
    kind, message = sglang_rules.kv_cache_error(True, 1e-05, {"minimum": 0.0006, "suggested": 0.001})
    assert f"{kind}: {message}" == recorded
    kind, message = sglang_rules.kv_cache_error(False, 1e-05, {"minimum": 0.0006, "suggested": 0.001})
    assert (kind, message) == ("RuntimeError", "Not enough memory. Please try to increase --mem-fraction-static. "
                                               "Current value: mem_fraction_static=1e-05")


def test_stream_error_bodies():
    text = (REAL_SGLANG / "probe-0.5.17-h200-tp1" / "generate_stream_too_long.txt").read_text()
    recorded = json.loads(text.splitlines()[0][len("data: "):])
    message = recorded["error"]["message"]
    assert sglang_rules.stream_error_body(True, message) == recorded
    assert sglang_rules.stream_error_body(False, message) == {"error": {"message": message}}


# --- the radix prefix cache (radix_cache) ----------------------------------------------------------


def test_radix_cache_matches_the_longest_shared_prefix():
    cache = radix_cache.RadixCache(capacity=1000)
    key = radix_cache.token_key
    assert cache.match_prefix(key([1, 2, 3, 4])) == 0
    cache.insert(key([1, 2, 3, 4, 5]))
    cache.insert(key([1, 2, 9, 9]))  # splits the first node after [1, 2]
    assert cache.total_tokens == 7
    assert cache.match_prefix(key([1, 2, 3, 4, 5, 6])) == 5
    assert cache.match_prefix(key([1, 2, 9, 9, 9])) == 4
    assert cache.match_prefix(key([1, 2, 3, 7])) == 3
    assert cache.match_prefix(key([2, 1])) == 0
    assert cache.match_prefix(key([1, 2, 3, 4, 5]), limit=4) == 4  # SGLang: input_len - 1 at most
    cache.insert(key([1, 2, 3]))  # already there: nothing added
    assert cache.total_tokens == 7
    assert cache.match_prefix(key([1 + 2**32, 2])) == 2  # ids are kept to 32 bits
    cache.reset()
    assert cache.total_tokens == 0 and cache.match_prefix(key([1, 2, 3, 4, 5])) == 0
    off = radix_cache.RadixCache(capacity=1000, enabled=False)  # --disable-radix-cache
    off.insert(key([1, 2, 3]))
    assert off.match_prefix(key([1, 2, 3])) == 0


def test_radix_cache_evicts_the_least_recently_used_beyond_its_capacity():
    cache = radix_cache.RadixCache(capacity=100)
    key = radix_cache.token_key
    cache.insert(key(range(0, 40)))
    cache.insert(key(range(1000, 1040)))
    assert cache.match_prefix(key(range(0, 40))) == 40  # the first is now the more recent
    cache.insert(key(range(2000, 2040)))  # 120 > 100: evict down to 90, oldest leaf first
    assert cache.total_tokens == 80
    assert cache.match_prefix(key(range(1000, 1040))) == 0
    assert cache.match_prefix(key(range(0, 40))) == 40
    assert cache.match_prefix(key(range(2000, 2040))) == 40


class _PrefillSpy:
    """The throughput model, recording the tokens of each prefill iteration."""

    def __init__(self, model):
        self.model = model
        self.prefills: list[int] = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def prefill_seconds(self, tokens):
        self.prefills.append(tokens)
        return self.model.prefill_seconds(tokens)


def _run_cached(batches, enabled=True, new_family=True, stream_interval=1):
    """Run ``batches`` (lists of GenRequest keyword dicts) one after another through an engine
    with a radix cache and metrics; returns (requests, prefill token counts, metrics, engine)."""

    async def main():
        spy = _PrefillSpy(throughput.build_model({}))
        sgl_metrics = metrics.SglangMetrics({"model_path": "m"}, new_family, 10**6)
        engine = Engine(spy, tokenizer.TextCodec(None), speed=1e6, max_total_num_tokens=10**6,
                        cuda_graph=False, cache=radix_cache.RadixCache(10**6, enabled=enabled),
                        metrics=sgl_metrics, stream_interval=stream_interval)
        task = asyncio.create_task(engine.run())
        done = []
        for batch in batches:
            if batch == "flush":
                engine.cache.reset()
                continue
            reqs = [GenRequest(rid=str(len(done) + i), seed=i, **spec) for i, spec in enumerate(batch)]
            await run_to_end(engine, reqs)
            done += reqs
        task.cancel()
        return done, spy.prefills, sgl_metrics, engine

    # a broken engine (an exception in its loop) fails the test instead of hanging it
    return asyncio.run(asyncio.wait_for(main(), timeout=30))


def _prompt(ids):
    return {"prompt_tokens": len(ids), "key": radix_cache.token_key(ids), "max_new_tokens": 4}


def test_engine_prefills_only_the_uncached_tokens():
    long = list(range(100, 2100))
    reqs, prefills, _, _ = _run_cached([[_prompt(long)], [_prompt(long)], [_prompt(long[:1000] + [7] * 10)],
                                        "flush", [_prompt(long)]])
    assert [r.cached_tokens for r in reqs] == [0, 1999, 1000, 0]  # at least the last token is computed
    assert prefills == [2000, 1, 10, 2000]
    reqs, prefills, _, _ = _run_cached([[_prompt(long)], [_prompt(long)]], enabled=False)
    assert [r.cached_tokens for r in reqs] == [0, 0] and prefills == [2000, 2000]


def test_engine_a_running_requests_prompt_is_in_the_cache_after_its_prefill():
    """cache_unfinished_req: a prompt enters the tree after its prefill, not only when it ends."""

    async def main():
        engine = Engine(throughput.build_model({}), tokenizer.TextCodec(None), speed=1e6,
                        max_total_num_tokens=10**6, cuda_graph=False)
        task = asyncio.create_task(engine.run())
        ids = list(range(300, 364))
        first = GenRequest(rid="a", seed=1, **{**_prompt(ids), "max_new_tokens": 100000})
        engine.submit(first)
        await first.changed.wait()
        second = GenRequest(rid="b", seed=2, **_prompt(ids))
        engine.submit(second)
        while not second.finished:
            await second.changed.wait()
            second.changed.clear()
        running = not first.finished
        task.cancel()
        return second.cached_tokens, running

    assert asyncio.run(asyncio.wait_for(main(), timeout=30)) == (63, True)


def test_engine_requests_of_one_prefill_batch_do_not_hit_each_other():
    same = list(range(50))
    reqs, prefills, _, _ = _run_cached([[_prompt(same), _prompt(same)], [_prompt(same)]])
    assert [r.cached_tokens for r in reqs] == [0, 0, 49] and prefills == [100, 1]


def _series(text: str) -> dict[str, dict]:
    return metrics.parse_exposition(text)


def _value(families, family, sample=None, **labels) -> float:
    """Sum of the samples of ``family`` named ``sample`` (default: the family) whose labels
    include ``labels``."""
    sample = sample or family
    return sum(v for n, lab, v in families.get(family, {"samples": []})["samples"]
               if n == sample and all(lab.get(k) == str(x) for k, x in labels.items()))


def test_engine_feeds_the_metrics_as_sglang_counts():
    """Streamed: TTFT at its first token, one inter-token observation per later output (count =
    tokens); not streamed: TTFT at the end (= e2e), no inter-token latency; the health check
    (log_metrics=False) counts only on the scheduler side (queue time)."""
    ids = list(range(10, 30))
    streamed = {**_prompt(ids), "max_new_tokens": 6, "stream": True}
    plain = {**_prompt(ids), "max_new_tokens": 5}
    health = {"prompt_tokens": 1, "key": radix_cache.token_key([0]), "max_new_tokens": 1, "log_metrics": False}
    reqs, _, sgl_metrics, _ = _run_cached([[streamed], [plain], [health]])
    fam = _series(sgl_metrics.render())
    hist = "sglang:inter_token_latency_seconds"
    assert _value(fam, "sglang:num_requests_total", is_streaming="true") == 1
    assert _value(fam, "sglang:num_requests_total", is_streaming="false") == 1
    assert _value(fam, "sglang:generation_tokens_total") == 11
    assert _value(fam, "sglang:prompt_tokens_total") == 40
    assert _value(fam, "sglang:cached_tokens_total", cache_source="device") == 19
    assert _value(fam, hist, hist + "_count") == 5  # the streamed request's 6 tokens less the first
    ttft = "sglang:time_to_first_token_seconds"
    e2e = "sglang:e2e_request_latency_seconds"
    assert _value(fam, ttft, ttft + "_count", is_streaming="true") == 1
    assert _value(fam, ttft, ttft + "_sum", is_streaming="false") == \
        _value(fam, e2e, e2e + "_sum", is_streaming="false") == pytest.approx(reqs[1].e2e_latency())
    assert _value(fam, "sglang:queue_time_seconds", "sglang:queue_time_seconds_count") == 3
    assert _value(fam, "sglang:uncached_prompt_tokens_histogram",
                  "sglang:uncached_prompt_tokens_histogram_sum") == 21


def test_stream_interval_groups_the_inter_token_observations():
    streamed = {**_prompt(list(range(8))), "max_new_tokens": 9, "stream": True}
    _, _, sgl_metrics, _ = _run_cached([[streamed]], stream_interval=4)
    fam = _series(sgl_metrics.render())
    hist = "sglang:inter_token_latency_seconds"
    assert _value(fam, hist, hist + "_count") == 8  # tokens 2..9 in two outputs of 4
    # each output's interval is added once to the sum and its tokens to one bucket
    assert sum(1 for n, _, v in fam[hist]["samples"] if n == hist + "_bucket" and v > 0) >= 1


def test_aborted_request_counts_as_aborted_only():
    sgl_metrics = metrics.SglangMetrics({"model_path": "m"}, True, 1000)
    engine = Engine(throughput.build_model({}), tokenizer.TextCodec(None), speed=1.0,
                    max_total_num_tokens=1000, cuda_graph=False, metrics=sgl_metrics)
    req = GenRequest(rid="a", prompt_tokens=3, max_new_tokens=3)
    engine.waiting.append(req)
    engine.abort(req)
    engine.abort(req)
    fam = _series(sgl_metrics.render())
    assert _value(fam, "sglang:num_aborted_requests_total") == 1
    assert "sglang:num_requests_total" not in fam


METRICS_RECORDING = REAL_SGLANG / "probe-0.5.17-h200-tp1-metrics"


def test_go_float_format_is_the_recorded_one():
    """Every value and bucket bound of the recording, parsed and written again, is the same text."""
    text = (METRICS_RECORDING / "honest.after.txt").read_text()
    values = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line and not line.startswith("#")]
    bounds = [b for line in text.splitlines() if "_bucket{" in line for b in re.findall(r'le="([^"]+)"', line)]
    assert "1.34184517e+08" in values and "NaN" in values and "+Inf" in bounds
    assert [metrics.float_to_go_string(float(v)) for v in values + bounds] == values + bounds
    assert metrics.float_to_go_string(1100000) == "1.1e+06"


def test_exposition_round_trips_and_histograms_are_cumulative():
    sgl_metrics = metrics.SglangMetrics({"model_path": "m", "served_model_name": "glm-5"}, True, 1000)
    for seconds in (0.0005, 0.003, 0.3, 5000):
        sgl_metrics.queued(seconds)
    text = sgl_metrics.render()
    assert text.startswith(metrics.SYNTHETIC_COMMENT + "\n")
    fam = _series(text)
    samples = fam["sglang:queue_time_seconds"]["samples"]
    names = [n.rsplit("_", 1)[1] for n, _, _ in samples]
    assert names[0] == "sum" and names[-1] == "count" and set(names[1:-1]) == {"bucket"}
    buckets = [(lab["le"], v) for n, lab, v in samples if n.endswith("_bucket")]
    assert buckets[:4] == [("0.0", 0), ("0.001", 1), ("0.005", 2), ("0.01", 2)]
    assert buckets[-1] == ("+Inf", 4) and samples[-1][2] == 4
    assert all(lab["model_name"] == "glm-5" for _, lab, _ in samples)
    assert "sglang:num_requests_total" not in fam  # a labelled metric appears with its first series


@pytest.mark.parametrize(
    ("new_family", "request_labels", "queue_start"),
    [
        (False, {"model_name"}, ["0.0", "0.1", "0.2", "0.5"]),  # 0.5.10.post1's collectors
        (True, {"model_name", "engine_type", "is_streaming"}, ["0.0", "0.001", "0.005", "0.01"]),
    ],
)
def test_metric_labels_follow_the_release(new_family, request_labels, queue_start):
    sgl_metrics = metrics.SglangMetrics({"model_path": "m"}, new_family, 1000)
    sgl_metrics.finished(10, 5, 3, 0.5, streamed=True)
    sgl_metrics.first_output(0.1, streamed=True)
    sgl_metrics.queued(0.0)
    fam = _series(sgl_metrics.render())
    for name in ("sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:generation_tokens_total"):
        assert {k for _, lab, _ in fam[name]["samples"] for k in lab} == request_labels
    cached = fam["sglang:cached_tokens_total"]["samples"]
    assert [lab for _, lab, _ in cached][0]["cache_source"] == "device"
    assert ("sglang:uncached_prompt_tokens_histogram" in fam) is new_family
    queue = [lab["le"] for n, lab, _ in fam["sglang:queue_time_seconds"]["samples"] if n.endswith("_bucket")]
    assert queue[:4] == queue_start
    scheduler = {k for _, lab, _ in fam["sglang:num_running_reqs"]["samples"] for k in lab}
    assert scheduler == {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}


def test_metrics_body_is_gzipped_when_accepted():
    sgl_metrics = metrics.SglangMetrics({"model_path": "m"}, True, 1000)
    plain, headers = sgl_metrics.body("")
    assert headers["Content-Type"].startswith("text/plain") and "Content-Encoding" not in headers
    packed, headers = sgl_metrics.body("gzip, deflate")
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(packed) == plain
    assert headers["X-SGLang-Sim"] == "synthetic"
