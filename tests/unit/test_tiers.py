"""Tier catalog logic (plugins/module_utils/sglang_tiers.py): composition, schema errors,
tier selection, argv checks against flag manifests and known-incompatible combinations."""

from __future__ import annotations

import copy
import json

import pytest
import sglang_tiers as st
import yaml
from helpers.paths import REPO

DATA = REPO / "data"


@pytest.fixture(scope="module")
def baseline():
    return yaml.safe_load((DATA / "baseline.yml").read_text())


@pytest.fixture(scope="module")
def catalog():
    return yaml.safe_load((DATA / "tiers.yml").read_text())


@pytest.fixture(scope="module")
def schema():
    return json.loads((DATA / "tier_schema.json").read_text())


@pytest.fixture(scope="module")
def pinned(baseline):
    return json.loads((DATA / "flag_manifests" / f"sglang-{baseline['sglang_version']}.json").read_text())


@pytest.fixture(scope="module")
def m0523():
    return json.loads((DATA / "flag_manifests" / "sglang-0.5.23.json").read_text())


@pytest.fixture(scope="module")
def history():
    return json.loads((DATA / "flag_manifests" / "history.json").read_text())


MINI_BASELINE = {
    "sglang_version": "9.9",
    "module": "sglang.launch_server",
    "flags": {"--model": "m", "--tp-size": 8, "--disable-cuda-graph": True, "--port": 8000},
    "env": {"A": "1", "B": 2},
}


# --------------------------------------------------------------------------- composition


@pytest.mark.parametrize(
    ("flag", "value", "tokens"),
    [
        ("--tp-size", 8, ["--tp-size", "8"]),
        ("--mem-fraction-static", 0.92, ["--mem-fraction-static", "0.92"]),
        ("--trust-remote-code", True, ["--trust-remote-code"]),
        ("--trust-remote-code", False, []),
        ("--trust-remote-code", None, []),
        ("--cuda-graph-bs", [1, 2, 4], ["--cuda-graph-bs", "1", "2", "4"]),
        ("--json-model-override-args", {"a": 1}, ["--json-model-override-args", '{"a": 1}']),
        ("--served-model-name", "a b", ["--served-model-name", "a b"]),
    ],
)
def test_flag_tokens_value_semantics(flag, value, tokens):
    assert st.flag_tokens(flag, value) == tokens


def test_flag_tokens_rejects_nested_list():
    with pytest.raises(st.TierError, match="--x: list values"):
        st.flag_tokens("--x", [[1]])


def test_compose_remove_add_override_keeps_positions():
    tier = {"flags_remove": ["--disable-cuda-graph"], "flags_add": {"--tp-size": 4, "--ep-size": 8}}
    out = st.compose(MINI_BASELINE, tier, {"--port": 30000, "--extra": "x"})
    assert out["argv"] == ["--model", "m", "--tp-size", "4", "--port", "30000", "--ep-size", "8", "--extra", "x"]
    assert out["argv_lines"][1] == ["--tp-size", "4"]
    assert out["module"] == "sglang.launch_server"


@pytest.mark.parametrize("drop", [None, False])
def test_override_null_or_false_drops_a_baseline_flag(drop):
    out = st.compose(MINI_BASELINE, {}, {"--disable-cuda-graph": drop})
    assert "--disable-cuda-graph" not in out["argv"]


def test_compose_does_not_mutate_inputs():
    base = copy.deepcopy(MINI_BASELINE)
    st.compose(base, {"flags_remove": ["--port"], "env_remove": ["A"]}, {"--x": 1}, {"B": None})
    assert base == MINI_BASELINE


def test_compose_env_semantics():
    tier = {"env_remove": ["A"], "env_add": {"C": 3}}
    out = st.compose(MINI_BASELINE, tier, env_override={"B": None, "D": "x y"})
    assert out["env"] == {"C": "3", "D": "x y"}


@pytest.mark.parametrize("bad", [{"1BAD": "x"}, {"A-B": "x"}, {"": "x"}])
def test_env_override_rejects_bad_names(bad):
    with pytest.raises(st.TierError, match="not a valid shell name"):
        st.compose(MINI_BASELINE, {}, env_override=bad)


def test_env_value_rejects_bool():
    with pytest.raises(st.TierError, match="must be a string or number"):
        st.compose(MINI_BASELINE, {}, env_override={"X": True})


