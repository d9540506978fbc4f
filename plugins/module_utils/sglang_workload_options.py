# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload: the resolved benchmark settings, in the ledger's own shape, as one object.

Role sglang_bench resolves it once (data/benchmark.yml, the role's overrides, a campaign
workload: module_utils/sglang_bench_settings.py) and hands it whole to every module that needs
it - sglang_bench, sglang_slo_search, sglang_ledger_append - as their one dict option
``workload`` (WORKLOAD_ARGUMENT_SPEC, documented once in doc fragment sglang_lab_workload,
plugins/doc_fragments/sglang_lab_workload.py; tests/unit/test_module_docs.py checks that both
agree). No module declares a workload field of its own.

WORKLOAD_OPTIONS is the one list of settings: the resolver, the campaign file's ``settings``,
the comparison's workload identity (WORKLOAD_IDENTITY) and the report all read the names from
it. ``workload_problems`` is the one check of the values, wherever the workload enters. A new
setting is one entry here (its type, default and rule), one in the doc fragment, its value in
data/benchmark.yml, and its bench_serving argument in sglang_bench_points.client_settings.

The client options that are not part of the workload (the client's environment, tokenizer,
model name, --output-details, extra arguments) are CLIENT_ARGUMENT_SPEC, shared the same way by
sglang_bench and sglang_slo_search. Standard library only.
"""

import copy
import json
import math

# bench_serving's own datasets this project sends (docs/benchmark.md, "Workload catalogue"):
# random and random-ids (synthetic lengths), sharegpt (a ShareGPT-format corpus's conversations)
# and generated-shared-prefix (groups of prompts behind one shared system prompt each).
DATASETS = ("random", "random-ids", "sharegpt", "generated-shared-prefix")
SHARED_PREFIX = "generated-shared-prefix"
# bench_serving's backend: its native /generate, and for multi-turn conversations (gsp_num_turns > 1)
# the OpenAI chat endpoint, the one backend of bench_serving 0.5.17's MULTI_TURN_BACKENDS that
# talks to SGLang (its wrap_multi_turn_request_func asserts a chat backend).
BACKEND = "sglang"
MULTI_TURN_BACKEND = "sglang-oai-chat"


def backend_for(workload):
    """The bench_serving backend a workload is sent through: MULTI_TURN_BACKEND for a multi-turn one."""
    turns = as_number((workload or {}).get("gsp_num_turns"))
    return MULTI_TURN_BACKEND if turns is not None and turns > 1 else BACKEND
CACHE_STATES = ("cold", "warm")

MEASUREMENT_OPTIONS = dict(
    min_requests=dict(type="int", default=0),
    min_duration_s=dict(type="float", default=0.0),
    max_prompts=dict(type="int", default=20000),
    cache=dict(type="str", choices=list(CACHE_STATES), default="warm"),
    server_metrics=dict(type="bool", default=False),
)

# Goodput (docs/benchmark.md, "Goodput"): the latency limits every request must meet to count, and
# the share of requests the workload expects to meet them. Each limit bounds one request's own value
# as bench_serving measures it (TTFT; TPOT = (latency - TTFT) / (output tokens - 1); end-to-end
# latency). The attainment's default, 0.9, is DistServe's (Zhong et al., OSDI 2024: goodput is the
# rate served with at least 90 % of requests within their SLO); it also sets the sample a share
# needs, as a percentile's: ceil(1 / (1 - attainment)) requests (sglang_point_window.goodput).
SLO_LIMITS = ("ttft_ms", "tpot_ms", "e2e_ms")
DEFAULT_ATTAINMENT = 0.9
SLO_OPTIONS = dict(
    ttft_ms=dict(type="float"),
    tpot_ms=dict(type="float"),
    e2e_ms=dict(type="float"),
    attainment=dict(type="float", default=DEFAULT_ATTAINMENT),
)

# The server's prefix-cache hit rate a point must show (sglang_point_window.cache_hit_band): ``rate``
# a share, or EXPECTED_HIT_RATE for generated-shared-prefix (what bench_serving's construction lets a
# cold point reach at its concurrency), within ``margin``; outside it the point is workload_mismatch.
EXPECTED_HIT_RATE = "expected"
CACHE_TARGET_OPTIONS = dict(
    rate=dict(type="raw", required=True),
    margin=dict(type="float", required=True),
)

# The settings of a workload, the ledger record's ``workload`` keys, each with its type and default.
WORKLOAD_OPTIONS = dict(
    settings_file=dict(type="str"),
    name=dict(type="str"),
    client=dict(type="str", default="sglang.bench_serving"),
    backend=dict(type="str", default="sglang"),
    dataset_name=dict(type="str", default="random"),
    dataset_path=dict(type="str"),
    input_len=dict(type="int", required=True),
    output_len=dict(type="int", required=True),
    random_range_ratio=dict(type="float", default=1.0),
    concurrency=dict(type="list", elements="int"),
    num_prompts=dict(type="dict", options=dict(multiplier=dict(type="int"), floor=dict(type="int"))),
    request_rate=dict(type="str", default="inf"),
    request_rates=dict(type="list", elements="float"),
    burstiness=dict(type="float", default=1.0),
    seed=dict(type="int", default=1),
    repeats=dict(type="int", default=1),
    warmup=dict(type="dict"),
    measurement=dict(type="dict", options=MEASUREMENT_OPTIONS),
    confidence=dict(type="float"),
    extra_request_body=dict(type="dict", default={}),
    gsp_num_groups=dict(type="int"),
    gsp_system_prompt_len=dict(type="int"),
    gsp_num_turns=dict(type="int", default=1),
    goodput_slo=dict(type="dict", options=SLO_OPTIONS),
    cache_hit_target=dict(type="dict", options=CACHE_TARGET_OPTIONS),
)

# The settings that say what a request is: two records are compared only when they agree on
# these (sglang_compare.workload_key). A record made before a setting existed has its default.
WORKLOAD_IDENTITY = (
    "dataset_name",
    "input_len",
    "output_len",
    "random_range_ratio",
    "extra_request_body",
    "gsp_num_groups",
    "gsp_system_prompt_len",
    "gsp_num_turns",
    "request_rate",
    "request_rates",
)

WORKLOAD_ARGUMENT_SPEC = dict(
    workload=dict(type="dict", required=True, options=WORKLOAD_OPTIONS),
)

CLIENT_ARGUMENT_SPEC = dict(
    client_env=dict(type="dict", default={}),
    num_prompts=dict(type="int"),
    tokenizer=dict(type="str"),
    model=dict(type="str"),
    served_model_name=dict(type="str"),
    output_details=dict(type="bool", default=False),
    extra_args=dict(type="list", elements="str", default=[]),
)


def setting_default(name):
    """The default of a workload setting (None when it has none), a copy of its own."""
    return copy.deepcopy(WORKLOAD_OPTIONS[name].get("default"))


def as_number(value):
    """A setting's value as a float (numbers from the command line arrive as strings); None for a bool or
    anything else that is not a number."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _at_least(value, low):
    number = as_number(value)
    return number is not None and number >= low and number == int(number)


