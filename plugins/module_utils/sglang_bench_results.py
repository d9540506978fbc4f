# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark points and their provenance, for modules sglang_bench and
sglang_ledger_append.

Pure functions (plus the few that read files, run the client or call the
server, each documented as such). Standard library only: this code runs on the
target host. Key names follow SGLang's bench_serving JSONL (docs/ledger.md).
"""

import hashlib
import json
import os
import re
import signal
import subprocess
import time

try:  # Inside AnsiballZ.
    from ansible.module_utils.nvidia_smi import gpu_snapshot
    from ansible.module_utils.sglang_ledger import (
        POINT_FAILED,
        POINT_OK,
        to_json_safe,
        utc_now,
    )
except ImportError:  # pytest and tools/report.py put module_utils on sys.path.
    from nvidia_smi import gpu_snapshot
    from sglang_ledger import POINT_FAILED, POINT_OK, to_json_safe, utc_now


# Result keys copied from a bench_serving JSONL line into a ledger point,
# unchanged in name and unit (ms, tok/s, req/s, s).
METRIC_KEYS = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "total_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p95_itl_ms",
    "p99_itl_ms",
    "mean_e2e_latency_ms",
    "median_e2e_latency_ms",
    "std_e2e_latency_ms",
    "p90_e2e_latency_ms",
    "p99_e2e_latency_ms",
    "accept_length",
)
# bench_serving's "concurrency" is the measured mean number of requests in
# flight; the ledger's point "concurrency" is the --max-concurrency asked for.
RENAMED_KEYS = {"concurrency": "measured_concurrency"}
# Arguments bench_serving echoes into its result line.
ECHO_KEYS = (
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "tag",
)

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

# Client output that says why bench_serving failed, most specific first.
_CLIENT_FAILURES = (
    (
        "server_unreachable",
        re.compile(
            r"Server at \S+ is not ready|Failed to fetch model from|"
            r"Cannot connect to host|Connection refused|Connection reset by peer|"
            r"Connection aborted|RemoteDisconnected|Server disconnected"
        ),
    ),
    (
        "hf_gated_or_offline",
        re.compile(
            r"LocalEntryNotFoundError|offline mode is enabled|HF_HUB_OFFLINE|"
            r"couldn't connect to 'https://huggingface.co'|GatedRepoError|"
            r"is not a local folder and is not a valid model identifier"
        ),
    ),
    (
        "incomplete_point",
        re.compile(r"name 'result' is not defined|Error running benchmark for request rate"),
    ),
)


def num_prompts_for(concurrency, multiplier, floor):
    """Prompts for one point: max(multiplier * concurrency, floor)."""
    if concurrency < 1 or multiplier < 1 or floor < 1:
        raise ValueError(
            f"concurrency, multiplier and floor must be >= 1, got {concurrency!r}, {multiplier!r}, {floor!r}"
        )
    return max(int(multiplier) * int(concurrency), int(floor))


def format_request_rate(value):
    """Spell a request rate for the bench_serving command line ("inf" or a number)."""
    if value is None:
        return "inf"
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("inf", "infinity", "+inf"):
            return "inf"
        float(text)  # ValueError for anything that is not a number
        return text
    if value == float("inf"):
        return "inf"
    return repr(float(value))


def build_client_argv(
    client_command,
    host,
    port,
    concurrency,
    num_prompts,
    input_len,
    output_len,
    output_file,
    tokenizer,
    dataset_name="random",
    dataset_path=None,
    range_ratio=1.0,
    request_rate="inf",
    seed=1,
    model=None,
    served_model_name=None,
    output_details=False,
    warmup_requests=None,
    tag=None,
    extra_args=None,
):
    """Return the full bench_serving command line for one point."""
    argv = list(client_command) + [
        "--backend",
        "sglang",
        "--host",
        str(host),
        "--port",
        str(port),
        "--dataset-name",
        str(dataset_name),
    ]
    if dataset_path:
        argv += ["--dataset-path", str(dataset_path)]
    argv += [
        "--random-input-len",
        str(int(input_len)),
        "--random-output-len",
        str(int(output_len)),
        "--random-range-ratio",
        str(float(range_ratio)),
        "--num-prompts",
        str(int(num_prompts)),
        "--max-concurrency",
        str(int(concurrency)),
        "--request-rate",
        format_request_rate(request_rate),
        "--seed",
        str(int(seed)),
        "--tokenizer",
        str(tokenizer),
        "--model",
        str(model or tokenizer),
    ]
    if served_model_name:
        argv += ["--served-model-name", str(served_model_name)]
    if warmup_requests is not None:
        argv += ["--warmup-requests", str(int(warmup_requests))]
    if tag:
        argv += ["--tag", str(tag)]
    argv += ["--output-file", str(output_file), "--disable-tqdm"]
    if output_details:
        argv.append("--output-details")
    argv += [str(a) for a in (extra_args or [])]
    return argv


def parse_result_lines(text):
    """Parse bench_serving JSONL text; return the list of objects.

    json.loads accepts the ``Infinity`` that bench_serving writes for
    ``--request-rate inf``; callers pass results through to_json_safe before
    they leave as strict JSON.
    """
    results = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        value = json.loads(line)
        if isinstance(value, dict):
            results.append(value)
    return results


def read_new_results(path, offset=0):
    """Return the result objects bench_serving appended to ``path`` after ``offset``.

    bench_serving opens its output file in append mode, so a reused file holds
    older lines; only the bytes written by this run are parsed.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return []
    return parse_result_lines(data.decode("utf-8", errors="replace"))