def test_module_override_changes_only_the_module():
    real = st.compose(MINI_BASELINE, {})
    sim = st.compose(MINI_BASELINE, {}, module="sglang_sim.launch_server")
    assert sim["module"] == "sglang_sim.launch_server"
    assert sim["argv"] == real["argv"] and sim["env"] == real["env"]


def test_hash_is_canonical_and_sensitive():
    a = st.launch_hash("m", ["--x", "1"], {"A": "1", "B": "2"})
    assert a == st.launch_hash("m", ["--x", "1"], {"B": "2", "A": "1"})  # env order does not matter
    assert len(a) == 64
    assert a != st.launch_hash("m", ["--x", "2"], {"A": "1", "B": "2"})
    assert a != st.launch_hash("m", ["--x", "1"], {"A": "1", "B": "3"})
    assert a != st.launch_hash("other", ["--x", "1"], {"A": "1", "B": "2"})
    assert a != st.launch_hash("m", ["1", "--x"], {"A": "1", "B": "2"})  # argv order matters


def test_baseline_composes_to_the_seed_command(baseline):
    """The seeds' launch script (seed 004), flag for flag and in order, plus the one flag the project
    adds: --enable-metrics, SGLang's own counters that every point is checked against."""
    seed = (
        "--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --reasoning-parser glm45 --tool-call-parser glm47 "
        "--trust-remote-code --tp-size 8 --mem-fraction-static 0.92 --max-running-requests 2048 --kv-cache-dtype auto "
        "--quantization modelopt_fp4 --attention-backend flashinfer --fp8-gemm-backend cutlass --nsa-decode-backend "
        "trtllm --nsa-prefill-backend trtllm --moe-runner-backend flashinfer_cutlass --disable-cuda-graph "
        "--num-continuous-decode-steps 16 --host 0.0.0.0 --port 8000"
    ).split()
    out = st.compose(baseline, {})
    added = out["argv"].index("--enable-metrics")
    assert out["argv"][:added] + out["argv"][added + 1:] == seed
    assert out["env"] == {
        "PYTHONUNBUFFERED": "1",
        "NCCL_IB_DISABLE": "1",
        "NCCL_P2P_LEVEL": "5",
        "NCCL_MIN_NCHANNELS": "8",
        "OMP_NUM_THREADS": "8",
        "SAFETENSORS_FAST_GPU": "1",
        "CUDA_HOME": "/usr/local/cuda-12.8",
    }


def test_piecewise_tier_is_the_seed_difference(baseline, catalog):
    t01 = catalog["tiers"]["t01-piecewise-cuda-graph"]
    out = st.compose(baseline, t01)
    assert "--disable-cuda-graph" not in out["argv"]
    for flag in ("--enable-piecewise-cuda-graph", "--disable-radix-cache"):
        assert flag in out["argv"]
    assert set(t01["patches"]) == {"flashinfer-get-cuda-version-torch", "flashinfer-fp4-quantize-compiler-disable"}
    assert t01["expected_failure_class"] == "dynamo_fp4_jit"


# --------------------------------------------------------------------------- schema / catalog


def test_committed_catalog_is_valid(catalog, baseline, schema):
    assert st.catalog_errors(catalog, baseline, schema) == []


def test_catalog_has_the_eleven_documents(catalog):
    ids = [t for t in catalog["tiers"] if t != "baseline"]
    assert [catalog["tiers"][t]["number"] for t in ids] == list(range(1, 12))
    not_runnable = {t for t in ids if not catalog["tiers"][t]["runnable"]}
    assert not_runnable == {
        "t06-l2-cache-pinning",
        "t07-persistent-grouped-gemm",
        "t08-fp4-structured-sparsity",
        "t11-column-major-xshare",
    }
    assert all(catalog["tiers"][t]["level"] in (2, 3) for t in not_runnable)


GOOD_TIER = {
    "title": "x",
    "level": 1,
    "runnable": True,
    "hypothesis": "h",
    "expected_impact": "e",
    "flags_add": {"--enable-mscclpp": True},
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"level": 4}, "tier 't12-foo': field 'level' must be one of 1,2,3 (got 4)"),
        ({"runnable": "yes"}, "tier 't12-foo': field 'runnable' must be a boolean (true/false) (got 'yes')"),
        ({"lvl": 1}, "tier 't12-foo': unknown field 'lvl'"),
        ({"title": None}, "tier 't12-foo': field 'title' must be a string"),
        ({"flags_add": {"tp-size": 4}}, "tier 't12-foo': field 'flags_add' has a bad key 'tp-size'"),
        ({"flags_remove": ["--a", "--a"]}, "tier 't12-foo': field 'flags_remove' lists an item twice"),
        ({"env_add": {"A": True}}, "tier 't12-foo': field 'env_add.A' must be a string or a number"),
        ({"known": [{"finding": "f"}]}, "tier 't12-foo': field 'known[0].evidence' is required"),
        ({"expected_failure_class": "Bad Class"}, "tier 't12-foo': field 'expected_failure_class' = 'Bad Class'"),
    ],
)
def test_schema_errors_name_tier_and_field(catalog, baseline, schema, change, expected):
    bad = copy.deepcopy(catalog)
    tier = dict(GOOD_TIER)
    tier.update(change)
    bad["tiers"]["t12-foo"] = {k: v for k, v in tier.items()}
    errors = st.catalog_errors(bad, baseline, schema)
    assert any(e.startswith(expected) for e in errors), errors


