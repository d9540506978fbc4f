# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's real parser on a launch, once per distinct input (module sglang_launch_parse).

``prepare_server_args(argv)`` from the ml-env is the last word on whether SGLang accepts a launch:
it builds SGLang's own argparse parser and runs ServerArgs' start-up checks (the EP-size
assertion, backend choices that depend on the model). It costs an import of SGLang: 25-26 s on the
lent H200 with 0.5.17, before every stop, for an argv that it accepted a minute earlier.

So an acceptance is kept on the host under a content key, and the parser runs again only when
something it reads has changed:

* the argv and the launch's environment (SGLang reads ``SGLANG_*`` and other variables);
* the interpreter, the installed SGLang's version and the sha256 of its ``server_args.py``,
  read through ``importlib.metadata`` in about 0.1 s, without importing SGLang: a reinstalled
  or patched SGLang is a new key;
* the sha256 of the model's ``config.json`` when ``--model-path`` is a local folder (the
  checks read the model's architecture from it).

Not in the key: the GPUs (count and free memory; ServerArgs reads the memory to choose defaults,
and an argv that only fits other GPUs is refused by the server's own start). Only acceptances are
kept: a refusal is printed every time, and a parser that timed out or could not start is
never taken for an answer. The cache is a memo of SGLang's answer, not experiment state: it is
written in check mode too, so that playbooks/validate.yml is cheap the second time.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

# Run with the ml-env interpreter: what the installed SGLang is, without importing it.
FINGERPRINT_CODE = r"""
import hashlib, json, sys
from importlib import metadata
try:
    dist = metadata.distribution("sglang")
except metadata.PackageNotFoundError:
    print(json.dumps({"installed": False}))
    sys.exit(0)
path = dist.locate_file("sglang/srt/server_args.py")
try:
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
except OSError:
    digest = None
print(json.dumps({"installed": True, "version": dist.version, "server_args": str(path),
                  "server_args_sha256": digest}))
"""

# Run with the ml-env interpreter, the argv after it.
PARSER_CODE = r"""
import sys
from sglang.srt.server_args import prepare_server_args
args = prepare_server_args(sys.argv[1:])
print("SGLang accepted the argv:", type(args).__name__, getattr(args, "model_path", ""))
"""

CACHE_VERSION = 1
FINGERPRINT_TIMEOUT_S = 60


def _env(env):
    full = dict(os.environ)
    full.update((str(k), str(v)) for k, v in (env or {}).items())
    return full


def fingerprint(interpreter, env=None, run=subprocess.run):
    """What SGLang the interpreter has: ``{installed, version, server_args, server_args_sha256}``.

    Raises ``RuntimeError`` with the interpreter's own words when it cannot answer."""
    try:
        proc = run([interpreter, "-c", FINGERPRINT_CODE], capture_output=True, text=True, env=_env(env),
                   timeout=FINGERPRINT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run {interpreter}: {exc}") from exc
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        found = None
    if proc.returncode != 0 or not isinstance(found, dict):
        raise RuntimeError(f"{interpreter} could not say which SGLang it has (rc {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    return found


def model_config_sha256(argv):
    """sha256 of ``<--model-path>/config.json`` when the model is a local folder, else None."""
    for flag in ("--model-path", "--model"):
        if flag in argv:
            index = argv.index(flag)
            if index + 1 < len(argv):
                path = os.path.join(argv[index + 1], "config.json")
                try:
                    with open(path, "rb") as handle:
                        return hashlib.sha256(handle.read()).hexdigest()
                except OSError:
                    return None
    return None


def cache_key(interpreter, argv, env, found, config_sha256):
    """The content key of one parser verdict (the module docstring lists what it covers)."""
    material = {
        "v": CACHE_VERSION,
        "interpreter": interpreter,
        "argv": list(argv),
        "env": dict(sorted((str(k), str(v)) for k, v in (env or {}).items())),
        "sglang": {key: found.get(key) for key in ("version", "server_args_sha256")},
        "model_config_sha256": config_sha256,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


def _write(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def check(interpreter, argv, env, cache_dir, timeout, run=subprocess.run, clock=time.monotonic):
    """SGLang's verdict on ``argv`` (side effects: the parser, the cache); returns a dict.

    ``accepted`` (bool), ``cached`` (the verdict came from the cache), ``key``, ``sglang``
    (version and the hash of server_args.py), ``rc``, ``output`` (the parser's last lines),
    ``seconds`` (this check's own time). Raises ``RuntimeError`` when SGLang cannot be asked
    (no such interpreter, no SGLang, the parser timed out): that is no verdict."""
    began = clock()
    found = fingerprint(interpreter, env, run=run)
    if not found.get("installed"):
        raise RuntimeError(f"SGLang is not installed for {interpreter}; install it into the ml-env (role sglang)")
    key = cache_key(interpreter, argv, env, found, model_config_sha256(list(argv)))
    path = os.path.join(cache_dir, key + ".json")
    sglang = {"version": found.get("version"), "server_args_sha256": found.get("server_args_sha256")}
    try:
        with open(path, encoding="utf-8") as handle:
            kept = json.load(handle)
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and kept.get("accepted") is True and kept.get("key") == key:
        return dict(kept, cached=True, seconds=round(clock() - began, 3))
    try:
        proc = run([interpreter, "-c", PARSER_CODE] + list(argv), capture_output=True, text=True, env=_env(env),
                   timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"SGLang's parser took longer than {timeout} s") from exc
    except OSError as exc:
        raise RuntimeError(f"cannot run {interpreter}: {exc}") from exc
    lines = ((proc.stderr or "") + (proc.stdout or "")).strip().splitlines()
    verdict = {
        "accepted": proc.returncode == 0,
        "key": key,
        "sglang": sglang,
        "rc": proc.returncode,
        "output": lines[-15:],
        "parser_seconds": round(clock() - began, 3),
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if verdict["accepted"]:
        os.makedirs(cache_dir, 0o750, exist_ok=True)
        _write(path, verdict)
    return dict(verdict, cached=False, seconds=round(clock() - began, 3))


# Why launch_verdict could give no acceptance: the launch is incomplete, SGLang could not be asked, or
# SGLang refused the argv.
MISSING, UNANSWERED, REJECTED = "missing", "unanswered", "rejected"


def launch_verdict(launch, cache_dir, timeout, run=subprocess.run):
    """SGLang's verdict on a composed launch (role sglang_launch's ``sglang_launch_result``), for module
    sglang_launch_parse and module sglang_experiment_preflight: ``(verdict, refusal)``.

    ``verdict`` is ``check``'s (None when there is none); ``refusal`` is None when SGLang accepted the
    argv, else ``{"kind", "var", "value", "message", "output"}``: MISSING, UNANSWERED or REJECTED, the
    variable to fix and its value, what happened, and SGLang's last lines when it refused (each caller
    lays them out in its own message)."""
    interpreter, tier = launch.get("interpreter"), launch.get("tier")
    missing = [key for key in ("interpreter", "argv", "tier") if not launch.get(key)]
    if missing:
        return None, {"kind": MISSING, "var": "sglang_launch_result", "value": None, "output": [],
                      "message": f"the launch lacks {', '.join(missing)}; pass sglang_launch_result whole."}
    try:
        verdict = check(interpreter, [str(a) for a in launch["argv"]], launch.get("env") or {}, cache_dir, timeout,
                        run=run)
    except RuntimeError as exc:
        return None, {"kind": UNANSWERED, "var": "sglang_lab_ml_env", "value": interpreter, "output": [],
                      "message": f"SGLang's own parser could not check tier '{tier}': {exc}"}
    if not verdict["accepted"]:
        return verdict, {"kind": REJECTED, "var": "sglang_launch_flags_override", "value": tier,
                         "output": verdict["output"],
                         "message": f"SGLang's own parser rejected tier '{tier}' ({interpreter} -c "
                                    f"prepare_server_args(argv), rc {verdict['rc']})"}
    return verdict, None


def answered(verdict):
    """How an acceptance was reached: ``cached verdict in 0.13 s`` or ``parser run in 18.17 s``."""
    return "{} in {:.2f} s".format("cached verdict" if verdict["cached"] else "parser run", verdict["seconds"])