def workload_problems(workload, names=None):
    """The one check of a workload's values: a list of (setting, what is wrong) pairs, empty when it
    runs. ``names`` limits the check to those settings (the resolver checks the rest itself, with
    the variable each value came from). Types are the argument spec's business; this checks the
    rules a type cannot say."""
    workload = workload or {}
    names = WORKLOAD_OPTIONS if names is None else names
    problems = []

    def want(name, ok, rule):
        if name in names and name in workload and workload[name] is not None and not ok(workload[name]):
            problems.append((name, rule))

    want("dataset_name", lambda v: v in DATASETS, "must be one of " + ", ".join(DATASETS))
    for name in ("input_len", "output_len", "repeats"):
        want(name, lambda v: _at_least(v, 1), "must be an integer >= 1")
    want(
        "random_range_ratio",
        lambda v: as_number(v) is not None and 0 <= as_number(v) <= 1,
        "must be a number within [0, 1]",
    )
    want(
        "concurrency",
        lambda v: bool(v) and all(_at_least(c, 1) for c in v),
        "must be a non-empty list of integers >= 1",
    )
    want(
        "num_prompts",
        lambda v: all(_at_least(v.get(k), 1) for k in ("multiplier", "floor")),
        "must have a multiplier and a floor, integers >= 1",
    )
    want(
        "request_rate",
        lambda v: str(v).strip().lower() == "inf" or (as_number(v) or 0) > 0,
        "must be inf or a positive number of requests per second",
    )
    want(
        "request_rates",
        lambda v: isinstance(v, list) and bool(v) and all((as_number(r) or 0) > 0 and math.isfinite(as_number(r))
                                                          for r in v),
        "must be a non-empty list of request rates > 0 (requests per second, Poisson arrivals)",
    )
    if "request_rates" in names and workload.get("request_rates"):
        rate = workload.get("request_rate")
        if rate is not None and str(rate).strip().lower() != "inf":
            problems.append(("request_rates", f"is a sweep of rates; request_rate {rate!r} names another: keep one"))
        caps = workload.get("concurrency")
        if isinstance(caps, list) and len(caps) != 1:
            problems.append((
                "request_rates",
                f"sweeps the rate at one concurrency cap, but concurrency lists {len(caps)} values "
                f"({caps}): give one, the most requests in flight at every rate",
            ))
    # bench_serving 0.5.17's only arrival process is Poisson (--request-rate, exponential gaps): it
    # has no --burstiness, so gamma arrivals (burstiness != 1) cannot go through it, and this project
    # builds no traffic generator of its own.
    want(
        "burstiness",
        lambda v: as_number(v) == 1.0,
        "asks for gamma arrivals, which bench_serving of SGLang 0.5.17 cannot send: it has no "
        "--burstiness (a finite request rate is Poisson, inf is all at once); leave burstiness at 1.0",
    )
    want(
        "confidence",
        lambda v: as_number(v) is not None and 0 < as_number(v) < 1,
        "must be a number between 0 and 1 (exclusive), such as 0.95",
    )
    want("extra_request_body", _json_object, "must be a JSON object (bench_serving's --extra-request-body)")
    # bench_serving merges the body over its own /generate payload: a sampling_params of its own
    # replaces the whole block, and with it the output length and ignore_eos the workload asks for.
    want(
        "extra_request_body",
        lambda v: (
            not isinstance(v, dict)
            or not isinstance(v.get("sampling_params"), dict)
            or "max_new_tokens" in v["sampling_params"]
        ),
        "has a sampling_params without max_new_tokens: it would replace bench_serving's whole block "
        "(max_new_tokens = output_len, ignore_eos, temperature 0); give them in it too",
    )
    for name in ("gsp_num_groups", "gsp_system_prompt_len"):
        want(name, lambda v: _at_least(v, 1), "must be an integer >= 1")
    # Multi-turn (bench_serving's --gsp-num-turns): each prompt of generated-shared-prefix becomes a
    # conversation of that many questions behind its group's system prompt, each answer sent back in
    # the next turn. bench_serving 0.5.17 sends such conversations only through a chat backend
    # (MULTI_TURN_BACKENDS; the project's then is MULTI_TURN_BACKEND, /v1/chat/completions).
    want("gsp_num_turns", lambda v: _at_least(v, 1), "must be an integer >= 1")
    turns = workload.get("gsp_num_turns")
    if "gsp_num_turns" in names and _at_least(turns, 2) and workload.get("dataset_name") != SHARED_PREFIX:
        problems.append((
            "gsp_num_turns",
            f"is only read by dataset_name {SHARED_PREFIX} (bench_serving's only multi-turn dataset here), "
            f"not {workload.get('dataset_name')!r}",
        ))
    if "cache_hit_target" in names and workload.get("cache_hit_target") is not None:
        problems += [("cache_hit_target", rule) for rule in cache_target_problems(workload)]
    if "goodput_slo" in names and workload.get("goodput_slo") is not None:
        problems += [("goodput_slo", rule) for rule in slo_problems(workload["goodput_slo"])]
    # generated-shared-prefix: num_groups groups, each of its own system prompt of
    # gsp_system_prompt_len tokens before every question (input_len tokens); bench_serving sends
    # num_groups x prompts per group requests, whatever --num-prompts says.
    for name in ("gsp_num_groups", "gsp_system_prompt_len"):
        if name not in names:
            continue
        if workload.get("dataset_name") == SHARED_PREFIX:
            if workload.get(name) is None:
                problems.append((name, f"must be set for dataset_name {SHARED_PREFIX} (an integer >= 1)"))
        elif workload.get(name) is not None:
            dataset = workload.get("dataset_name")
            problems.append((name, f"is only read by dataset_name {SHARED_PREFIX}, not {dataset!r}"))
    return problems