def summarize_errors(errors, limit=5, width=300):
    """Count request errors by message, digits ignored; return [{error, count}].

    Messages that differ only in numbers ("The input (73 tokens) ...") count
    as one; ``error`` is the first example. Beyond ``limit`` groups the rest
    are summed under "(other errors)", so the counts always add up to the
    number of failed requests that reported an error.
    """
    groups = {}
    for error in errors or []:
        if not error:
            continue
        text = str(error).strip()[:width]
        key = re.sub(r"\d+", "N", text)
        if key not in groups:
            groups[key] = {"error": text, "count": 0}
        groups[key]["count"] += 1
    ranked = sorted(groups.values(), key=lambda item: (-item["count"], item["error"]))
    summary = ranked[:limit]
    rest = sum(item["count"] for item in ranked[limit:])
    if rest:
        summary.append({"error": "(other errors)", "count": rest})
    return summary


def point_from_result(result, concurrency, repeat, num_prompts):
    """Build a ledger point from one bench_serving result object.

    The point is "ok" only when ``completed == num_prompts``; otherwise it
    is "failed" with class incomplete_point and the counts in its message.
    """
    point = {
        "concurrency": int(concurrency),
        "repeat": int(repeat),
        "num_prompts": int(num_prompts),
    }
    for key in METRIC_KEYS:
        point[key] = result.get(key)
    for source, target in RENAMED_KEYS.items():
        point[target] = result.get(source)
    point["client_echo"] = dict((key, result.get(key)) for key in ECHO_KEYS if key in result)
    completed = result.get("completed")
    completed = int(completed) if isinstance(completed, (int, float)) else 0
    point["completed"] = completed
    point["failed"] = int(num_prompts) - completed
    if "errors" in result:
        point["errors"] = summarize_errors(result.get("errors"))
    if completed == int(num_prompts):
        point["status"] = POINT_OK
        point["failure"] = None
    else:
        point["status"] = POINT_FAILED
        point["failure"] = {
            "class": "incomplete_point",
            "step": "benchmark",
            "message": (
                f"completed {completed} of {int(num_prompts)} requests "
                f"({point['failed']} failed) at concurrency {int(concurrency)}"
            ),
        }
    return to_json_safe(point)


