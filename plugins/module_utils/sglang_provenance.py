# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provenance of a benchmark record: launch, versions, /server_info, GPU facts.

Used by modules sglang_bench, sglang_slo_search and sglang_ledger_append (their
option spec, and collect_provenance fed from those options by
provenance_from_params); the benchmark client itself is sglang_bench_points.py.
Standard library only (psutil when present): this code runs on the target
host. Functions that read files, run a command or call the server say so.
"""

import json
import os
import re
import socket

try:  # Inside AnsiballZ.
    from ansible.module_utils.nvidia_smi import gpu_snapshot
    from ansible.module_utils.sglang_ledger import to_json_safe, utc_now
    from ansible.module_utils.sglang_process import WAIT_STATE_NAME, file_sha256
except ImportError:  # pytest and tools put module_utils on sys.path.
    from nvidia_smi import gpu_snapshot
    from sglang_ledger import to_json_safe, utc_now
    from sglang_process import WAIT_STATE_NAME, file_sha256


# Environment variable names whose values never reach the ledger.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_KEY|CREDENTIAL|PRIVATE", re.I)
# Server environment worth recording when no explicit launch env is given.
_ENV_PREFIXES = (
    "SGLANG_",
    "NCCL_",
    "CUDA_",
    "TORCH",
    "FLASHINFER",
    "OMP_",
    "SAFETENSORS_",
    "PYTHONUNBUFFERED",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
)


def redact_env(env):
    """Return ``env`` with the values of secret-looking names replaced."""
    return dict(
        (str(k), "<redacted>" if _SECRET_NAME.search(str(k)) else str(v)) for k, v in sorted((env or {}).items())
    )


def _read_proc(pid, name):
    with open(f"/proc/{int(pid)}/{name}", "rb") as handle:
        return handle.read().split(b"\0")


def server_process_pid(pid):
    """The pid of the server's Python process in the session that ``pid`` leads.

    The lifecycle records the session leader, a shell that runs the launch script; the script
    exports its environment and ``exec``s the server, so argv and env must be read from that
    process (``python ... -m <module>``), not from the leader, whose environment is the
    inherited one. Falls back to ``pid`` itself when psutil is missing or nothing matches.
    """
    try:
        import psutil
    except ImportError:
        return pid
    try:
        leader = psutil.Process(pid)
        candidates = [leader] + leader.children(recursive=True)
    except psutil.Error:
        return pid
    for proc in candidates:
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if "-m" in cmdline[:-1] and cmdline[cmdline.index("-m") + 1].endswith("launch_server"):
            return proc.pid
    return pid


def launch_provenance(server_state=None, launch_script=None, launch_argv=None, launch_env=None):
    """Describe the server launch: script and sha256, final argv and env.

    Sources, best first: the parameters (what role sglang_launch rendered),
    then the lifecycle's state file ``server.json`` and the live process in
    /proc. Anything not found is null with its reason in ``reasons``.
    """
    reasons = {}
    state = None
    if server_state:
        try:
            with open(server_state) as handle:
                state = json.load(handle)
        except (OSError, ValueError) as exc:
            reasons["server_state"] = f"cannot read {server_state}: {exc}"
    state = state if isinstance(state, dict) else {}
    script = launch_script or state.get("script")
    script_sha256 = None
    if script:
        try:
            script_sha256 = file_sha256(script)
        except OSError as exc:
            reasons["script_sha256"] = f"cannot read {script}: {exc}"
    else:
        reasons["script"] = "no launch script given and none in the server state"
    pid = state.get("pid")
    if pid and not (launch_argv and launch_env):
        pid = server_process_pid(pid)
    argv, argv_source = None, None
    if launch_argv:
        argv, argv_source = [str(a) for a in launch_argv], "parameter"
    elif pid:
        try:
            argv = [a.decode("utf-8", "replace") for a in _read_proc(pid, "cmdline") if a]
            argv_source = "proc"
        except OSError as exc:
            reasons["argv"] = f"server pid {pid}: {exc}"
    else:
        reasons["argv"] = "no launch argv given and no server pid known"
    env, env_source = None, None
    if launch_env:
        env, env_source = redact_env(launch_env), "parameter"
    elif pid:
        try:
            pairs = [a.decode("utf-8", "replace") for a in _read_proc(pid, "environ") if a]
            env = redact_env(dict(p.split("=", 1) for p in pairs if "=" in p and p.startswith(_ENV_PREFIXES)))
            env_source = "proc"
        except OSError as exc:
            reasons["env"] = f"server pid {pid}: {exc}"
    else:
        reasons["env"] = "no launch env given and no server pid known"
    return {
        "script": script,
        "script_sha256": script_sha256,
        "script_sha256_at_start": state.get("script_sha256"),
        "argv": argv,
        "argv_source": argv_source,
        "env": env,
        "env_source": env_source,
        "server": dict((k, state.get(k)) for k in ("tier", "pid", "port", "started_at", "log") if k in state),
        "startup_phases": startup_phases_of(server_state, state),
        "reasons": reasons,
    }


def startup_phases_of(server_state, state):
    """The start-up phases (s) the ready-wait recorded for this server (``wait_ready.json`` beside
    ``server.json``, module sglang_server, state=ready), or None when it recorded none for it."""
    if not server_state:
        return None
    path = os.path.join(os.path.dirname(server_state), WAIT_STATE_NAME)
    try:
        with open(path) as handle:
            saved = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("server") != "{}@{}".format(state.get("pid"), state.get("started_at")):
        return None
    return saved.get("phases")


VERSION_NAMES = ("sglang", "flashinfer", "torch", "cuda")
_DISTRIBUTIONS = {
    "sglang": ("sglang",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "torch": ("torch",),
}
_METADATA_SCRIPT = r"""
import json
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
names = %r
out = {}
for key, dists in names.items():
    out[key] = None
    for dist in dists:
        try:
            out[key] = metadata.version(dist)
            break
        except Exception:
            pass
