#!/usr/bin/env python3
"""Run SGLang's real benchmark client, ``sglang.bench_serving``, without torch.

Usage (same arguments as ``python -m sglang.bench_serving``)::

    python tools/sglang_bench_client.py --backend sglang --host 127.0.0.1 \\
        --port 30000 --dataset-name random-ids --num-prompts 10 ...

Why this file exists
--------------------
``bench_serving`` itself needs only light packages (aiohttp, numpy, requests,
tqdm, transformers, pyzmq, pybase64, datasets, psutil). Importing it the normal
way does not work on a host without torch, because Python first runs the
package initialisers on the import path:

* ``sglang/__init__.py`` imports the frontend language API and, through it,
  torch;
* ``sglang/srt/utils/__init__.py`` (reached through
  ``sglang.srt.utils.network``) imports torch and the CUDA helpers;
* ``sglang.bench_serving`` reads one constant, ``FAKE_BOOTSTRAP_HOST``, from
  ``sglang.srt.disaggregation.utils``, whose module imports torch as well.

This script registers empty package objects for ``sglang``, ``sglang.srt`` and
``sglang.srt.utils`` whose ``__path__`` points at the real installed
directories, so their submodules (``sglang.benchmark.*``,
``sglang.srt.utils.network``, ...) load from the real files while the heavy
``__init__`` files are skipped. ``FAKE_BOOTSTRAP_HOST`` is read from the real
``disaggregation/utils.py`` with ``ast`` (not copied here). Then the real
``sglang.bench_serving`` runs as ``__main__``: its argument parser, request
generator, metrics and JSONL output are SGLang's own, unchanged.

Where torch and the full SGLang install exist (the GPU node's ml-env), run
``python -m sglang.bench_serving`` directly; role sglang_bench chooses through
``sglang_bench_client`` (``module`` or ``shim``). docs/benchmark.md has more.

Only the standard library is used here; the script is copied to the target
host and run by the ml-env interpreter that has SGLang installed.
"""

from __future__ import annotations

import ast
import importlib.util
import runpy
import sys
import types
from pathlib import Path

# Packages whose __init__ pulls in torch; their submodules are still loaded
# from the real directories.
_SHELL_PACKAGES = (
    ("sglang", ""),
    ("sglang.srt", "srt"),
    ("sglang.srt.utils", "srt/utils"),
    ("sglang.srt.disaggregation", "srt/disaggregation"),
)
_CONSTANT_MODULE = "sglang.srt.disaggregation.utils"
_CONSTANT_FILE = "srt/disaggregation/utils.py"
_CONSTANT_NAME = "FAKE_BOOTSTRAP_HOST"


def find_sglang_root() -> Path:
    """Return the installed sglang package directory, or exit with advice."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(
            "sglang_bench_client: the sglang package is not installed for "
            f"{sys.executable}; install sglang (pip install --no-deps "
            "sglang==<version>) into this environment, or run the client with "
            "the interpreter that has it."
        )
    return Path(list(spec.submodule_search_locations)[0])


def read_constant(path: Path, name: str) -> object:
    """Read a module-level ``NAME = <literal>`` from a Python file, unexecuted."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return ast.literal_eval(node.value)
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            return ast.literal_eval(node.value)
    sys.exit(
        f"sglang_bench_client: {name} not found in {path}; this SGLang version "
        "lays out its modules differently. Run python -m sglang.bench_serving "
        "with the full install instead, or update this shim."
    )


def install_shells(root: Path) -> None:
    """Register light package objects so heavy __init__ files are skipped."""
    for name, rel in _SHELL_PACKAGES:
        module = types.ModuleType(name)
        module.__path__ = [str(root / rel) if rel else str(root)]
        module.__file__ = None
        sys.modules[name] = module
    constants = types.ModuleType(_CONSTANT_MODULE)
    setattr(constants, _CONSTANT_NAME, read_constant(root / _CONSTANT_FILE, _CONSTANT_NAME))
    sys.modules[_CONSTANT_MODULE] = constants


def main(argv: list[str] | None = None) -> None:
    install_shells(find_sglang_root())
    sys.argv = ["bench_serving", *(sys.argv[1:] if argv is None else argv)]
    runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
