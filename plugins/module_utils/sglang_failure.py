# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What failed in an experiment run, decided in one place.

Used by module sglang_ledger_append (the record step) and, through the
sglang_experiment filters, by role sglang_experiment. Standard library only:
this code runs on the target host too.

Where a run failed is known from the failed task itself: every step of role
sglang_experiment is included with the tag ``sglang_experiment_<step>``
(``apply: tags``), and Ansible keeps a task's inherited tags in
``ansible_failed_task``. Nothing has to narrate its own step.
"""

import re

# The experiment's steps, in cycle order (docs/experiment.md).
STEPS = ("stop", "patches", "start", "wait_ready", "warmup", "benchmark", "record")
STEP_TAG_PREFIX = "sglang_experiment_"
# Steps after which a server that no longer answers is looked at with the
# crash catalog (its death, not the client's error, is then the failure).
MEASURE_STEPS = ("warmup", "benchmark")
# How much of a crash excerpt and of a task message a record keeps.
EXCERPT_CHARS = 4000
MESSAGE_CHARS = 2000

# What a client's error text says went wrong on the wire, first match wins: the
# warm-up's urllib errors, bench_serving's aiohttp errors, a module's own message.
CLIENT_ERRORS = (
    ("refused", re.compile(r"Connection refused|Errno 111\b|ECONNREFUSED|Cannot connect to host", re.I)),
    ("timeout", re.compile(r"timed out|timeout|deadline", re.I)),
    (
        "connection_lost",
        re.compile(r"Connection reset|Connection aborted|RemoteDisconnected|Server disconnected|Broken pipe", re.I),
    ),
)
# The class of each client error, per measuring step. A warm-up answered with an
# HTTP error status stays warmup_failed (status and body kept); one answered 200
# with a body that is not JSON is warmup_bad_answer. A benchmark that failed
# without a point of its own falls back to <step>_failed for anything else.
CLIENT_CLASSES = {
    "warmup": {
        "refused": "warmup_refused",
        "timeout": "warmup_timeout",
        "connection_lost": "warmup_connection_lost",
        "bad_answer": "warmup_bad_answer",
        "http_status": "warmup_failed",
    },
    "benchmark": {
        "refused": "server_unreachable",
        "timeout": "bench_timeout",
        "connection_lost": "server_unreachable",
    },
}


def failed_step(task):
    """The step a failed task belongs to, from its ``sglang_experiment_<step>`` tag.

    ``task`` is ``ansible_failed_task`` (a dict with ``tags``) or a list of tags.
    A task that carries several step tags (a step included inside another)
    belongs to the later step in cycle order. None when the task is not part
    of an experiment step.
    """
    tags = task.get("tags") if isinstance(task, dict) else task
    found = {str(tag)[len(STEP_TAG_PREFIX) :] for tag in tags or [] if str(tag).startswith(STEP_TAG_PREFIX)}
    for step in reversed(STEPS):
        if step in found:
            return step
    return None


# The environment variable the interrupt callback sets in ansible-playbook when a run is
# interrupted (plugins/callback/sglang_interrupt.py); the rescue reads it.
INTERRUPTED_ENV = "SGLANG_LAB_INTERRUPTED"
INTERRUPTED_CLASS = "interrupted"


def interrupted_result(result, signal_name):
    """The failed result of a task that an interrupt ended, as the record must read it.

    ``signal_name`` is the callback's SGLANG_LAB_INTERRUPTED (empty: not interrupted, the result
    is returned as it is). A module that handled the signal itself (sglang_bench: the points that
    completed) already says ``failure_class: interrupted``; any other task (a module killed by the
    signal, a traceback) gets that class here, its own message kept."""
    result = dict(result or {})
    if not signal_name or result.get("failure_class") == INTERRUPTED_CLASS:
        return result
    own = _truncate(result.get("msg"), MESSAGE_CHARS) if result.get("msg") else "no message"
    result["failure_class"] = INTERRUPTED_CLASS
    result["msg"] = f"interrupted by {signal_name} (the task said: {own})"
    return result


def _truncate(text, limit):
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _point_failure(points):
    for point in points or []:
        if point.get("status") == "failed" and point.get("failure"):
            derived = {k: v for k, v in point["failure"].items() if k != "output_tail"}
            derived.setdefault("step", "benchmark")
            derived["concurrency"] = point.get("concurrency")
            derived["repeat"] = point.get("repeat")
            return derived
    return None


def client_error(status=None, text=None):
    """What a client saw: ``http_status`` (an HTTP error status), ``bad_answer`` (HTTP 200
    with a body that is not an answer), ``refused``, ``timeout``, ``connection_lost``, or
    None when ``text`` names none of them (CLIENT_ERRORS)."""
    if isinstance(status, int) and not isinstance(status, bool):
        return "bad_answer" if status == 200 else "http_status"
    for kind, pattern in CLIENT_ERRORS:
        if pattern.search(str(text or "")):
            return kind
    return None


def _client_class(step, result):
    """The class a failed warm-up or benchmark task gets from the client's error, or None."""
    classes = CLIENT_CLASSES.get(step)
    if not classes:
        return None
    kind = client_error(result.get("status"), result.get("body") or result.get("msg"))
    if kind is None and result.get("body"):
        kind = client_error(None, result.get("msg"))
    return classes.get(kind)