def test_schema_error_for_missing_required_field(catalog, baseline, schema):
    bad = copy.deepcopy(catalog)
    bad["tiers"]["t12-foo"] = {k: v for k, v in GOOD_TIER.items() if k != "hypothesis"}
    assert "tier 't12-foo': field 'hypothesis' is required" in st.catalog_errors(bad, baseline, schema)


def test_schema_error_in_baseline_file(catalog, baseline, schema):
    bad = copy.deepcopy(baseline)
    bad["flags"]["tp-size"] = 8
    errors = st.catalog_errors(catalog, bad, schema)
    assert errors and errors[0].startswith("data/baseline.yml: field 'flags' has a bad key 'tp-size'")


@pytest.mark.parametrize(
    ("tier", "expected"),
    [
        ({**GOOD_TIER, "flags_remove": ["--not-in-baseline"]}, "flags_remove' names --not-in-baseline"),
        ({**GOOD_TIER, "flags_add": {}}, "runnable but changes nothing"),
        ({**GOOD_TIER, "runnable": False, "flags_add": {}}, "'work_needed' is required when runnable is false"),
        ({**GOOD_TIER, "runnable": False, "work_needed": "w"}, "not runnable but carries flag/env changes"),
        ({**GOOD_TIER, "number": 4}, "field 'number' 4 is already used by tier 't04-ep8'"),
        ({**GOOD_TIER, "env_remove": ["NOPE"]}, "'env_remove' names NOPE"),
    ],
)
def test_cross_field_errors(catalog, baseline, schema, tier, expected):
    bad = copy.deepcopy(catalog)
    bad["tiers"]["t12-foo"] = tier
    errors = st.catalog_errors(bad, baseline, schema)
    assert any(expected in e and e.startswith("tier 't12-foo'") for e in errors), errors


def test_constraint_schema_error(catalog, baseline, schema):
    bad = copy.deepcopy(catalog)
    bad["constraints"].append({"id": "x", "severity": "fatal", "message": "m", "source": "s", "when": []})
    errors = st.catalog_errors(bad, baseline, schema)
    n = len(bad["constraints"]) - 1
    assert f"constraint #{n}: field 'severity' must be one of error,warning (got 'fatal')" in errors


# --------------------------------------------------------------------------- tier selection


def test_unknown_tier_lists_known_tiers(catalog):
    with pytest.raises(st.TierError) as exc:
        st.select_tier(catalog, "t04-ep9")
    msg = str(exc.value)
    assert "unknown tier 't04-ep9'" in msg and "Did you mean 't04-ep8'?" in msg
    for tid in catalog["tiers"]:
        assert tid in msg


@pytest.mark.parametrize(("tid", "work"), [("t06-l2-cache-pinning", "code"), ("t07-persistent-grouped-gemm", "kernel")])
def test_non_runnable_tier_says_it_needs_work(catalog, tid, work):
    with pytest.raises(st.TierError) as exc:
        st.select_tier(catalog, tid)
    msg = str(exc.value)
    assert f"tier '{tid}'" in msg and "is not runnable" in msg and f"needs {work} work" in msg
    assert "t04-ep8" in msg  # lists what can run instead


def test_extra_tiers_merge_and_collisions(catalog):
    merged = st.merge_extra_tiers(catalog, {"my-tier": GOOD_TIER})
    assert "my-tier" in merged["tiers"] and "my-tier" not in catalog["tiers"]
    with pytest.raises(st.TierError, match="has the id of a catalog tier"):
        st.merge_extra_tiers(catalog, {"t04-ep8": GOOD_TIER})


# --------------------------------------------------------------------------- argv checks


def errors_of(argv, manifest, **kw):
    return st.check_argv(argv, manifest, **kw)["errors"]