def _block_problems(block, known, shape, keys):
    """A workload block that is not a mapping, or has keys not in ``known``: the sentences that say so."""
    if not isinstance(block, dict):
        return [f"must be a mapping {shape}, got {block!r}"]
    unknown = sorted(set(block) - set(known))
    return [f"has unknown key(s) {', '.join(map(str, unknown))}; the keys are {keys}"] if unknown else []


def cache_target_problems(workload):
    """What is wrong with a workload's ``cache_hit_target`` (sentences, empty when usable): ``rate`` a
    share within [0, 1] or EXPECTED_HIT_RATE (generated-shared-prefix of one turn only: the band is
    computed from its construction), ``margin`` a share within [0, 1), and the server's counters read."""
    target = workload.get("cache_hit_target")
    problems = _block_problems(target, CACHE_TARGET_OPTIONS, "{rate, margin}", "rate and margin")
    if not isinstance(target, dict):
        return problems
    rate = target.get("rate")
    expected = str(rate).strip().lower() == EXPECTED_HIT_RATE
    if expected:
        turns = as_number(workload.get("gsp_num_turns")) or 1
        if workload.get("dataset_name") != SHARED_PREFIX or turns > 1:
            problems.append(
                f"rate {EXPECTED_HIT_RATE!r} is computed for {SHARED_PREFIX} of one turn only; give this "
                "workload a number (the share of prompt tokens the server should find cached)"
            )
    elif as_number(rate) is None or not 0 <= as_number(rate) <= 1:
        problems.append(f"rate = {rate!r}: must be a share within [0, 1] or {EXPECTED_HIT_RATE!r}")
    margin = as_number(target.get("margin"))
    if margin is None or not 0 <= margin < 1:
        problems.append(f"margin = {target.get('margin')!r}: must be a share within [0, 1), such as 0.1")
    measurement = workload.get("measurement")
    if expected and isinstance(measurement, dict) and measurement.get("cache") == "warm":
        problems.append(f"rate {EXPECTED_HIT_RATE!r} is what a point from a flushed cache can reach: set "
                        "measurement.cache cold (sglang_bench_cache)")
    if isinstance(measurement, dict) and measurement.get("server_metrics") is False:
        problems.append(
            "needs the server's own counters: set measurement.server_metrics true (sglang_bench_server_metrics)"
        )
    return problems