def decide_failure(points=None, failure=None, task=None, result=None, crash=None):
    """The failure a record carries, or None when nothing failed.

    First found:

    1. ``failure`` given with a ``class`` (a caller that knows); then an interrupted run
       (``result['failure_class']`` ``interrupted``, see interrupted_result), with its step;
    2. ``crash``: the server's classified crash (``sglang_server_crash`` of the
       ready-wait: at start-up, or the death seen after a failed warm-up or
       benchmark), with its line, explanation, remedy and log excerpt;
    3. the start failed because the port was taken: ``port_in_use``;
    4. the failed task's own class (``result['failure_class']``, e.g. sglang_warmup's);
       the generic ``warmup_failed`` is refined by the client's error (``client_error``): refused ->
       ``warmup_refused``, timeout -> ``warmup_timeout``, reset -> ``warmup_connection_lost``,
       HTTP 200 without an answer -> ``warmup_bad_answer``; an HTTP error status stays
       ``warmup_failed`` with the status and body;
    5. the first failed benchmark point's class (incomplete_point, ...);
    6. a warm-up or benchmark task that failed without a class or a point: the class of
       the client error its message names (CLIENT_CLASSES: server_unreachable,
       bench_timeout, warmup_refused, ...);
    7. ``<step>_failed`` for any other failed step, ``unclassified`` when
       a task failed outside every step.

    ``task`` is ``ansible_failed_task`` (name and tags), ``result`` is
    ``ansible_failed_result``. No record is ever left with an empty class.
    """
    if failure and failure.get("class"):
        return dict(failure)
    task = task or {}
    result = result or {}
    step = failed_step(task)
    task_name = task.get("name") or None
    task_message = _truncate(result.get("msg"), MESSAGE_CHARS) if result.get("msg") else None
    if result.get("failure_class") == INTERRUPTED_CLASS:
        # Before the crash: a ready-wait cut short reads as a server that never got ready.
        return {"class": INTERRUPTED_CLASS, "step": result.get("failure_step") or step or task_name,
                "message": task_message, "task": task_name}
    if crash and crash.get("crash_class"):
        return {
            "class": crash["crash_class"],
            "step": step or crash.get("step") or "wait_ready",
            "message": crash.get("crash_line") or crash.get("msg"),
            "root_cause": crash.get("root_cause_line"),
            "rank": crash.get("crash_rank"),
            "fallback": bool(crash.get("fallback")),
            "explanation": crash.get("explanation"),
            "remedy": crash.get("remedy"),
            "crash_line_number": crash.get("crash_line_number"),
            "exit_status": crash.get("exit_status"),
            "log": crash.get("log"),
            "excerpt": (crash.get("excerpt") or "")[-EXCERPT_CHARS:],
            "task": task_name,
            "task_message": task_message,
        }
    if step == "start" and (result.get("port") or {}).get("free") is False:
        return {"class": "port_in_use", "step": "start", "message": result.get("msg"), "task": task_name}
    if result.get("failure_class"):
        own_step = result.get("failure_step") or step or task_name
        return {
            "class": (_client_class(own_step, result) if result["failure_class"] == f"{own_step}_failed" else None)
            or result["failure_class"],
            "step": own_step,
            "message": result.get("msg"),
            "status": result.get("status"),
            "body": result.get("body"),
        }
    from_points = _point_failure(points)
    if from_points:
        return from_points
    from_client = _client_class(step, result) if result.get("msg") else None
    if from_client:
        return {"class": from_client, "step": step, "message": task_message, "task": task_name}
    if result or task:
        return {
            "class": f"{step}_failed" if step else "unclassified",
            "step": step or task_name,
            "message": task_message,
            "task": task_name,
        }
    return None


def failure_report(tier, step, failure_class, expected_class, message, ledger_line, restore_line):
    """The closing message of a failed experiment (what, where, expected or not, ledger, restore)."""
    if not expected_class:
        expectation = ""
    elif expected_class == failure_class:
        expectation = " (as expected: the tier's expected_failure_class)"
    else:
        expectation = f" (the tier's expected_failure_class is {expected_class})"
    return (
        f"Tier {tier} failed at step '{step or 'unknown step'}': {failure_class}{expectation}\n"
        f"{_truncate(message, 600)}\n"
        f"ledger: {ledger_line}\n"
        f"restore: {restore_line}"
    )


def ledger_line(ledger, record=None, error=None):
    """Where the failure was recorded, or why it was not."""
    if error:
        return "NOT recorded - " + _truncate(error, 600)
    record = record or {}
    points = len(record.get("points") or [])
    return f"{ledger}, record {record.get('record_id', '?')} ({record.get('status', '?')}, {points} point(s) kept)"


def restore_line(enabled, restored=None, interrupted=None):
    """What the restore did, in one line."""
    if interrupted:
        return f"skipped: the run was interrupted ({interrupted}); the node is left as the interrupt left it"
    if not enabled:
        return "off (sglang_experiment_restore: false), the node is left as the failure left it"
    restored = restored or {}
    if restored.get("ok"):
        return f"tier {restored.get('tier')} runs again, pid {restored.get('pid')}"
    return f"tier {restored.get('tier')} FAILED - {_truncate(restored.get('msg'), 300)}"