def test_every_runnable_tier_passes_on_the_pin(baseline, catalog, pinned):
    for tid in st.runnable_tiers(catalog):
        argv = st.compose(baseline, catalog["tiers"][tid] if tid != "baseline" else {})["argv"]
        assert errors_of(argv, pinned, constraints=catalog["constraints"]) == [], tid


def test_baseline_fails_on_0523_with_did_you_mean(baseline, m0523):
    argv = st.compose(baseline, {})["argv"]
    errors = errors_of(argv, m0523)
    assert any(e.startswith("--nsa-decode-backend: not an option of SGLang 0.5.23") for e in errors)
    assert any("did you mean --dsa-decode-backend?" in e for e in errors)


def test_history_explains_removed_flags(baseline, catalog, m0523, history):
    argv = st.compose(baseline, catalog["tiers"]["t01-piecewise-cuda-graph"])["argv"]
    errors = errors_of(argv, m0523, history=history)
    pw = next(e for e in errors if e.startswith("--enable-piecewise-cuda-graph"))
    assert "last accepted by 0.5.13.post1" in pw and "'tc_piecewise' is not a choice" in pw
    nsa = next(e for e in errors if e.startswith("--nsa-decode-backend"))
    assert "last accepted by 0.5.16, deprecated there: use --dsa-decode-backend" in nsa


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--model", "m", "--tp-sise", "8"],
            "--tp-sise: not an option of SGLang 0.5.10.post1; did you mean --tp-size?",
        ),
        (["--model", "m", "--kv-cache-dtype", "fp9"], "--kv-cache-dtype: invalid choice 'fp9'"),
        (["--model", "m", "--tp-size"], "--tp-size: expects exactly one value, got 0"),
        (["--model", "m", "--tp-size", "--trust-remote-code"], "--tp-size: expects exactly one value, got 0"),
        (["--model", "m", "--tp-size", "eight"], "--tp-size: expects int, got 'eight'"),
        (["--model", "m", "--trust-remote-code=yes"], "--trust-remote-code: takes no value but got ['yes']"),
        (["--model", "m", "--trust-remote-code", "yes"], "unexpected argument 'yes'"),
        (["--model", "m", "--model-path", "n"], "--model-path: sets 'model_path' which --model already set"),
        (["--model", "m", "--tp-size", "8", "--tensor-parallel-size", "4"], "--tensor-parallel-size: sets"),
        (["--tp-size", "8"], "missing required option --model-path"),
        (["--model", "m", "stray"], "unexpected argument 'stray'"),
        (["--model=m", "--port=x"], "--port: expects int, got 'x'"),
    ],
)
def test_argv_errors(pinned, argv, expected):
    errors = errors_of(argv, pinned)
    assert any(e.startswith(expected) for e in errors), errors


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "m", "--json-model-override-args", '{"a": 1}'],
        ["--model=m", "--tp-size=8"],
        ["--model", "m", "--served-model-name", "a b 'c' $HOME"],
        ["--model", "m", "--cuda-graph-bs", "1", "2", "4"],
        ["--model", "m", "--enable-lora", "--lora-paths", "a=b", "c"],
    ],
)
def test_argv_accepted(pinned, argv):
    assert errors_of(argv, pinned) == []


def test_deprecated_flag_is_a_warning_with_replacement(pinned):
    out = st.check_argv(["--model", "m", "--enable-piecewise-cuda-graph"], pinned)
    assert out["errors"] == []
    assert out["warnings"] == [
        "--enable-piecewise-cuda-graph: deprecated in SGLang 0.5.10.post1; use --enforce-piecewise-cuda-graph"
    ]


def test_fatal_deprecation_is_an_error():
    manifest = {
        "sglang_version": "x",
        "options": [
            {"flags": ["--old"], "dest": "old", "takes_value": False, "nargs": 0, "deprecated": True, "fatal": True},
        ],
    }
    assert errors_of(["--old"], manifest) == ["--old: deprecated in SGLang x (this version refuses it)"]


