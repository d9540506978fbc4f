"""tools/build_flag_manifest.py: static extraction of SGLang's options.

Three kinds of evidence:
  * facts about the committed manifests (always run);
  * re-extraction from the real wheels, and a cross-check against SGLang's REAL argparse
    parser built by running the wheel's own ``ServerArgs.add_cli_args`` with the heavy
    imports (torch, kernels) replaced by stubs (run when the wheels are on this machine);
  * small synthetic source trees covering both layouts (always run).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import sys
import tarfile
import textwrap
import types
import zipfile
from pathlib import Path
from unittest import mock

import build_flag_manifest as bfm
import pytest
from helpers.paths import REPO

MANIFESTS = REPO / "data" / "flag_manifests"
VERSIONS = ("0.5.10.post1", "0.5.17", "0.5.23")


def committed(version):
    return json.loads((MANIFESTS / f"sglang-{version}.json").read_text())


def by_flag(manifest):
    return {f: o for o in manifest["options"] for f in o["flags"]}


def find_wheel(version):
    """The local wheel for ``version``: $SGLANG_WHEEL_DIR, else the tool's cache (inside the
    checkout), where `make unit` / `make wheels` fetch the pinned wheels before the tests run."""
    roots = [os.environ.get("SGLANG_WHEEL_DIR"), str(bfm.DEFAULT_WHEEL_CACHE)]
    for root in filter(None, roots):
        hits = sorted(Path(root, version).glob(f"sglang-{version}-*.whl"))
        if hits:
            return hits[0]
    return None


def need_wheel(version):
    """The wheel, or a failure that says how to get it: a missing wheel is set-up that did not
    run, never a reason to skip (the test would then guard nothing, silently)."""
    wheel = find_wheel(version)
    if wheel is None:
        pytest.fail(
            f"no sglang-{version} wheel in $SGLANG_WHEEL_DIR or {bfm.DEFAULT_WHEEL_CACHE}; `make wheels` fetches it "
            "(make unit and make test do so first)"
        )
    return wheel


# --------------------------------------------------------------------------- committed manifests


def test_pinned_manifest_facts():
    m = committed("0.5.10.post1")
    idx = by_flag(m)
    assert m["sglang_version"] == "0.5.10.post1"
    assert m["layout"] == ["add_argument"]
    model = idx["--model"]
    assert model["flags"] == ["--model-path", "--model"] and model["dest"] == "model_path" and model["required"]
    assert "trtllm" in idx["--nsa-decode-backend"]["choices"]
    assert "glm47" in idx["--tool-call-parser"]["choices"] and "glm45" in idx["--reasoning-parser"]["choices"]
    pw = idx["--enable-piecewise-cuda-graph"]
    assert pw["action"] == "DeprecatedAction" and pw["deprecated"] and not pw["takes_value"]
    assert pw["replacement"] == "--enforce-piecewise-cuda-graph"
    assert idx["--tp-size"]["type"] == "int" and idx["--tp-size"]["default"] == 1
    assert idx["--disable-cuda-graph"]["action"] == "store_true"
    assert idx["--enable-single-batch-overlap"]["takes_value"] is False
    assert idx["--lora-paths"]["nargs"] == "*"
    assert "torch==2.9.1" in m["requires"] and "cuda-python==12.9" in m["requires"]
    assert {"flashinfer_python==0.6.7.post3", "flashinfer_cubin==0.6.7.post3"} <= set(m["requires"])


def test_comparison_manifest_facts():
    m = committed("0.5.23")
    idx = by_flag(m)
    assert set(m["layout"]) == {"add_argument", "dataclass-fields", "namespace-fields"}
    for present in ("--model-path", "--model", "--tp-size", "--dsa-decode-backend", "--dsa-prefill-backend"):
        assert present in idx, present
    for absent in ("--nsa-decode-backend", "--nsa-prefill-backend", "--enable-piecewise-cuda-graph"):
        assert absent not in idx, absent
    assert idx["--model"]["origin"].startswith("sglang/srt/arg_groups/fields/model.py")
    assert idx["--cuda-graph-backend-prefill"]["choices"] == ["full", "breakable", "disabled"]
    dcg = idx["--disable-cuda-graph"]
    assert dcg["deprecated"] and dcg["replacement"] == "--cuda-graph-backend-{decode,prefill}=disabled"
    tf32 = idx["--no-enable-tf32-matmul"]
    assert tf32["action"] == "BooleanOptionalAction" and tf32["flags"][0] == "--enable-tf32-matmul"
    assert any(r.startswith("cuda-python>=13") for r in m["requires"])


@pytest.mark.parametrize("version", VERSIONS)
def test_manifest_shape(version):
    m = committed(version)
    seen = set()
    for opt in m["options"]:
        for key in ("flags", "dest", "takes_value", "nargs", "type", "choices", "action", "deprecated", "replacement"):
            assert key in opt, (key, opt["flags"])
        for flag in opt["flags"]:
            assert flag.startswith("--") and flag not in seen
            seen.add(flag)
        assert opt["takes_value"] == (opt["nargs"] != 0)
    # every value the extractor could not resolve is listed, and only those are null for that reason
    for item in m["unresolved"]:
        flag, field = item.split(":")
        assert field in by_flag(m)[flag]["unresolved"]


# --------------------------------------------------------------------------- real wheels


@pytest.mark.parametrize("version", VERSIONS)
def test_rebuilding_from_the_wheel_gives_the_committed_manifest(version):
    wheel = need_wheel(version)
    assert bfm.build_manifest(wheel) == committed(version)


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Envs:
    """sglang.srt.environ.envs with every variable unset."""

    def __getattr__(self, name):
        var = mock.MagicMock(name=name)
        var.get.return_value = None
        return var


class _WheelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import the wheel's own argument code for real, stub everything heavy."""

    REAL = (
        "sglang.srt.server_args",
        "sglang.srt.arg_groups",
        "sglang.srt.parser.reasoning_parser",
        "sglang.srt.function_call.parser_names",
        "sglang.srt.function_call.function_call_parser",
    )
    STUBBED = {"sglang", "torch", "triton", "sgl_kernel", "transformers", "flashinfer", "zmq", "PIL"}

    def __init__(self, files):
        self.files = files

    def _path(self, name):
        base = name.replace(".", "/")
        return next((c for c in (base + ".py", base + "/__init__.py") if c in self.files), None)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.STUBBED:
            return None
        rel = self._path(name)
        real = rel if rel and name.startswith(self.REAL) else None
        is_pkg = rel is None or rel.endswith("__init__.py")
        spec = importlib.machinery.ModuleSpec(name, self, is_package=is_pkg)
        spec.real_source = real
        if is_pkg:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec):
        if spec.real_source:
            return None
        module = _Stub(spec.name)
        if spec.name == "sglang.srt.environ":
            module.envs = _Envs()
        return module

    def exec_module(self, module):
        rel = module.__spec__.real_source
        if rel:
            exec(compile(self.files[rel], rel, "exec"), module.__dict__)