def slo_problems(slo):
    """What is wrong with a workload's ``goodput_slo`` block (a list of sentences, empty when it is usable): a
    mapping of at least one limit of SLO_LIMITS, each a number of ms > 0, and an ``attainment``
    within (0, 1)."""
    problems = _block_problems(slo, SLO_OPTIONS, f"of limits ({', '.join(SLO_LIMITS)}) and attainment",
                               ", ".join(SLO_OPTIONS))
    if not isinstance(slo, dict):
        return problems
    limits = [name for name in SLO_LIMITS if slo.get(name) is not None]
    if not limits:
        problems.append(f"states no limit: give at least one of {', '.join(SLO_LIMITS)} (ms)")
    for name in limits:
        value = as_number(slo[name])
        if value is None or not math.isfinite(value) or value <= 0:
            problems.append(f"{name} = {slo[name]!r}: must be a number of milliseconds > 0")
    attainment = slo.get("attainment")
    if attainment is not None:
        value = as_number(attainment)
        if value is None or not 0 < value < 1:
            problems.append(f"attainment = {attainment!r}: must be a share between 0 and 1 (exclusive), such as 0.9")
    return problems


def _json_object(value):
    """A dict with string keys that JSON can write (bench_serving reads the body with json.loads)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        return False
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def identity_value(name, value):
    """A workload setting's value as it takes part in the comparison's identity (hashable)."""
    if value is None:
        value = setting_default(name)
    if name == "request_rate" and as_number(value) is not None:  # "8" and "8.0" are one rate
        value = "inf" if math.isinf(as_number(value)) else repr(float(as_number(value)))
    if name == "request_rates" and isinstance(value, list):
        value = [float(as_number(r)) if as_number(r) is not None else r for r in value]
    kind = WORKLOAD_OPTIONS[name].get("type")
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def extra_identity(workload):
    """The identity settings beyond the first four whose value is not their default, as sorted
    (name, value) pairs: empty for every record made before such a setting existed."""
    workload = workload or {}
    found = []
    for name in WORKLOAD_IDENTITY[4:]:
        value = identity_value(name, workload.get(name))
        if value != identity_value(name, setting_default(name)):
            found.append((name, value))
    return tuple(found)