# --------------------------------------------------------------------------- constraints


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        ({"--ep-size": 4}, "[flashinfer-cutlass-ep-size]"),
        ({"--expert-parallel-size": 2}, "[flashinfer-cutlass-ep-size]"),  # alias resolved through the manifest
        ({"--ep-size": 8}, None),
        ({"--ep-size": 1}, None),
        ({"--ep-size": 4, "--tp-size": 4}, None),
        ({"--quantization": "fp8"}, "[flashinfer-cutlass-quantization]"),
        ({"--dp-size": 3, "--enable-dp-attention": True}, "[dp-attention-divides-tp]"),
        ({"--dp-size": 2, "--enable-dp-attention": True}, None),
    ],
)
def test_known_incompatible_combinations(baseline, catalog, pinned, flags, error):
    argv = st.compose(baseline, {}, flags)["argv"]
    errors = errors_of(argv, pinned, constraints=catalog["constraints"])
    if error is None:
        assert errors == []
    else:
        assert any(e.startswith(error) for e in errors), errors


def test_constraint_warnings_and_version_scope(baseline, catalog, pinned, m0523):
    argv = st.compose(baseline, catalog["tiers"]["t02-mscclpp"])["argv"]
    warn = st.check_argv(argv, pinned, catalog["constraints"])["warnings"]
    assert any(w.startswith("[mscclpp-needs-cuda-graph]") for w in warn)
    # read in 0.5.10.post1's source only: not claimed for 0.5.23
    warn23 = st.check_argv(argv, m0523, catalog["constraints"])["warnings"]
    assert not any("mscclpp-needs-cuda-graph" in w for w in warn23)
    # turning CUDA graphs on removes the warning
    argv2 = st.compose(baseline, catalog["tiers"]["t02-mscclpp"], {"--disable-cuda-graph": None})["argv"]
    assert not any("mscclpp" in w for w in st.check_argv(argv2, pinned, catalog["constraints"])["warnings"])


def test_piecewise_without_enforce_warns_on_the_pin(baseline, catalog, pinned):
    tier = copy.deepcopy(catalog["tiers"]["t01-piecewise-cuda-graph"])
    del tier["flags_add"]["--enforce-piecewise-cuda-graph"]
    warn = st.check_argv(st.compose(baseline, tier)["argv"], pinned, catalog["constraints"])["warnings"]
    assert any(w.startswith("[piecewise-auto-disabled-for-glm5]") for w in warn)


# --------------------------------------------------------------------------- plan_launch


def plan(baseline, catalog, schema, manifest, tier, **kw):
    return st.plan_launch(baseline=baseline, catalog=catalog, schema=schema, tier_id=tier, manifest=manifest, **kw)


def test_plan_ok_returns_launch(baseline, catalog, schema, pinned):
    out = plan(baseline, catalog, schema, pinned, "t04-ep8", flags_override={"--port": 30000})
    assert out["ok"] and out["stage"] == "done"
    launch = out["launch"]
    assert launch["port"] == 30000 and launch["host"] == "0.0.0.0"
    assert launch["hash"] == st.launch_hash(launch["module"], launch["argv"], launch["env"])
    assert launch["sglang_version"] == "0.5.10.post1"


@pytest.mark.parametrize(
    ("tier", "kw", "stage", "text"),
    [
        ("nope", {}, "tier", "unknown tier 'nope'"),
        ("t08-fp4-structured-sparsity", {}, "tier", "is not runnable"),
        ("baseline", {"extra_tiers": {"t12-foo": {**GOOD_TIER, "level": 7}}}, "schema", "field 'level' must be one of"),
        ("baseline", {"extra_tiers": {"t04-ep8": GOOD_TIER}}, "catalog", "has the id of a catalog tier"),
        ("baseline", {"flags_override": {"--nsa-decode-backend": "fast"}}, "argv", "invalid choice 'fast'"),
        ("baseline", {"env_override": {"BAD NAME": 1}}, "compose", "not a valid shell name"),
        ("t04-ep8", {"flags_override": {"--tp-size": 4}}, "argv", "[flashinfer-cutlass-ep-size]"),
    ],
)
def test_plan_failure_stages(baseline, catalog, schema, pinned, tier, kw, stage, text):
    out = plan(baseline, catalog, schema, pinned, tier, **kw)
    assert not out["ok"] and out["stage"] == stage
    assert any(text in e for e in out["errors"]), out["errors"]


def test_plan_with_user_tier(baseline, catalog, schema, pinned):
    mine = {
        **GOOD_TIER,
        "flags_add": {"--ep-size": 8, "--enable-mscclpp": True},
        "flags_remove": ["--disable-cuda-graph"],
    }
    out = plan(baseline, catalog, schema, pinned, "ep8-mscclpp", extra_tiers={"ep8-mscclpp": mine})
    assert out["ok"], out["errors"]
    assert "--disable-cuda-graph" not in out["launch"]["argv"] and "--enable-mscclpp" in out["launch"]["argv"]