for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime"):
    try:
        out["cuda_runtime_package"] = metadata.version(dist)
        break
    except Exception:
        pass
print(json.dumps(out))
"""


def versions_from_facts(data):
    """Pick sglang/flashinfer/torch/cuda versions out of a local facts mapping.

    Accepted spellings, first found wins: ``versions.<name>``, ``<name>_version``,
    ``<name>``; a value may be a string or a mapping with a "version" key.
    """
    found = {}
    nested = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    for name in VERSION_NAMES:
        for candidate in (nested.get(name), data.get(name + "_version"), data.get(name)):
            if isinstance(candidate, dict):
                candidate = candidate.get("version")
            if isinstance(candidate, (str, int, float)) and candidate != "":
                found[name] = str(candidate)
                break
    return found


def cuda_from_torch(torch_version):
    """Return "12.8" for a torch version such as "2.9.1+cu128", else None."""
    match = re.search(r"\+cu(\d+)(\d)$", torch_version or "")
    if not match:
        return None
    return f"{match.group(1)}.{match.group(2)}"


def collect_versions(facts_file=None, python=None, run=None):
    """Return SGLang/FlashInfer/torch/CUDA versions with their source.

    Order: the local facts file (JSON) if present, then importlib.metadata in
    the ml-env interpreter ``python`` (run through ``run(argv) -> (rc, out,
    err)``), else null with the reason in ``reasons``.
    """
    result = dict((name, None) for name in VERSION_NAMES)
    result["source"] = None
    reasons = {}
    if facts_file and os.path.exists(facts_file):
        try:
            with open(facts_file) as handle:
                data = json.load(handle)
            found = versions_from_facts(data if isinstance(data, dict) else {})
            if found:
                result.update(found)
                result["source"] = f"facts_file:{facts_file}"
        except (OSError, ValueError) as exc:
            reasons["facts_file"] = f"cannot read {facts_file} as JSON: {exc}"
    elif facts_file:
        reasons["facts_file"] = f"{facts_file} not present"
    missing = [name for name in VERSION_NAMES if result[name] is None]
    if missing and python and run is not None:
        rc, out, err = run([python, "-c", _METADATA_SCRIPT % (_DISTRIBUTIONS,)])
        if rc == 0:
            try:
                meta = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                meta = {}
                reasons["importlib.metadata"] = f"unreadable output from {python}"
            used = False
            for name in ("sglang", "flashinfer", "torch"):
                if result[name] is None and meta.get(name):
                    result[name] = meta[name]
                    used = True
            if result["cuda"] is None:
                cuda = cuda_from_torch(meta.get("torch"))
                if cuda is None and meta.get("cuda_runtime_package"):
                    cuda = meta["cuda_runtime_package"]
                if cuda:
                    result["cuda"] = cuda
                    used = True
            if used:
                source = f"importlib.metadata:{python}"
                result["source"] = source if result["source"] is None else result["source"] + "+" + source
        else:
            reasons["importlib.metadata"] = f"{python} exited {rc}: {(err or '')[-300:]}"
    elif missing and not python:
        reasons["importlib.metadata"] = "no ml-env interpreter given"
    for name in VERSION_NAMES:
        if result[name] is None:
            reasons.setdefault(
                name,
                "not in the facts file and not installed as a distribution in the ml-env",
            )
    result["reasons"] = reasons
    return result


def fetch_server_info(host, port, timeout=10.0, opener=None):
    """GET /server_info (side effect); return ``(info or None, reason or None)``."""
    url = f"http://{host}:{port}/server_info"
    if opener is None:
        try:
            from urllib.request import urlopen as opener
        except ImportError:  # pragma: no cover - Python 2
            from urllib2 import urlopen as opener
    try:
        response = opener(url, timeout=timeout)
        body = response.read().decode("utf-8", errors="replace")
        info = json.loads(body)
    except Exception as exc:  # noqa: BLE001 - any failure is a reason, not a crash
        return None, f"GET {url} failed: {exc}"
    if not isinstance(info, dict):
        return None, f"GET {url} returned {type(info).__name__}, not an object"
    return to_json_safe(info), None


def server_tokenizer(host, port):
    """The tokenizer the server at ``host:port`` loaded: /server_info's ``tokenizer_path``, else
    its ``model_path`` (side effect: the GET). Returns ``(tokenizer, None)``, or ``(None, reason)``
    when the server gave neither."""
    info, reason = fetch_server_info(host, port)
    tokenizer = (info or {}).get("tokenizer_path") or (info or {}).get("model_path")
    if tokenizer:
        return tokenizer, None
    return None, reason or "no tokenizer_path or model_path"


def server_log(server_state):
    """The running server's log (server.json ``log``), read for its [http_server] Error lines;
    None when ``server_state`` is unset, unreadable or names none (side effect: reads the file)."""
    try:
        with open(server_state) as handle:
            return json.load(handle).get("log") or None
    except (OSError, TypeError, ValueError, AttributeError):
        return None


SIMULATOR_MODULE = "sglang_sim.launch_server"


def target_is_simulator(server_info, argv=None, script=None):
    """True/False from /server_info's "synthetic" flag; when the server never answered (a crash
    at load), from the command line (argv read from /proc includes ``-m <module>``) or else the
    launch script's ``exec`` line; None when none of them is known."""
    if isinstance(server_info, dict):
        return server_info.get("synthetic") is True
    if argv and any(SIMULATOR_MODULE in str(a) for a in argv):
        return True
    if script:
        try:
            with open(script, encoding="utf-8", errors="replace") as handle:
                return SIMULATOR_MODULE in handle.read()
        except OSError:
            pass
    return False if argv else None