def real_parser(wheel):
    """SGLang's own argparse parser, built by the wheel's ServerArgs.add_cli_args."""
    with zipfile.ZipFile(wheel) as zf:
        files = {n: zf.read(n) for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")}
    finder = _WheelFinder(files)
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in finder.STUBBED}
    for k in saved:
        del sys.modules[k]
    sys.meta_path.insert(0, finder)
    try:
        server_args = importlib.import_module("sglang.srt.server_args")
        parser = argparse.ArgumentParser()
        server_args.ServerArgs.add_cli_args(parser)
        return parser
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k.split(".")[0] in finder.STUBBED]:
            del sys.modules[k]
        sys.modules.update(saved)


def _stubbed(value):
    if isinstance(value, mock.Mock):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_stubbed(v) for v in value)
    return False


ACTION_NAMES = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
}


@pytest.mark.parametrize("version", VERSIONS)
def test_manifest_matches_sglangs_real_argparse_parser(version):
    wheel = need_wheel(version)
    if version == "0.5.23":
        pytest.importorskip("msgspec", reason="0.5.23's argument fields are msgspec Structs; pip install msgspec")
    parser = real_parser(wheel)
    manifest = committed(version)
    ours = {tuple(sorted(o["flags"])): o for o in manifest["options"]}
    mismatches = []
    seen = set()
    for action in parser._actions:
        if not action.option_strings or "-h" in action.option_strings:
            continue
        key = tuple(sorted(action.option_strings))
        seen.add(key)
        opt = ours.get(key)
        if opt is None:
            mismatches.append(f"missing from manifest: {key}")
            continue

        def differ(what, real, mine, key=key):
            mismatches.append(f"{key[0]} {what}: real={real!r} manifest={mine!r}")

        if opt["dest"] != action.dest:
            differ("dest", action.dest, opt["dest"])
        if opt["takes_value"] != (action.nargs != 0):
            differ("takes_value", action.nargs != 0, opt["takes_value"])
        if opt["takes_value"] and opt["nargs"] != action.nargs:
            differ("nargs", action.nargs, opt["nargs"])
        if bool(action.required) != opt["required"]:
            differ("required", action.required, opt["required"])
        expected_action = ACTION_NAMES.get(type(action).__name__, type(action).__name__)
        if opt["action"] != expected_action:
            differ("action", expected_action, opt["action"])
        if action.choices is not None and not _stubbed(action.choices) and list(action.choices):
            if opt["choices"] is None or sorted(map(str, action.choices)) != sorted(map(str, opt["choices"])):
                differ("choices", list(action.choices), opt["choices"])
        default = action.default
        if not _stubbed(default) and not callable(default) and "default" not in opt.get("unresolved", []):
            if (list(default) if isinstance(default, (set, tuple)) else default) != opt["default"]:
                differ("default", default, opt["default"])
    mismatches += [f"not in the real parser: {k}" for k in ours if k not in seen]
    assert mismatches == [], "\n".join(mismatches)


