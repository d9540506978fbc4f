# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The output-quality check: greedy outputs of a fixed prompt set, compared with the baseline's.

A speed-up that changes the answers is not a speed-up (issue 25, docs/quality.md). After the
benchmark, on the same server and in the same task (module sglang_bench's ``quality``
option, ``quality_block``), the prompts of data/quality.yml go to SGLang's native
``/generate``, greedily (temperature 0, a fixed ``max_new_tokens``, ``return_logprob``), one
request at a time and once more in batches of ``batch_size`` texts per request; the block keeps
each output's token ids and the log-probabilities
of the chosen tokens. SGLang returns them as ``meta_info.output_token_logprobs``, one
``[logprob, token_id, text or None]`` per output token (TokenizerManager
detokenize_logprob_tokens; the text only with ``return_text_in_logprobs``).

The record keeps that block as ``quality`` (module sglang_ledger_append); ``compare`` holds one
set of outputs against another, and ``quality_comparison`` a record against the host's latest
baseline record for the same prompt set, with the A/A floor from the two latest baselines. The
verdict is one of ``outputs unchanged``, ``outputs changed (agreement 62 % vs A/A 100 %)`` or
``no baseline outputs`` (and ``quality check off`` / ``quality check failed (...)``).
``campaign_quality`` judges a campaign's arms on one host: each arm's agreement with the baseline
arm, the A/A floor from the campaign's own A/A arm, and the campaign file's rule, which makes a
tier ``quality_regressed`` (docs/quality.md "In a campaign").

Pure functions, standard library only (the collection runs on the target host); the one side
effect, the HTTP POST, is ``post_json``, which tests replace.
"""

import hashlib
import json
import math
import time
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_OFF = "off"

VERDICT_UNCHANGED = "outputs unchanged"
VERDICT_CHANGED = "outputs changed"
VERDICT_NO_BASELINE = "no baseline outputs"
VERDICT_OFF = "quality check off"
VERDICT_FAILED = "quality check failed"
# What the table and the report add to a verdict whose agreement is below the A/A floor.
BELOW_FLOOR = " - below the A/A floor"

BODY_LIMIT = 2000
TOP_KEYS = ("name", "version", "enabled", "sampling", "batch_size", "timeout_s", "prompts")
SAMPLING_KEYS = ("temperature", "max_new_tokens", "ignore_eos")


class QualityRequestError(Exception):
    """A /generate request of the quality check failed (HTTP status, connection, bad answer)."""


# --- the prompt set (data/quality.yml) ----------------------------------------------------


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_prompt_set(data):
    """The problems of a prompt set (data/quality.yml's schema); an empty list when it is valid."""
    if not isinstance(data, dict):
        return [f"the prompt set must be a mapping, got {type(data).__name__}"]
    problems = []
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(TOP_KEYS)}")
    if not isinstance(data.get("name"), str) or not data.get("name"):
        problems.append("name must be a non-empty string")
    if not _is_int(data.get("version")) or data.get("version") < 1:
        problems.append(f"version must be an integer >= 1, got {data.get('version')!r}")
    if not isinstance(data.get("enabled"), bool):
        problems.append(f"enabled must be true or false, got {data.get('enabled')!r}")
    sampling = data.get("sampling")
    if not isinstance(sampling, dict):
        problems.append("sampling must be a mapping with temperature, max_new_tokens and ignore_eos")
    else:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            problems.append(f"sampling has unknown key(s) {', '.join(unknown)}; known: {', '.join(SAMPLING_KEYS)}")
        if sampling.get("temperature") != 0 or isinstance(sampling.get("temperature"), bool):
            problems.append(f"sampling.temperature must be 0 (greedy), got {sampling.get('temperature')!r}")
        if not _is_int(sampling.get("max_new_tokens")) or sampling.get("max_new_tokens") < 1:
            problems.append(f"sampling.max_new_tokens must be an integer >= 1, got {sampling.get('max_new_tokens')!r}")
        if not isinstance(sampling.get("ignore_eos"), bool):
            problems.append(f"sampling.ignore_eos must be true or false, got {sampling.get('ignore_eos')!r}")
    for key in ("batch_size", "timeout_s"):
        if not _is_int(data.get(key)) or data.get(key) < 1:
            problems.append(f"{key} must be an integer >= 1, got {data.get(key)!r}")
    prompts = data.get("prompts")
    if not isinstance(prompts, list) or not prompts:
        problems.append("prompts must be a non-empty list of {id, text}")
        return problems
    seen = set()
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, dict) or set(prompt) != {"id", "text"}:
            problems.append(f"prompts[{index}] must have exactly the keys id and text")
            continue
        if not isinstance(prompt["id"], str) or not prompt["id"]:
            problems.append(f"prompts[{index}].id must be a non-empty string")
        elif prompt["id"] in seen:
            problems.append(f"prompts[{index}].id {prompt['id']!r} is used twice")
        seen.add(prompt["id"])
        if not isinstance(prompt["text"], str) or not prompt["text"].strip():
            problems.append(f"prompts[{index}].text must be a non-empty string")
    return problems