def model_from(server_info, fallback=None):
    """Return the record's model block from /server_info or the fallback name."""
    info = server_info if isinstance(server_info, dict) else {}
    model = {
        "model_path": info.get("model_path"),
        "served_model_name": info.get("served_model_name"),
        "tp_size": info.get("tp_size"),
    }
    if not model["model_path"] and fallback:
        model["model_path"] = fallback
    return model


def gpu_facts(run_command):
    """GPU facts from nvidia-smi (module_utils nvidia_smi.gpu_snapshot).

    Where nvidia-smi is missing (the simulator host) the snapshot says so:
    ``available`` false with ``error_class`` "missing" and the reason.
    """
    try:
        snapshot = gpu_snapshot(run_command)
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal for a benchmark
        return {"available": False, "error_class": "failed", "error": f"nvidia-smi snapshot failed: {exc}"}
    return to_json_safe(snapshot)


# Module options that feed collect_provenance() (through provenance_from_params()), shared by every
# module that writes a record (sglang_bench, sglang_slo_search, sglang_ledger_append) so all accept
# and default them the same way.
PROVENANCE_ARGUMENT_SPEC = dict(
    server_state=dict(type="path"),
    launch_script=dict(type="path"),
    launch_argv=dict(type="list", elements="str"),
    launch_env=dict(type="dict"),
    facts_file=dict(type="path", default="/etc/ansible/facts.d/sglang_lab.fact"),
    ml_env_python=dict(type="path"),
    git_revision=dict(type="str"),
    collect_provenance=dict(type="bool", default=True),
)