# --------------------------------------------------------------------------- synthetic trees

ADD_ARGUMENT_LAYOUT = {
    "sglang/version.py": '__version__ = "9.1.0"\n',
    "sglang/srt/choices.py": 'BACKENDS = ["a", "b"]\nclass Registry:\n    NAMES = {"x": 1, "y": 2}\n',
    "sglang/srt/server_args.py": """
        import argparse
        import dataclasses
        from sglang.srt.choices import BACKENDS, Registry

        EXTRA = [*BACKENDS, "c"]

        @dataclasses.dataclass
        class ServerArgs:
            tp_size: int = 1
            paths: list = dataclasses.field(default_factory=list)

            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", "--model", type=str, required=True)
                parser.add_argument("--tp-size", type=int, default=ServerArgs.tp_size)
                parser.add_argument("--backend", choices=EXTRA + ["d"], default="a")
                names = list(Registry.NAMES.keys())
                parser.add_argument("--parser", choices=names)
                parser.add_argument("--flag", action="store_true")
                parser.add_argument("--old", action=DeprecatedAction, help="Deprecated: use --flag instead.")
                parser.add_argument("--paths", nargs="+", default=ServerArgs.paths)
                parser.add_argument("--toggle", action=argparse.BooleanOptionalAction)
                group = parser.add_argument_group("x")
                group.add_argument("--grouped", type=float, default=-1.5)
                _more(parser)

        def _more(p):
            p.add_argument("--from-helper", choices=sorted({"z", "y"}))

        class DeprecatedAction(argparse.Action):
            def __init__(self, option_strings, dest, nargs=0, **kwargs):
                super().__init__(option_strings, dest, nargs=nargs, **kwargs)

        def prepare_server_args(argv):
            parser = argparse.ArgumentParser()
            ServerArgs.add_cli_args(parser)
            return parser.parse_args(argv)
    """,
}