def resolve_settings(data, enabled=None, source="data/quality.yml"):
    """The prompt set with ``enabled`` overridden (None: the file's), checked; a ValueError names
    every problem and the file."""
    problems = check_prompt_set(data)
    if enabled is not None and not isinstance(enabled, bool):
        problems.append(f"sglang_bench_quality_enabled must be true, false or null, got {enabled!r}")
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    resolved = dict(data)
    if enabled is not None:
        resolved["enabled"] = enabled
    return resolved


def prompt_set_identity(data):
    """What a comparison must share: the set's name, version, size and the sha256 of its prompts
    and sampling (the batch size and timeout are left out: they change no greedy output by design;
    the batch pass measures whether they do)."""
    basis = json.dumps({"prompts": data["prompts"], "sampling": data["sampling"]}, sort_keys=True)
    return {
        "name": data["name"],
        "version": data["version"],
        "sha256": hashlib.sha256(basis.encode("utf-8")).hexdigest(),
        "prompts": len(data["prompts"]),
    }


# --- collection ----------------------------------------------------------------------------


def generate_payload(texts, sampling):
    """The /generate body: one text (a string) or a batch (a list), greedy, with logprobs."""
    return {
        "text": texts,
        "sampling_params": {
            "temperature": sampling["temperature"],
            "max_new_tokens": sampling["max_new_tokens"],
            "ignore_eos": sampling["ignore_eos"],
        },
        "return_logprob": True,
    }


def parse_answer(answer):
    """One /generate answer -> ``{"token_ids", "logprobs", "text", "finish_reason"}``.

    The token ids and logprobs come from ``meta_info.output_token_logprobs``; without it (a
    server that returns no logprobs) from ``output_ids``, with ``logprobs`` None. A ValueError
    says what the answer lacked."""
    if not isinstance(answer, dict):
        raise ValueError(f"an answer must be a JSON object, got {type(answer).__name__}")
    meta = answer.get("meta_info")
    if not isinstance(meta, dict):
        raise ValueError("the answer has no meta_info")
    entries = meta.get("output_token_logprobs")
    if isinstance(entries, list) and entries:
        ids, logprobs = [], []
        for entry in entries:
            if not isinstance(entry, (list, tuple)) or len(entry) < 2 or not _is_int(entry[1]):
                raise ValueError(f"output_token_logprobs item {entry!r} is not [logprob, token_id, text]")
            ids.append(entry[1])
            value = entry[0]
            logprobs.append(float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None)
    elif isinstance(answer.get("output_ids"), list):
        ids, logprobs = [int(i) for i in answer["output_ids"]], None
    else:
        raise ValueError("the answer has neither meta_info.output_token_logprobs nor output_ids")
    finish = meta.get("finish_reason")
    return {
        "token_ids": ids,
        "logprobs": logprobs,
        "text": answer.get("text") if isinstance(answer.get("text"), str) else None,
        "finish_reason": finish.get("type") if isinstance(finish, dict) else finish,
    }