def collect_provenance(
    host,
    port,
    tier=None,
    server_state=None,
    launch_script=None,
    launch_argv=None,
    launch_env=None,
    facts_file=None,
    python=None,
    run=None,
    run_command=None,
    git_revision=None,
    hostname=None,
    model=None,
    client=None,
    fetch_info=True,
    server_info_timeout=10.0,
):
    """Gather everything a ledger record says about where a number came from."""
    reasons = {}
    server_info = None
    if fetch_info:
        server_info, reason = fetch_server_info(host, port, timeout=server_info_timeout)
        if reason:
            reasons["server_info"] = reason
    launch = launch_provenance(server_state, launch_script, launch_argv, launch_env)
    if run_command is not None:
        gpu = gpu_facts(run_command)
    else:
        gpu = {"available": False, "error_class": None, "error": "not collected"}
    return to_json_safe(
        {
            "tier": tier,
            "hostname": hostname,
            "server": {"host": host, "port": port},
            "server_info": server_info,
            "target_is_simulator": target_is_simulator(server_info, launch.get("argv"), launch.get("script")),
            "model": model_from(server_info, model),
            "launch": launch,
            "versions": collect_versions(facts_file, python, run),
            "gpu": gpu,
            "git_revision": git_revision,
            "client": client,
            "collected_at": utc_now(),
            "reasons": reasons,
        }
    )


def provenance_from_params(module, host_key="address", port_key="port", client_python=None, **extra):
    """collect_provenance() for a module whose spec has PROVENANCE_ARGUMENT_SPEC and a ``tier``.

    The launch, facts and git options come from ``module.params`` as the module got them; the
    server from the options named ``host_key`` and ``port_key`` (sglang_bench and sglang_slo_search
    call them address and port, sglang_ledger_append server_address and server_port); the versions are
    asked of ``ml_env_python``, else of ``client_python`` (the benchmark client's interpreter),
    through ``module.run_command``, which also runs nvidia-smi; the hostname is this host's.
    ``extra`` goes to collect_provenance() as it is (model, client, fetch_info, ...). Calls the
    server, reads files and runs commands, as collect_provenance() does.
    """
    p = module.params
    return collect_provenance(
        host=p[host_key],
        port=p[port_key],
        tier=p["tier"],
        server_state=p["server_state"],
        launch_script=p["launch_script"],
        launch_argv=p["launch_argv"],
        launch_env=p["launch_env"],
        facts_file=p["facts_file"],
        python=p["ml_env_python"] or client_python,
        run=module.run_command,
        run_command=module.run_command,
        git_revision=p["git_revision"],
        hostname=socket.gethostname(),
        **extra,
    )
