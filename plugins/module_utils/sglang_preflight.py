# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiment's preflight: everything the cycle needs, checked before the lock and the stop.

Module sglang_experiment_preflight gathers the facts (the port's holders, the recorded server's
processes, nvidia-smi, free disk space, the ml-env's FlashInfer and Hugging Face cache) and
hands them to the functions below; each returns a list of problems, one mapping each:

    {"check": "port", "var": "sglang_launch_flags_override['--port']", "value": 70000,
     "message": "... what is wrong ... what to do"}

The functions read only what they are given (and, for model folders, the folder named), so
tests/unit/test_preflight.py calls them directly with table-driven cases. Standard library only: this
code runs on the target host (sglang_process for the session/pidfile logic of the lifecycle).
docs/experiment.md ("Preflight") lists every check and its message.
"""

import fnmatch
import json
import os
import re

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_bench_points import num_prompts_for, rate_prompts, shared_prefix_prompts
    from ansible.module_utils.sglang_ledger import ledger_file_mode
    from ansible.module_utils.sglang_process import (
        KILL_PATTERNS,
        cmdline_matches,
        compile_patterns,
        parse_iso,
        server_alive,
        session_processes,
    )
except ImportError:  # pytest puts module_utils on sys.path.
    from sglang_bench_points import num_prompts_for, rate_prompts, shared_prefix_prompts
    from sglang_ledger import ledger_file_mode
    from sglang_process import (
        KILL_PATTERNS,
        cmdline_matches,
        compile_patterns,
        parse_iso,
        server_alive,
        session_processes,
    )

# Where a launch flag is changed, by its source in the launch's flag_sources (module_utils/sglang_tiers.py).
SOURCE_WORDS = {
    "baseline": "data/baseline.yml",
    "tier": "the tier - data/tiers.yml or sglang_launch_extra_tiers",
    "host_override": "the host override - sglang_launch_flags_override",
}
# Weight files of a model folder, and the index files that name their shards.
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# Any one of these makes a folder a tokenizer that transformers loads offline.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "tiktoken.model")
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
MIB = 1024 * 1024


def problem(check, var, value, message):
    return {"check": check, "var": var, "value": value, "message": message}


def format_problems(problems):
    """The preflight's failure message: one line per problem."""
    lines = [f"- [{p['check']}] {p['message']}" for p in problems]
    return "The experiment cannot run; nothing was stopped or started:\n" + "\n".join(lines)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value):
    """An int from an int, a whole float or a string of digits, else None."""
    if _is_int(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


# --------------------------------------------------------------------------- benchmark settings
# The settings themselves are resolved and checked by role sglang_bench's settings step
# (module_utils/sglang_bench_settings.py, through the sglang_bench_settings filter), which the
# validate entry point runs before this module; these are the checks it leaves to the experiment.


def benchmark_problems(cfg, point_timeout_s=None, sharegpt_conversations=None):
    """What the resolved settings (``sglang_bench_cfg``) still need for this run.

    ``point_timeout_s`` (sglang_bench_point_timeout_s) must be whole seconds >= 1.
    ``sharegpt_conversations``, given on a simulator target whose dataset is the generated
    synthetic ShareGPT file, must cover the largest point's num_prompts: bench_serving's random
    dataset takes one conversation a prompt, and a point with fewer fails as incomplete_point.
    """
    out = []
    timeout = _as_int(point_timeout_s)
    if point_timeout_s is not None and not (timeout is not None and timeout >= 1):
        out.append(problem(
            "benchmark", "sglang_bench_point_timeout_s", point_timeout_s,
            f"sglang_bench_point_timeout_s is {point_timeout_s!r}: it must be a whole number of seconds >= 1 "
            "(each point's deadline inside the benchmark client).",
        ))
    prompts = (cfg or {}).get("num_prompts") or {}
    concurrency = (cfg or {}).get("concurrency") or []
    if sharegpt_conversations is not None and concurrency and prompts:
        largest = max(max(concurrency) * prompts["multiplier"], prompts["floor"])
        if sharegpt_conversations < largest:
            out.append(problem(
                "benchmark", "sglang_experiment_sim_sharegpt_conversations", sharegpt_conversations,
                f"sglang_experiment_sim_sharegpt_conversations is {sharegpt_conversations}, but the largest point "
                f"sends {largest} prompts and bench_serving's random dataset takes one conversation per prompt: "
                f"that point would fail as incomplete_point. Set it to at least {largest}.",
            ))
    return out


def dataset_problems(dataset_path, exists=os.path.exists, generated=None):
    """A dataset_path that is set must exist (or be the file the simulator setup writes)."""
    if not dataset_path or dataset_path == generated:
        return []
    if exists(dataset_path):
        return []
    return [problem(
        "benchmark", "sglang_bench_dataset_path", dataset_path,
        f"sglang_bench_dataset_path (or dataset_path in data/benchmark.yml) is {dataset_path!r}, which does not "
        "exist on the host. Copy the "
        "ShareGPT JSON there, or set it to null (bench_serving then needs the file in the HF cache).",
    )]


def largest_point_prompts(cfg):
    """The prompts the largest planned point sends: max(multiplier x concurrency, floor) (a request-rate
    sweep: rate_prompts at its highest rate), at least the window's min_requests, in whole groups for
    generated-shared-prefix (sglang_bench_points.plan_points' rule, through its own functions; a point
    re-sized to its window may ask for more, up to measurement.max_prompts)."""
    cfg = cfg or {}
    rule = cfg.get("num_prompts") or {}
    concurrency = cfg.get("concurrency") or []
    if not concurrency or not rule.get("multiplier") or not rule.get("floor"):
        return None
    measurement = cfg.get("measurement") or {}
    if cfg.get("request_rates"):  # a request-rate sweep: the window's arrivals at its highest rate
        prompts = rate_prompts(max(float(r) for r in cfg["request_rates"]), rule["floor"],
                               measurement.get("min_duration_s"))
    else:
        prompts = num_prompts_for(max(concurrency), rule["multiplier"], rule["floor"])
    prompts = max(prompts, int(measurement.get("min_requests") or 0))
    return shared_prefix_prompts(prompts, cfg.get("gsp_num_groups"))


def longest_request(cfg):
    """(prompt tokens, output tokens) of the workload's longest request as bench_serving builds it:
    random and random-ids input_len and output_len (range ratio <= 1 only shortens them);
    generated-shared-prefix the shared system prompt, the question and output_len, and with
    gsp_num_turns T the last turn's, which carries every earlier question and answer (bench_serving
    sends each answer back: system + T x question + (T - 1) x output); sharegpt (None,
    output_len): the prompts are the corpus's own, counted only by the tokenizer."""
    cfg = cfg or {}
    output = _as_int(cfg.get("output_len")) or 0
    if cfg.get("dataset_name") == "sharegpt":
        return None, output
    prompt = _as_int(cfg.get("input_len")) or 0
    if cfg.get("dataset_name") == "generated-shared-prefix":
        turns = max(1, _as_int(cfg.get("gsp_num_turns")) or 1)
        prompt = (_as_int(cfg.get("gsp_system_prompt_len")) or 0) + turns * prompt + (turns - 1) * output
    return prompt, output


def context_problems(cfg, launch):
    """The workload's longest request must fit the context length the launch gives the model: prompt
    plus output below its --context-length, as SGLang's own request check wants (without the flag
    the model's own length applies, which this check does not read)."""
    flags = (launch or {}).get("flags") or {}
    context = _as_int(flags.get("--context-length"))
    if context is None:
        return []
    prompt, output = longest_request(cfg)
    name = f"workload {cfg['name']!r}" if (cfg or {}).get("name") else "the workload"
    # SGLang refuses a request whose prompt and max_new_tokens reach the context length.
    if prompt is None:
        total, what = output, f"{output} output tokens alone"
    else:
        total, what = prompt + output, f"{prompt} prompt + {output} output = {prompt + output} tokens"
    if total < context:
        return []
    return [problem(
        "benchmark", "--context-length", context,
        f"{name} sends requests of {what}, but the launch's --context-length (set by "
        f"{_flag_origin(launch, '--context-length')}) is {context}: SGLang would refuse or cut them. "
        "Shorten the workload (sglang_bench_input_len, sglang_bench_output_len) or raise --context-length.",
    )]


def corpus_problems(cfg, largest=None, load=None):
    """A sharegpt workload's corpus (dataset_path) must parse as bench_serving reads it - a JSON list
    of conversations - and hold at least ``largest`` of two turns or more: bench_serving takes one
    conversation a prompt, and a point with fewer sends fewer requests (incomplete_point).
    ``load`` reads the file (json.load of it by default); a missing file is dataset_problems'."""
    cfg = cfg or {}
    path = cfg.get("dataset_path")
    if cfg.get("dataset_name") != "sharegpt" or not path:
        return []
    if load is None:
        def load(name):
            with open(name, encoding="utf-8") as handle:
                return json.load(handle)
    try:
        data = load(path)
    except FileNotFoundError:
        return []
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return [problem(
            "benchmark", "sglang_bench_dataset_path", path,
            f"the corpus {path!r} does not parse as JSON ({exc}); bench_serving's sharegpt dataset reads a "
            "ShareGPT-format JSON list of {\"conversations\": [{\"from\": ..., \"value\": ...}, ...]}.",
        )]
    if not isinstance(data, list):
        return [problem(
            "benchmark", "sglang_bench_dataset_path", path,
            f"the corpus {path!r} is a JSON {type(data).__name__}, not the list of conversations "
            "bench_serving's sharegpt dataset reads.",
        )]
    usable = sum(
        1 for item in data
        if isinstance(item, dict) and isinstance(item.get("conversations", item.get("conversation")), list)
        and len(item.get("conversations", item.get("conversation"))) >= 2
    )
    if largest is not None and usable < largest:
        return [problem(
            "benchmark", "sglang_bench_dataset_path", path,
            f"the corpus {path!r} holds {usable} conversations of two turns or more (of {len(data)}), but the "
            f"largest point sends {largest} prompts and bench_serving's sharegpt dataset takes one conversation "
            "a prompt: that point would send fewer and fail as incomplete_point. Use a larger corpus or fewer "
            "prompts (sglang_bench_concurrency, sglang_bench_num_prompts_multiplier).",
        )]
    return []


# --------------------------------------------------------------------------- the launch's flags


def _flag_origin(launch, flag):
    source = (launch.get("flag_sources") or {}).get(flag)
    words = SOURCE_WORDS.get(source, "the launch")
    if source == "host_override" and flag == "--port":
        words = "the host override - sglang_lab_port, sglang_launch_port or sglang_launch_flags_override"
    return words


def flag_conflict_problems(tier, conflicts):
    """Each flag the tier changes and the host override overrules is an error (the run would not test the tier)."""
    out = []
    for c in conflicts or []:
        if c.get("tier_field") == "flags_remove":
            wanted = "removes it (flags_remove)"
        else:
            wanted = f"sets {c.get('tier_value')!r}"
        out.append(problem(
            "flag_ownership", f"sglang_launch_flags_override['{c['flag']}']", c.get("override_value"),
            f"{c['flag']}: tier '{tier}' {wanted}, but the host's sglang_launch_flags_override sets "
            f"{c.get('override_value')!r}, and the override is applied last: the server would run the host's "
            f"value and the ledger would credit it to tier '{tier}'. Drop {c['flag']} from "
            "sglang_launch_flags_override for this run (or give the host's value a tier of its own in "
            "sglang_launch_extra_tiers).",
        ))
    return out


def gpus_needed(flags):
    """GPUs the launch uses: --tp-size (--tp) x --pp-size, times --dp-size (--dp) unless DP attention
    runs the DP groups inside the TP world (--enable-dp-attention). Values default to 1."""
    flags = flags or {}

    def size(*names):
        for name in names:
            if name in flags:
                value = _as_int(flags[name])
                return value if value and value > 0 else 1
        return 1

    tp = size("--tp-size", "--tp", "--tensor-parallel-size")
    pp = size("--pp-size", "--pp", "--pipeline-parallel-size")
    dp = size("--dp-size", "--dp", "--data-parallel-size")
    if flags.get("--enable-dp-attention") is True:
        dp = 1
    return tp * pp * dp


# --------------------------------------------------------------------------- the port


def our_pids(state, patterns=()):
    """Pids of the server this host recorded (run/server.json: its session and pid), if it runs.

    ``patterns`` (the stop's command-line net, when on) is returned compiled for port_problems
    and gpu_problems: a process they match is stopped by the verified stop, so it is ours too.
    """
    pids = set()
    if state and server_alive(state):
        started = parse_iso(state.get("started_at"))
        not_before = None if started is None else started - 2.0
        if state.get("sid"):
            pids.update(proc.pid for proc in session_processes(state["sid"], not_before))
        if state.get("pid"):
            pids.add(state["pid"])
    return pids


def _ours(holder, pids, compiled):
    if holder.get("pid") in pids:
        return True
    return bool(compiled and holder.get("cmdline") and cmdline_matches(holder["cmdline"], compiled))


def launch_port(launch):
    """The launch's --port as an int when it is a valid TCP port, else None."""
    port = _as_int((launch.get("flags") or {}).get("--port"))
    return port if port is not None and 1 <= port <= 65535 else None


def port_problems(launch, server_port, bench_port, holders, pids, state=None, compiled=()):
    """The launch's --port: 1-65535, the port the lifecycle and the client use, and not held by a
    process that is not ours (``holders``: sglang_process.port_holders; ``pids``: our_pids)."""
    raw = (launch.get("flags") or {}).get("--port")
    origin = _flag_origin(launch, "--port")
    port = launch_port(launch)
    if port is None:
        return [problem(
            "port", "--port", raw,
            f"--port is {raw!r} (set by {origin}): a TCP port is an integer 1-65535. Set the host's port with "
            "sglang_lab_port (the launch, the lifecycle and the benchmark client all read it) and leave --port out "
            "of sglang_launch_flags_override.",
        )]
    out = []
    for name, other in (("sglang_server_port", server_port), ("sglang_bench_port", bench_port)):
        if other is not None and _as_int(other) != port:
            out.append(problem(
                "port", name, other,
                f"the server would listen on --port {port} (set by {origin}), but {name} is {other!r}: the "
                "verified stop, the ready-wait and the benchmark would look at the wrong port. Set the port once, "
                "with sglang_lab_port, and drop the other settings.",
            ))
    foreign = [h for h in holders or [] if not _ours(h, pids, compiled)]
    if pids and _as_int((state or {}).get("port")) == port:
        # An owner this user cannot see, while our recorded server runs on this port: taken as ours.
        foreign = [h for h in foreign if h.get("pid") is not None]
    if foreign:
        who = "; ".join(
            f"pid {h['pid']} ({(h.get('cmdline') or '?')[:160]}) on {h.get('address')}" if h.get("pid") is not None
            else f"a process this user cannot see on {h.get('address')}"
            for h in foreign
        )
        recorded = f"tier {state.get('tier')} pid {state.get('pid')}" if state and pids else "none running"
        out.append(problem(
            "port", "--port", port,
            f"port {port} is held by {who}, which is not the server this host recorded ({recorded}); the "
            "experiment would stop our server and then fail to start on a taken port. Stop that process, or "
            "choose another port with sglang_lab_port.",
        ))
    return out


# --------------------------------------------------------------------------- the model and the tokenizer


def weight_problems(folder):
    """What a local model folder lacks: config.json, and weight files (every shard an index names)."""
    missing = []
    if not os.path.isfile(os.path.join(folder, "config.json")):
        missing.append("config.json")
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    for index in WEIGHT_INDEXES:
        if index in names:
            try:
                with open(os.path.join(folder, index), encoding="utf-8") as handle:
                    shards = sorted(set((json.load(handle).get("weight_map") or {}).values()))
            except (OSError, ValueError) as exc:
                missing.append(f"a readable {index} ({exc})")
                continue
            absent = [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
            if absent:
                missing.append(f"{len(absent)} of the {len(shards)} shards {index} names (first: {absent[0]})")
            if not shards:
                missing.append(f"the shards of {index} (its weight_map is empty)")
            return missing
    if not any(fnmatch.fnmatch(n, pattern) for n in names for pattern in WEIGHT_PATTERNS
               if os.path.isfile(os.path.join(folder, n))):
        missing.append("weight files (*.safetensors, *.bin or an index naming them)")
    return missing


def tokenizer_present(folder):
    return any(os.path.isfile(os.path.join(folder, name)) for name in TOKENIZER_FILES)


def hub_cache_dir(env=None, hf_home=None):
    """The Hugging Face hub cache the server and the client read: HF_HUB_CACHE, else HF_HOME/hub
    (the launch's environment first, then sglang_lab_hf_home), huggingface_hub's own order."""
    env = env or {}
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    home = env.get("HF_HOME") or hf_home or os.path.expanduser("~/.cache/huggingface")
    return os.path.join(home, "hub")


def hub_snapshot(cache_dir, repo_id, revision=None):
    """(snapshot folder, None) of ``repo_id`` in huggingface_hub's cache layout, or (None, why).

    models--<org>--<name>/refs/<revision or main> names the commit; snapshots/<commit>/ holds the files.
    """
    repo = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    if not os.path.isdir(repo):
        return None, f"{repo} does not exist"
    ref = revision or "main"
    if COMMIT.match(ref):
        commit = ref
    else:
        try:
            with open(os.path.join(repo, "refs", ref), encoding="utf-8") as handle:
                commit = handle.read().strip()
        except OSError:
            return None, f"{repo}/refs/{ref} does not exist (the revision was never downloaded)"
    snapshot = os.path.join(repo, "snapshots", commit)
    if not os.path.isdir(snapshot):
        return None, f"{snapshot} does not exist"
    return snapshot, None


def is_hub_id(name):
    return bool(name) and not name.startswith(("/", ".", "~")) and bool(HUB_ID.match(name)) and not os.path.exists(name)


# The simulator's own model folder: what python -m sglang_sim.make_tokenizer writes.
SIM_MODEL_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json")
SIM_SHAREGPT_NAME = "synthetic_sharegpt.json"


def sim_model_complete(folder, sharegpt_conversations):
    """Whether the simulator's folder already holds its tokenizer and at least ``sharegpt_conversations``
    synthetic ShareGPT conversations: the test of make_tokenizer's --if-missing
    (simulator/sglang_sim/make_tokenizer.py is_complete; tests/unit/test_preflight.py holds them equal),
    asked here so that the validate step starts that generator only when there is something to write."""
    if not all(os.path.isfile(os.path.join(folder, name)) for name in SIM_MODEL_FILES):
        return False
    if sharegpt_conversations <= 0:
        return True
    try:
        with open(os.path.join(folder, SIM_SHAREGPT_NAME), encoding="utf-8") as handle:
            return len(json.load(handle)) >= sharegpt_conversations
    except (OSError, ValueError, TypeError):
        return False


def model_problems(launch, sim_model=None, hub=None, hf_cache=None):
    """The model the launch serves (--model-path / --model).

    Simulator target: a local folder with config.json (its tokenizer); only ``sim_model``, the
    simulator's own folder, is generated by the validate step, so any other missing path is refused.
    Real SGLang: a local folder with config.json and its weights, or a Hub id complete in the HF
    cache offline. ``hub`` maps a Hub id to {path, error} as huggingface_hub's own offline lookup
    answered in the ml-env (None where it is not importable: the cache layout is read instead).
    """
    model = launch.get("model")
    flag = "--model-path" if "--model-path" in (launch.get("flags") or {}) else "--model"
    origin = _flag_origin(launch, flag)
    if not model:
        return [problem("model", flag, model, f"the launch has no {flag}: set it in data/baseline.yml or "
                        "sglang_launch_flags_override.")]
    if launch.get("target") == "simulator":
        if not model.startswith("/"):
            return [problem(
                "model", flag, model,
                f"{flag} is {model!r} (set by {origin}): the simulator target serves a local tokenizer folder, not a "
                f"Hub id. Set sglang_launch_flags_override: {{'--model': '{sim_model or '<work dir>/sim-model'}'}} "
                "(inventory/local.yml does).",
            )]
        if model == sim_model:
            return []  # the validate step generates it when it is missing
        if not os.path.isdir(model) or not os.path.isfile(os.path.join(model, "config.json")):
            return [problem(
                "model", flag, model,
                f"{flag} is {model!r} (set by {origin}), which is not a folder with config.json. The simulator setup "
                f"writes only its own folder, {sim_model}; point {flag} there, or write this one first with "
                f"python -m sglang_sim.make_tokenizer {model}.",
            )]
        return []
    if os.path.isdir(model):
        missing = weight_problems(model)
        if missing:
            return [problem(
                "model", flag, model,
                f"{flag} is the local folder {model!r} (set by {origin}), which lacks {', '.join(missing)}. "
                "Finish the download (role model_cache) or point it at a complete checkpoint.",
            )]
        return []
    if not is_hub_id(model):
        return [problem(
            "model", flag, model,
            f"{flag} is {model!r} (set by {origin}): no such folder on the host, and not a Hugging Face id "
            "(<org>/<name>). Fix the path, or download the model (playbooks/provision.yml, role model_cache).",
        )]
    snapshot, why = _hub_lookup(model, (launch.get("flags") or {}).get("--revision"), hub, hf_cache)
    if snapshot is None:
        return [problem(
            "model", flag, model,
            f"{flag} is the Hub id {model!r} (set by {origin}), which is not in the HF cache {hf_cache} ({why}); "
            "the server runs offline. Download it first (playbooks/provision.yml, role model_cache) or set "
            "sglang_lab_hf_home to the cache that holds it.",
        )]
    missing = weight_problems(snapshot)
    if missing:
        return [problem(
            "model", flag, model,
            f"{flag} is the Hub id {model!r}: its cached snapshot {snapshot} lacks {', '.join(missing)} (an "
            "interrupted download). Run the download again (role model_cache).",
        )]
    return []


def _hub_lookup(repo_id, revision, hub, hf_cache):
    answer = (hub or {}).get(repo_id)
    if answer is not None:
        return answer.get("path"), answer.get("error")
    return hub_snapshot(hf_cache, repo_id, revision)


def tokenizer_problems(tokenizer, source, launch, sim_model=None, hub=None, hf_cache=None):
    """The benchmark client's tokenizer (sglang_bench_tokenizer, else what the server loads) loads offline."""
    if not tokenizer:
        return []
    if tokenizer == sim_model and launch.get("target") == "simulator":
        return []
    if os.path.isdir(tokenizer):
        if tokenizer_present(tokenizer):
            return []
        return [problem(
            "tokenizer", source, tokenizer,
            f"the benchmark client's tokenizer ({source}) is {tokenizer!r}, a folder with none of "
            f"{', '.join(TOKENIZER_FILES)}. Set sglang_bench_tokenizer to a folder or Hub id that has them.",
        )]
    if not is_hub_id(tokenizer):
        return [problem(
            "tokenizer", source, tokenizer,
            f"the benchmark client's tokenizer ({source}) is {tokenizer!r}: no such folder on the host and not a "
            "Hugging Face id. Set sglang_bench_tokenizer to the model folder (or its Hub id in the HF cache).",
        )]
    snapshot, why = _hub_lookup(tokenizer, None, hub, hf_cache)
    if snapshot is None or not tokenizer_present(snapshot):
        return [problem(
            "tokenizer", source, tokenizer,
            f"the benchmark client's tokenizer ({source}) is the Hub id {tokenizer!r}, which does not load offline "
            f"from {hf_cache} ({why or 'its snapshot has no tokenizer file'}); the client runs with "
            "HF_HUB_OFFLINE=1. Download it first or set sglang_bench_tokenizer to a local folder.",
        )]
    return []


# --------------------------------------------------------------------------- GPUs and disk


def visible_gpu_indexes(env, gpus):
    """The GPU indexes the server may use: CUDA_VISIBLE_DEVICES of its environment, else all."""
    indexes = [g.get("index") for g in gpus]
    visible = (env or {}).get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return indexes
    by_uuid = {g.get("uuid"): g.get("index") for g in gpus}
    chosen = []
    for item in str(visible).split(","):
        item = item.strip()
        if item.isdigit() and int(item) in indexes:
            chosen.append(int(item))
        elif item in by_uuid:
            chosen.append(by_uuid[item])
    return chosen


def gpu_problems(snapshot, needed, pids, env=None, compiled=(), cmdline_of=None):
    """Enough GPUs for the launch (gpus_needed) and no foreign compute process on them.

    ``snapshot`` is nvidia_smi.gpu_snapshot; ``pids`` our server's (our_pids). A process the
    stop's command-line net matches (``compiled``, read with ``cmdline_of(pid)``) is ours too.
    """
    if not snapshot.get("available"):
        return [problem(
            "gpu", "sglang_lab_expect_gpu", True,
            f"this host is a GPU target (sglang_lab_expect_gpu) but nvidia-smi does not answer: "
            f"{snapshot.get('error') or 'no GPU listed'}. Fix the driver (playbooks/provision.yml) first.",
        )]
    visible = visible_gpu_indexes(env, snapshot.get("gpus") or [])
    out = []
    if len(visible) < needed:
        mask = (env or {}).get("CUDA_VISIBLE_DEVICES")
        out.append(problem(
            "gpu", "--tp-size", needed,
            f"the launch needs {needed} GPU(s) (tensor x pipeline x data parallel size of its flags) but "
            f"{len(visible)} are visible ({len(snapshot.get('gpus') or [])} on the host"
            + (f", CUDA_VISIBLE_DEVICES={mask}" if mask is not None else "")
            + "). Lower --tp-size/--dp-size in sglang_launch_flags_override or run on a larger host.",
        ))
    foreign = []
    for app in snapshot.get("processes") or []:
        if app.get("gpu_index") not in visible or app.get("pid") in pids:
            continue
        cmdline = cmdline_of(app["pid"]) if cmdline_of else None
        if compiled and cmdline and cmdline_matches(cmdline, compiled):
            continue
        foreign.append(app)
    if foreign:
        who = "; ".join(
            f"pid {a['pid']} ({a.get('process_name')}, {a.get('used_memory_mib')} MiB on GPU {a.get('gpu_index')})"
            for a in foreign
        )
        out.append(problem(
            "gpu", "GPU compute processes", [a["pid"] for a in foreign],
            f"GPU memory is held by {who}, which is not the server this host recorded: the verified stop would "
            "not free it and the new server would not fit. Stop that process first.",
        ))
    return out


def existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def disk_problems(paths, min_free_mib, statvfs=os.statvfs):
    """Free space where logs and results are written (the nearest existing folder of each path)."""
    out = []
    seen = set()
    for path in paths or []:
        where = existing_ancestor(path)
        try:
            st = statvfs(where)
        except OSError as exc:
            out.append(problem("disk", path, None, f"cannot read the free space of {where} ({exc})."))
            continue
        if st.f_fsid in seen:  # one message per file system
            continue
        seen.add(st.f_fsid)
        free = st.f_bavail * st.f_frsize // MIB
        if free < min_free_mib:
            out.append(problem(
                "disk", "sglang_experiment_min_free_mib", min_free_mib,
                f"{path} has {free} MiB free ({where}), less than sglang_experiment_min_free_mib = {min_free_mib} "
                "MiB for the server log and the benchmark results. Free some space (old logs: <work>/logs/*.log.N, "
                "raw results: <work>/results/raw/) or lower the minimum.",
            ))
    return out


def ledger_mode_problems(mode):
    """The ledger's file mode (sglang_bench_ledger_mode), which module sglang_ledger_append reads as
    octal only when it records, after the whole cycle ran: checked here instead."""
    if mode is None:
        return []
    try:
        ledger_file_mode(mode)  # as module sglang_ledger_append reads it
    except ValueError:
        return [problem("ledger", "sglang_bench_ledger_mode", mode,
                        f"sglang_bench_ledger_mode is {mode!r}, not an octal file mode such as \"0640\"; "
                        "the record step would refuse it after the benchmark. Fix it in the inventory.")]
    return []


# --------------------------------------------------------------------------- FlashInfer patches


def patch_states(catalog, wanted_ids):
    """Every catalog patch with the state the patches step brings it to (the tier's present, others absent)."""
    wanted = list(wanted_ids or [])
    return [dict(catalog[pid], id=pid, state="present" if pid in wanted else "absent") for pid in catalog]


def flashinfer_problems(found, catalog, wanted_ids, patch_files_present, file_sha256=None):
    """What roles/flashinfer/tasks/patches.yml needs, before the stop.

    ``found`` is what the ml-env answered: {version (flashinfer-python, None when not installed),
    site (its site-packages), module_file (what ``import flashinfer`` finds with the launch's env)}.
    ``patch_files_present`` lists the catalog's patch files that exist in
    roles/flashinfer/files/patches/ on the controller; ``file_sha256(path)`` hashes a file (None if missing).
    """
    out = []
    unknown = [pid for pid in wanted_ids or [] if pid not in catalog]
    if unknown:
        out.append(problem(
            "flashinfer", "patches", unknown,
            f"the tier lists FlashInfer patch(es) {', '.join(unknown)}, which roles/flashinfer/vars/main.yml does "
            f"not know (known: {', '.join(catalog) or 'none'}). Fix the tier's patches in data/tiers.yml.",
        ))
    version = (found or {}).get("version")
    if not version:
        out.append(problem(
            "flashinfer", "sglang_experiment_apply_patches", True,
            f"the patches step (sglang_experiment_apply_patches) needs flashinfer-python installed in the ml-env, and "
            f"it is not ({(found or {}).get('error') or 'no flashinfer-python distribution'}; a stand-in package is "
            "not patchable). Install it (playbooks/provision.yml, role flashinfer) or set "
            "sglang_experiment_apply_patches: false for a host without FlashInfer.",
        ))
        return out
    site = found.get("site") or ""
    module_file = found.get("module_file")
    if module_file and site and not os.path.abspath(module_file).startswith(os.path.abspath(site) + os.sep):
        out.append(problem(
            "flashinfer", "sglang_launch_env_override", module_file,
            f"the server would import flashinfer from {module_file}, not the installed flashinfer-python {version} "
            f"in {site} that the patches step changes (a stand-in first on PYTHONPATH?). Remove it from the launch's "
            "PYTHONPATH, or set sglang_experiment_apply_patches: false.",
        ))
    for spec in patch_states(catalog, [p for p in wanted_ids or [] if p in catalog]):
        made_for = spec.get("flashinfer_version")
        if made_for != version:
            out.append(problem(
                "flashinfer", "flashinfer_version", version,
                f"patch {spec['id']} is made for flashinfer-python {made_for}, but the ml-env has {version}: "
                f"there are no patch files for {version} in roles/flashinfer/files/patches/{version}/. "
                f"Install flashinfer-python=={made_for} (role flashinfer) or add patches for {version}.",
            ))
            continue
        if spec.get("patch") not in (patch_files_present or []):
            out.append(problem(
                "flashinfer", "patches", spec["id"],
                f"patch {spec['id']}: roles/flashinfer/files/patches/{spec.get('patch')} is missing from the checkout.",
            ))
        target = os.path.join(site, spec.get("file") or "")
        sha = file_sha256(target) if file_sha256 else None
        if sha is None:
            out.append(problem(
                "flashinfer", "patches", spec["id"],
                f"patch {spec['id']} changes {spec.get('file')}, which flashinfer-python {version} in {site} "
                f"does not have ({target}). Reinstall flashinfer-python=={version} (role flashinfer).",
            ))
        elif sha not in (spec.get("original_sha256"), spec.get("patched_sha256")):
            out.append(problem(
                "flashinfer", "patches", spec["id"],
                f"patch {spec['id']} ({spec['state']} wanted): {target} is neither the original nor the patched file "
                f"(sha256 {sha}); the patches step would refuse it after the stop. Reinstall "
                f"flashinfer-python=={version} --force-reinstall --no-deps.",
            ))
    return out


# --------------------------------------------------------------------------- the inputs of the ml-env probe


def hub_ids(launch, tokenizer):
    """The Hub ids whose offline presence the ml-env's huggingface_hub is asked about."""
    ids = []
    for name in (launch.get("model"), tokenizer):
        if name and launch.get("target") != "simulator" and is_hub_id(name) and name not in ids:
            ids.append(name)
    return ids


# The ml-env probe, run as <ml-env python> -c PROBE '<request JSON>' with the launch's environment,
# so that it sees what the server will see (PYTHONPATH included). Prints one JSON line.
PROBE = r"""
import json, sys
req = json.loads(sys.argv[1])
out = {}
if req.get("flashinfer"):
    import importlib.metadata as md, importlib.util, sysconfig
    found = {"site": sysconfig.get_path("purelib"), "version": None, "module_file": None, "error": None}
    try:
        found["version"] = md.version("flashinfer-python")
    except md.PackageNotFoundError as exc:
        found["error"] = "importlib.metadata: no distribution flashinfer-python"
    try:
        spec = importlib.util.find_spec("flashinfer")
        found["module_file"] = spec.origin if spec else None
    except Exception as exc:
        found["error"] = (found["error"] or "") + "; import: %s: %s" % (type(exc).__name__, exc)
    out["flashinfer"] = found
if req.get("hub"):
    try:
        from huggingface_hub import snapshot_download
    except Exception:
        out["hub"] = None
    else:
        out["hub"] = {}
        for item in req["hub"]:
            try:
                path = snapshot_download(repo_id=item["id"], revision=item.get("revision"),
                                         cache_dir=item["cache_dir"], local_files_only=True)
                out["hub"][item["id"]] = {"path": path, "error": None}
            except Exception as exc:
                out["hub"][item["id"]] = {"path": None, "error": "%s: %s" % (type(exc).__name__, str(exc)[:300])}
print(json.dumps(out))
"""


def stop_patterns(enabled, patterns=None):
    """The stop's command-line net as compiled regexes (KILL_PATTERNS when ``patterns`` is None)."""
    if not enabled:
        return []
    return compile_patterns(KILL_PATTERNS if patterns is None else patterns)