def post_json(url, payload, timeout):
    """POST ``payload``; the parsed JSON answer, or QualityRequestError with status and body."""
    request = Request(url, data=json.dumps(payload).encode("utf-8"), headers={"Content-Type": "application/json"})
    try:
        response = urlopen(request, timeout=timeout)
        body = response.read().decode("utf-8", errors="replace")
    except HTTPError as exc:
        body = exc.read().decode("utf-8", errors="replace") if hasattr(exc, "read") else ""
        raise QualityRequestError(f"HTTP {exc.code} from {url}: {body[:BODY_LIMIT]}") from None
    except (URLError, OSError, ValueError) as exc:
        raise QualityRequestError(f"no answer from {url}: {exc}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise QualityRequestError(f"{url} answered with a body that is not JSON: {body[:BODY_LIMIT]}") from None


def flush_cache(url, timeout_s=30.0, clock=time.monotonic, sleep=time.sleep):
    """POST SGLang's ``/flush_cache`` (``url``) until it answers 200; SGLang refuses (400) while
    requests run, so this also waits for the server to be idle. ``{"ok", "status", "attempts",
    "seconds"}``; never raises (a server without the endpoint gives ok false and its status)."""
    began, attempts, status = clock(), 0, None
    while True:
        attempts += 1
        try:
            status = urlopen(Request(url, data=b"", method="POST"), timeout=10).status
        except HTTPError as exc:
            status = exc.code
        except (URLError, OSError, ValueError):
            status = None
        if status == 200 or clock() - began > timeout_s:
            break
        sleep(0.2)
    return {"ok": status == 200, "status": status, "attempts": attempts, "seconds": round(clock() - began, 3)}


def _outputs(prompts, answers):
    outputs = []
    for prompt, answer in zip(prompts, answers, strict=True):
        try:
            parsed = parse_answer(answer)
        except ValueError as exc:
            raise QualityRequestError(f"prompt {prompt['id']}: {exc}") from None
        outputs.append({"id": prompt["id"], **parsed})
    return outputs


def collect(url, data, sender=post_json, clock=time.monotonic, flush=None):
    """Send the prompt set (side effect through ``sender``); the record's ``quality`` block.

    First one request per prompt, one at a time (``single``); then the prompts again, up to
    ``batch_size`` texts per request (``batch``), which SGLang schedules together. Each pass starts
    from a flushed prefix cache when ``flush`` (a callable, e.g. ``flush_cache`` bound to the
    server's ``/flush_cache``) is given: on real SGLang 0.5.17 greedy outputs of the same launch
    differed (93.5 % token agreement) after a benchmark that left other prompts in the radix cache,
    while four starts measured from the same cache state agreed 100 % (docs/quality.md). Returns
    ``{"status", "prompt_set", "sampling", "batch_size", "url", "seconds", "outputs": {"single",
    "batch"}, "batch_vs_single", "cache_flush", "error"}``; a failed request gives status
    ``failed``, the outputs collected before it and the error, never an exception."""
    prompts = data["prompts"]
    block = {
        "status": STATUS_OK,
        "prompt_set": prompt_set_identity(data),
        "sampling": dict(data["sampling"]),
        "batch_size": data["batch_size"],
        "url": url,
        "seconds": {"single": None, "batch": None},
        "outputs": {"single": [], "batch": []},
        "batch_vs_single": None,
        "error": None,
    }
    if flush is not None:
        block["cache_flush"] = {}
    timeout = data["timeout_s"]
    try:
        if flush is not None:
            block["cache_flush"]["single"] = flush()
        start = clock()
        answers = [sender(url, generate_payload(p["text"], data["sampling"]), timeout) for p in prompts]
        block["outputs"]["single"] = _outputs(prompts, answers)
        block["seconds"]["single"] = round(clock() - start, 3)
        if flush is not None:
            block["cache_flush"]["batch"] = flush()
        start = clock()
        batch = []
        for first in range(0, len(prompts), data["batch_size"]):
            chunk = prompts[first:first + data["batch_size"]]
            answer = sender(url, generate_payload([p["text"] for p in chunk], data["sampling"]), timeout)
            if not isinstance(answer, list) or len(answer) != len(chunk):
                raise QualityRequestError(
                    f"a batch of {len(chunk)} texts was answered with "
                    f"{len(answer) if isinstance(answer, list) else 'no list of'} answers"
                )
            batch.extend(_outputs(chunk, answer))
        block["outputs"]["batch"] = batch
        block["seconds"]["batch"] = round(clock() - start, 3)
    except QualityRequestError as exc:
        block["status"] = STATUS_FAILED
        block["error"] = str(exc)
        return block
    block["batch_vs_single"] = compare(block["outputs"]["batch"], block["outputs"]["single"])
    return block


def quality_block(address, port, data, check_mode=False, sender=post_json):
    """The record's ``quality`` block for the server at ``address``:``port``: ``collect`` over the
    prompt set ``data`` (a valid one: ``check_prompt_set`` found no problem), each pass from a
    flushed prefix cache. With ``enabled`` false, or in check mode, nothing is sent and the block
    says ``off`` with the reason."""
    base = f"http://{address}:{port}"
    if not data["enabled"] or check_mode:
        return {
            "status": STATUS_OFF, "prompt_set": prompt_set_identity(data), "url": base + "/generate", "error": None,
            "reason": "check mode: nothing sent" if check_mode else "off for this run (enabled: false)",
        }
    return collect(base + "/generate", data, sender=sender, flush=lambda: flush_cache(base + "/flush_cache"))


# --- comparison -----------------------------------------------------------------------------


def _first_divergence(ids, baseline_ids):
    """The first position where the two differ (None when they are identical)."""
    for position, (a, b) in enumerate(zip(ids, baseline_ids, strict=False)):
        if a != b:
            return position
    if len(ids) != len(baseline_ids):
        return min(len(ids), len(baseline_ids))
    return None


def compare(outputs, baseline_outputs):
    """Hold ``outputs`` against ``baseline_outputs`` (lists of ``{"id", "token_ids", "logprobs"}``).

    Prompts are matched by id. Returns ``{"prompts" (matched), "identical", "identical_share",
    "token_agreement" (positions with the same token over the positions of the longer output,
    summed over prompts), "tokens_compared", "diverged", "mean_first_divergence" (over the prompts
    that diverge; None when none does), "mean_abs_logprob_diff" and "max_abs_logprob_diff" (over
    the agreeing prefix of every prompt, where both sides have a logprob; None without any),
    "logprob_pairs", "unmatched" (ids on one side only)}``."""
    base = {o["id"]: o for o in baseline_outputs or []}
    ours = {o["id"] for o in outputs or []}
    unmatched = sorted((ours - set(base)) | (set(base) - ours))
    prompts = identical = compared = agreeing = 0
    divergences, diffs = [], []
    for output in outputs or []:
        other = base.get(output["id"])
        if other is None:
            continue
        prompts += 1
        ids, other_ids = list(output.get("token_ids") or []), list(other.get("token_ids") or [])
        compared += max(len(ids), len(other_ids))
        agreeing += sum(1 for a, b in zip(ids, other_ids, strict=False) if a == b)
        divergence = _first_divergence(ids, other_ids)
        if divergence is None:
            identical += 1
            prefix = len(ids)
        else:
            divergences.append(divergence)
            prefix = divergence
        ours_lp, theirs_lp = output.get("logprobs") or [], other.get("logprobs") or []
        for a, b in zip(ours_lp[:prefix], theirs_lp[:prefix], strict=False):
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                diffs.append(abs(float(a) - float(b)))
    return {
        "prompts": prompts,
        "identical": identical,
        "identical_share": identical / prompts if prompts else None,
        "token_agreement": agreeing / compared if compared else None,
        "tokens_compared": compared,
        "diverged": len(divergences),
        "mean_first_divergence": sum(divergences) / len(divergences) if divergences else None,
        "mean_abs_logprob_diff": sum(diffs) / len(diffs) if diffs else None,
        "max_abs_logprob_diff": max(diffs) if diffs else None,
        "logprob_pairs": len(diffs),
        "unmatched": unmatched,
    }


def unchanged(comparison):
    """Every prompt matched and identical token for token."""
    prompts = comparison["prompts"]
    return bool(prompts) and comparison["identical"] == prompts and not comparison["unmatched"]


def percent(share):
    """``62 %``; one decimal where rounding would show 100 % or 0 % for a share that is neither."""
    text = f"{share * 100:.0f}"
    if (text == "100" and share < 1) or (text == "0" and share > 0):
        text = f"{share * 100:.1f}"
    return text + " %"


def verdict(comparison, floor):
    """The verdict words for a comparison with the baseline and the A/A floor's token agreement."""
    if comparison is None:
        return VERDICT_NO_BASELINE
    if unchanged(comparison):
        return VERDICT_UNCHANGED
    agreement = comparison["token_agreement"]
    ours = percent(agreement) if agreement is not None else "n/a"
    theirs = f"A/A {percent(floor)}" if floor is not None else "no A/A yet: run the baseline twice"
    return f"{VERDICT_CHANGED} (agreement {ours} vs {theirs})"


def _model(record):
    model = record.get("model") or {}
    if isinstance(model, dict):
        return model.get("model_path") or model.get("served_model_name")
    return model


def quality_key(record):
    """What two records must share for their outputs to be compared: host, target kind, model and
    the prompt set's sha256 (its prompts and sampling)."""
    quality = record.get("quality") or {}
    return (
        record.get("host"),
        bool(record.get("target_is_simulator")),
        _model(record),
        (quality.get("prompt_set") or {}).get("sha256"),
    )


def _has_outputs(record):
    quality = record.get("quality") or {}
    return quality.get("status") == STATUS_OK and bool((quality.get("outputs") or {}).get("single"))


def quality_comparison(record, records, baseline_tier="baseline"):
    """The record's outputs against the latest earlier successful ``baseline_tier`` record of the
    same quality key, with the A/A floor (the two latest such baselines, the record itself when it
    is one, held against each other).

    Returns ``{"status", "verdict", "below_floor", "prompt_set", "baseline_record_id",
    "single", "batch", "aa": {"record_ids", "token_agreement", "identical_share"} or None,
    "batch_vs_single", "seconds", "error"}``; ``single`` and ``batch`` are ``compare`` results
    (the batch pass against the baseline's batch pass)."""
    quality = record.get("quality") or {}
    result = {
        "status": quality.get("status") or STATUS_OFF,
        "verdict": None,
        "below_floor": None,
        "prompt_set": quality.get("prompt_set"),
        "baseline_record_id": None,
        "single": None,
        "batch": None,
        "aa": None,
        "batch_vs_single": quality.get("batch_vs_single"),
        "seconds": quality.get("seconds"),
        "error": quality.get("error"),
    }
    if result["status"] == STATUS_OFF:
        result["verdict"] = VERDICT_OFF
        return result
    if result["status"] != STATUS_OK:
        result["verdict"] = f"{VERDICT_FAILED} ({quality.get('error') or 'no outputs'})"
        return result
    position = len(records)
    for index, candidate in enumerate(records):
        if record.get("record_id") and candidate.get("record_id") == record.get("record_id"):
            position = index
            break
    key = quality_key(record)
    baselines = [
        r for r in records[:position]
        if r.get("tier") == baseline_tier and r.get("status") == "success" and _has_outputs(r)
        and quality_key(r) == key and r.get("record_id") != record.get("record_id")
    ]
    chain = baselines + ([record] if record.get("tier") == baseline_tier else [])
    if len(chain) >= 2:
        aa = compare(chain[-1]["quality"]["outputs"]["single"], chain[-2]["quality"]["outputs"]["single"])
        result["aa"] = {
            "record_ids": [chain[-2].get("record_id"), chain[-1].get("record_id")],
            "token_agreement": aa["token_agreement"],
            "identical_share": aa["identical_share"],
        }
    if not baselines:
        result["verdict"] = VERDICT_NO_BASELINE
        return result
    base = baselines[-1]
    result["baseline_record_id"] = base.get("record_id")
    outputs, base_outputs = quality["outputs"], base["quality"]["outputs"]
    result["single"] = compare(outputs["single"], base_outputs["single"])
    if outputs.get("batch") and base_outputs.get("batch"):
        result["batch"] = compare(outputs["batch"], base_outputs["batch"])
    floor = result["aa"]["token_agreement"] if result["aa"] else None
    result["verdict"] = verdict(result["single"], floor)
    agreement = result["single"]["token_agreement"]
    result["below_floor"] = (agreement < floor) if floor is not None and agreement is not None else None
    return result


def quality_lines(comparison):
    """The comparison table's quality lines (empty without a comparison)."""
    if not comparison:
        return []
    prompt_set = comparison.get("prompt_set") or {}
    head = f"quality ({prompt_set.get('name', 'greedy outputs')}, {prompt_set.get('prompts', '?')} prompts, greedy): "
    lines = [head + comparison["verdict"] + (BELOW_FLOOR if comparison.get("below_floor") else "")]
    single = comparison.get("single")
    if single:
        parts = [f"identical {single['identical']}/{single['prompts']}"]
        if single["token_agreement"] is not None:
            parts.append(f"token agreement {percent(single['token_agreement'])}")
        if single["mean_first_divergence"] is not None:
            parts.append(f"first divergence at token {single['mean_first_divergence']:.1f} (mean)")
        if single["mean_abs_logprob_diff"] is not None:
            parts.append(f"mean |logprob diff| {single['mean_abs_logprob_diff']:.4f} over the agreeing prefix")
        lines.append("  vs baseline record " + str(comparison["baseline_record_id"]) + ": " + ", ".join(parts))
    batch = comparison.get("batch_vs_single")
    if batch:
        lines.append(
            f"  batch pass vs one at a time (this record): identical {batch['identical']}/{batch['prompts']}"
            + (f", token agreement {percent(batch['token_agreement'])}" if batch["token_agreement"] is not None else "")
        )
    return lines


# --- the campaign's quality verdict and rule (docs/quality.md "In a campaign") --------------

QUALITY_REGRESSED = "quality_regressed"
NO_AA_FLOOR = "no A/A floor"
NO_QUALITY = "no quality check"
NO_SUCCESS = "no successful cell"
# The campaign file's rule (data/campaigns/schema.json, campaign key ``quality.rule``).
RULE_MARGIN = "aa_floor_margin"


def _agreements(records, baselines):
    """``compare`` of every (record, baseline record) pair that shares a quality key."""
    out = []
    for record in records:
        for base in baselines:
            if base is record or quality_key(base) != quality_key(record):
                continue
            out.append(compare(record["quality"]["outputs"]["single"], base["quality"]["outputs"]["single"]))
    return out


def campaign_quality(arms, baseline_arm, aa_arms=(), rule=None):
    """One host's output quality per campaign arm, with the campaign's rule.

    ``arms``: ``{arm: [record, ...]}``, the successful records of each arm on one host, pooled over
    every workload: each pass starts from a flushed prefix cache, so the benchmark before it should
    not move the outputs (without the flush, on the H100 recording, it did: docs/quality.md); an
    empty list says ``no successful cell``; ``baseline_arm`` names
    the baseline's, ``aa_arms`` the A/A arms' (the baseline tier again, as its own arm);
    ``rule``: the campaign file's ``quality.rule`` (``{"aa_floor_margin": m}``) or None.

    Every record with outputs is held against every baseline-arm record with outputs of the same
    quality key (``compare`` on the single pass). An arm's ``token_agreement`` is the mean over its
    pairs; the **A/A floor** is the lowest agreement of an A/A arm's pairs: the least the baseline
    agreed with itself in this campaign (None when no A/A arm has outputs: ``no A/A floor``, never
    another number). With a rule, a tier arm whose agreement is below ``floor - aa_floor_margin``
    is ``regressed`` (``quality_regressed``); without a floor the rule cannot decide
    (``regressed`` None). A tier whose outputs differ between runs as much as the baseline's own
    never falls below the floor at margin 0: its mean is at least the A/A arm's lowest.

    Returns ``{"rule", "floor": {"token_agreement", "pairs", "arms"} or None, "arms": {arm:
    {"records", "with_outputs", "off", "failed", "errors", "pairs", "token_agreement",
    "min_token_agreement", "identical_share", "regressed", "verdict"}}}``.
    """
    margin = (rule or {}).get(RULE_MARGIN)

    def ok(records):
        return [r for r in records if _has_outputs(r)]

    baselines = ok(arms.get(baseline_arm) or [])
    floor_pairs = [c for a in aa_arms for c in _agreements(ok(arms.get(a) or []), baselines)
                   if c["token_agreement"] is not None]
    floor = (
        {"token_agreement": min(c["token_agreement"] for c in floor_pairs), "pairs": len(floor_pairs),
         "arms": sorted(a for a in aa_arms if ok(arms.get(a) or []))}
        if floor_pairs else None
    )
    result = {"rule": dict(rule) if rule else None, "floor": floor, "arms": {}}
    for name, records in arms.items():
        blocks = [r.get("quality") for r in records if isinstance(r.get("quality"), dict)]
        mine = ok(records)
        pairs = [c for c in _agreements(mine, baselines) if c["token_agreement"] is not None]
        entry = {
            "records": len(records),
            "with_outputs": len(mine),
            "off": sum(1 for b in blocks if b.get("status") == STATUS_OFF),
            "failed": sum(1 for b in blocks if b.get("status") == STATUS_FAILED),
            "errors": sorted({str(b.get("error")) for b in blocks if b.get("status") == STATUS_FAILED}),
            "pairs": len(pairs),
            "token_agreement": sum(c["token_agreement"] for c in pairs) / len(pairs) if pairs else None,
            "min_token_agreement": min(c["token_agreement"] for c in pairs) if pairs else None,
            "identical_share": (sum(c["identical"] for c in pairs) / sum(c["prompts"] for c in pairs)
                                if pairs and sum(c["prompts"] for c in pairs) else None),
            "regressed": None,
            "verdict": None,
        }
        role_baseline, role_aa = name == baseline_arm, name in aa_arms
        if not records:
            entry["verdict"] = NO_SUCCESS
        elif not blocks:
            entry["verdict"] = NO_QUALITY
        elif not mine:
            entry["verdict"] = (VERDICT_OFF if entry["off"] == len(blocks) and not entry["failed"]
                                else f"{VERDICT_FAILED} ({'; '.join(entry['errors']) or 'no outputs'})")
        elif role_baseline:
            entry["verdict"] = f"reference ({len(mine)} record(s) with outputs)"
        elif not pairs:
            entry["verdict"] = VERDICT_NO_BASELINE
        else:
            same = all(unchanged(c) for c in pairs)
            if role_aa:
                entry["verdict"] = (VERDICT_UNCHANGED if same else
                                    f"{VERDICT_CHANGED} (agreement {percent(entry['token_agreement'])})")
                entry["verdict"] += f": A/A floor {percent(floor['token_agreement'])}" if floor else ""
            else:
                against = f"A/A {percent(floor['token_agreement'])}" if floor else NO_AA_FLOOR
                entry["verdict"] = (VERDICT_UNCHANGED if same else
                                    f"{VERDICT_CHANGED} (agreement {percent(entry['token_agreement'])} vs {against})")
                if margin is not None and floor is not None:
                    entry["regressed"] = entry["token_agreement"] < floor["token_agreement"] - margin
                    if entry["regressed"]:
                        entry["verdict"] = (
                            f"{QUALITY_REGRESSED} (agreement {percent(entry['token_agreement'])} < A/A floor "
                            f"{percent(floor['token_agreement'])} - margin {percent(margin)})"
                        )
                elif margin is not None:
                    entry["verdict"] += f"; rule not applied: {NO_AA_FLOOR}"
        result["arms"][name] = entry
    return result