FIELDS_LAYOUT = {
    "sglang/srt/arg_groups/fields/ns.py": """
        from typing import List, Literal, Optional
        import msgspec
        from sglang.srt.arg_groups.arg_utils import A, Arg

        class Graph:
            ALL = ("full", "off")

        class Ns(msgspec.Struct):
            model_path: A[str, Arg(help="The model.", aliases=["--model"])]
            dsa_decode_backend: A[Optional[str], Arg(help="DSA.", choices=["trtllm", "fa3"])] = None
            mode: A[Literal["x", "y"], "Mode."] = "x"
            sizes: A[Optional[List[int]], "Sizes."] = None
            enable_thing: A[bool, "Thing."] = False
            hidden: A[int, Arg(no_cli=True)] = 3
            backend: A[Optional[str], Arg(help="B.", choices=Graph.ALL, cli_name="--graph-backend")] = None
            plain: int = 4
    """,
    "sglang/srt/server_args.py": """
        import argparse
        from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
        from sglang.srt.arg_groups.fields import collect_input_fields
        from sglang.srt.arg_groups.fields.ns import Ns

        _NAMESPACES = [Ns]
        _annotations, _defaults, _ns = collect_input_fields(_NAMESPACES)

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                add_cli_args_from_dataclass(parser, ServerArgs)
                parser.add_argument("--plain", type=int, default=_declared_default("plain"))
                parser.add_argument("--disable-x", action=DeprecatedStoreTrueAction, new_flag="--x=off")

        ServerArgs = object()  # rebuilt at import time, like msgspec.defstruct

        def prepare_server_args(argv):
            parser = argparse.ArgumentParser(prog="sglang serve")
            ServerArgs.add_cli_args(parser)
    """,
    "sglang/srt/arg_groups/fields/__init__.py": "def collect_input_fields(sources):\n    pass\n",
    "sglang/srt/arg_groups/arg_utils.py": "A = None\nclass Arg: pass\ndef add_cli_args_from_dataclass(p, c): pass\n",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for pkg in ("sglang", "sglang/srt", "sglang/srt/arg_groups"):
        init = root / pkg / "__init__.py"
        if (root / pkg).is_dir() and not init.exists():
            init.write_text("")
    return root


def test_add_argument_layout(tmp_path):
    m = bfm.build_manifest(write_tree(tmp_path / "src", ADD_ARGUMENT_LAYOUT))
    idx = by_flag(m)
    assert m["sglang_version"] == "9.1.0" and m["layout"] == ["add_argument"]
    assert idx["--model"]["required"] and idx["--model"]["dest"] == "model_path"
    assert idx["--tp-size"]["default"] == 1 and idx["--tp-size"]["type"] == "int"
    assert idx["--backend"]["choices"] == ["a", "b", "c", "d"]  # module constant from another file, starred
    assert idx["--parser"]["choices"] == ["x", "y"]  # list(Class.DICT.keys()) through a local variable
    old = idx["--old"]
    assert old["deprecated"] and not old["takes_value"] and old["replacement"] == "--flag"  # nargs=0 from __init__
    assert idx["--paths"]["nargs"] == "+" and idx["--paths"]["default"] == []
    assert idx["--toggle"]["flags"] == ["--toggle", "--no-toggle"]
    assert idx["--grouped"]["default"] == -1.5  # argument group of the parser
    assert idx["--from-helper"]["choices"] == ["y", "z"]  # helper receiving the parser


def test_namespace_fields_layout(tmp_path):
    m = bfm.build_manifest(write_tree(tmp_path / "src", FIELDS_LAYOUT | {"sglang/version.py": '__version__ = "9.2"\n'}))
    idx = by_flag(m)
    assert set(m["layout"]) == {"add_argument", "dataclass-fields", "namespace-fields"}
    assert idx["--model"]["flags"] == ["--model-path", "--model"] and idx["--model"]["required"]
    assert idx["--dsa-decode-backend"]["choices"] == ["trtllm", "fa3"]
    assert idx["--mode"]["choices"] == ["x", "y"] and idx["--mode"]["default"] == "x"
    assert idx["--sizes"]["nargs"] == "+" and idx["--sizes"]["type"] == "int"
    assert idx["--enable-thing"]["action"] == "store_true"
    assert idx["--graph-backend"]["choices"] == ["full", "off"] and idx["--graph-backend"]["dest"] == "backend"
    assert "--hidden" not in idx  # no_cli
    assert idx["--plain"]["default"] == 4  # _declared_default reads the field default
    assert idx["--disable-x"]["replacement"] == "--x=off" and idx["--disable-x"]["deprecated"]


def test_sdist_input_and_metadata_version(tmp_path):
    src = write_tree(tmp_path / "src", ADD_ARGUMENT_LAYOUT)
    (src / "sglang" / "version.py").write_text("__version__ = '0.0.0.dev0'\n")  # placeholder, like real wheels
    sdist = tmp_path / "sglang-7.7.7.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for path in src.rglob("*.py"):
            tf.add(path, arcname=f"sglang-7.7.7/python/{path.relative_to(src)}")
        info = b"Metadata-Version: 2.1\nName: sglang\nVersion: 7.7.7\nRequires-Dist: torch==9.9\n"
        ti = tarfile.TarInfo("sglang-7.7.7/PKG-INFO")
        ti.size = len(info)
        tf.addfile(ti, io.BytesIO(info))
    m = bfm.build_manifest(sdist)
    assert m["sglang_version"] == "7.7.7" and m["requires"] == ["torch==9.9"]
    assert m["source"].startswith("sglang-7.7.7.tar.gz: ") and "sglang/srt/server_args.py" in m["source"]
    assert len(m["source_sha256"]) == 64


def test_not_sglang_is_a_clear_error(tmp_path):
    (tmp_path / "x.py").write_text("")
    with pytest.raises(bfm.ManifestError, match="no sglang/srt/server_args.py inside"):
        bfm.build_manifest(tmp_path)


def test_history_tracks_removal_and_deprecation():
    def manifest(version, options):
        return {"sglang_version": version, "source_sha256": None, "options": options}

    def opt(flag, deprecated=False, replacement=None):
        return {"flags": [flag], "deprecated": deprecated, "replacement": replacement, "action": "store"}

    history = bfm.build_history(
        [
            manifest("1.1", [opt("--keep"), opt("--old", True, "--new"), opt("--new")]),
            manifest("1.0", [opt("--keep"), opt("--old")]),
            manifest("1.2", [opt("--keep"), opt("--new")]),
        ]
    )
    assert history["versions"] == ["1.0", "1.1", "1.2"]
    assert "--keep" not in history["flags"]
    old = history["flags"]["--old"]
    assert (old["first"], old["last"]) == ("1.0", "1.1")
    assert old["changes"][-1] == {"version": "1.1", "deprecated": True, "replacement": "--new", "action": "store"}
    assert history["flags"]["--new"]["first"] == "1.1"


def test_cli_writes_the_manifest_once(tmp_path, capsys):
    src = write_tree(tmp_path / "src", ADD_ARGUMENT_LAYOUT)
    out = tmp_path / "out"
    assert bfm.main([str(src), "--out-dir", str(out)]) == 0
    target = out / "sglang-9.1.0.json"
    first = target.read_text()
    mtime = target.stat().st_mtime_ns
    assert bfm.main([str(src), "--out-dir", str(out)]) == 0
    assert target.read_text() == first and target.stat().st_mtime_ns == mtime  # unchanged file not rewritten
    assert "10 options" in capsys.readouterr().out


def test_version_option_uses_the_wheel_cache_without_pip(tmp_path, monkeypatch):
    src = write_tree(tmp_path / "src", ADD_ARGUMENT_LAYOUT)
    cache = tmp_path / "cache" / "9.1.0"
    cache.mkdir(parents=True)
    wheel = cache / "sglang-9.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in src.rglob("*.py"):
            zf.write(path, str(path.relative_to(src)))
        zf.writestr("sglang-9.1.0.dist-info/METADATA", "Name: sglang\nVersion: 9.1.0\nRequires-Dist: torch==1.0\n")

    def no_pip(*args, **kwargs):
        raise AssertionError(f"pip must not run when the wheel is cached: {args}")

    monkeypatch.setattr(bfm.subprocess, "run", no_pip)
    out = tmp_path / "out"
    assert bfm.main(["--version", "9.1.0", "--wheel-cache", str(tmp_path / "cache"), "--out-dir", str(out)]) == 0
    manifest = json.loads((out / "sglang-9.1.0.json").read_text())
    assert manifest["requires"] == ["torch==1.0"] and manifest["source"].startswith(wheel.name)