def failed_point(concurrency, repeat, num_prompts, failure_class, message):
    """Build a failed point for a run that produced no result line.

    Without a result line the number of completed requests is unknown, so
    ``completed`` and ``failed`` are null (not a guessed 0).
    """
    return {
        "concurrency": int(concurrency),
        "repeat": int(repeat),
        "num_prompts": int(num_prompts),
        "status": POINT_FAILED,
        "completed": None,
        "failed": None,
        "failure": {
            "class": failure_class,
            "step": "benchmark",
            "message": f"{message}; no result line, so the completed count is unknown",
        },
    }


def classify_client_failure(returncode, output, timed_out=False):
    """Return ``(class, reason)`` for a bench_serving run without a result line."""
    if timed_out:
        return "bench_timeout", "bench_serving ran past its time limit and was killed"
    for failure_class, pattern in _CLIENT_FAILURES:
        match = pattern.search(output or "")
        if match:
            if failure_class == "incomplete_point":
                return failure_class, "every request failed; bench_serving wrote no result"
            return failure_class, f"bench_serving output: {match.group(0)}"
    return "bench_client_failed", f"bench_serving exited with {returncode} and wrote no result"


def tail(text, limit=4000):
    """Return the last ``limit`` characters of ``text``."""
    text = text or ""
    return text[-limit:]


def run_client(argv, env=None, timeout=None, log_path=None, cwd=None):
    """Run the benchmark client (side effect); return its outcome.

    The client runs in its own session so a timeout kills its whole process
    group. Output goes to ``log_path`` (kept beside the JSONL) and its tail is
    returned. Returns ``{"rc", "timed_out", "output", "log"}``.
    """
    full_env = dict(os.environ)
    full_env.update(dict((str(k), str(v)) for k, v in (env or {}).items()))
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path = log_path or os.devnull
    timed_out = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.returncode
    output = ""
    if log_path != os.devnull:
        with open(log_path, "rb") as handle:
            output = handle.read().decode("utf-8", errors="replace")
    return {"rc": rc, "timed_out": timed_out, "output": output, "log": log_path}


def _kill_group(proc, grace=10.0):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def sha256_file(path):
    """Return the hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
            script_sha256 = sha256_file(script)
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
        "reasons": reasons,
    }


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
            reasons["importlib.metadata"] = f"{python} exited {rc}: {tail(err, 300)}"
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


# Module options that feed collect_provenance(), shared by every module that writes a record
# (sglang_bench, sglang_ledger_append) so both accept and default them the same way.
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


def run_point(
    argv,
    output_file,
    concurrency,
    repeat,
    num_prompts,
    env=None,
    timeout=None,
    log_path=None,
):
    """Run one benchmark point (side effect) and return ``(point, outcome)``."""
    offset = os.path.getsize(output_file) if os.path.exists(output_file) else 0
    started_at = utc_now()
    start = time.time()
    outcome = run_client(argv, env=env, timeout=timeout, log_path=log_path)
    ended_at = utc_now()
    results = read_new_results(output_file, offset)
    if results and not outcome["timed_out"]:
        point = point_from_result(results[-1], concurrency, repeat, num_prompts)
        if outcome["rc"] != 0 and point["status"] == POINT_OK:
            point["status"] = POINT_FAILED
            point["failure"] = {
                "class": "bench_client_failed",
                "step": "benchmark",
                "message": "bench_serving wrote a result but exited {}".format(outcome["rc"]),
            }
    else:
        failure_class, reason = classify_client_failure(outcome["rc"], outcome["output"], outcome["timed_out"])
        point = failed_point(concurrency, repeat, num_prompts, failure_class, reason)
        point["failure"]["output_tail"] = tail(outcome["output"], 2000)
    point["started_at"] = started_at
    point["ended_at"] = ended_at
    point["wall_s"] = round(time.time() - start, 3)
    point["output_file"] = output_file
    point["client_log"] = outcome["log"]
    point["command"] = list(argv)
    return point, outcome
