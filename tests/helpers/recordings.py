"""Reading a recording of real SGLang (tests/fixtures/real-sglang/<version>-<device>/phase-<x>/) as
the replay tests need it: the ledger the phase wrote, each run's client status events, and what the
playbook output says of its tasks. A phase folder holds ``results/ledger.jsonl`` and, per run,
``results/raw/<run_id>/client.log`` (phases f and g)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import sglang_bench_points as bp

_TASK = re.compile(r"^TASK \[(?P<name>.+?)\] \*+$")
_OUTCOME = re.compile(r"^(?P<outcome>ok|changed|skipping|failed|fatal|included): ")


def records(phase: Path) -> list[dict]:
    """The phase's ledger records, in the order they were appended."""
    text = (phase / "results" / "ledger.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def client_events(phase: Path, record: dict) -> list[dict]:
    """The status events the client wrote for ``record``'s run (its client.log), in order."""
    log = phase / "results" / "raw" / record["run_id"] / "client.log"
    return bp.parse_status_lines(log.read_text())


def tasks(output: str) -> list[tuple[str, str | None, str]]:
    """The tasks of ansible-playbook's default output, in order: (name as in ``TASK [name]``, its
    outcome - the last ok/changed/skipping/failed/fatal/included line of the task, None if none - and
    the task's text up to the next task or the recap)."""
    found = []
    name, body = None, []

    def close():
        if name is not None:
            outcomes = [m["outcome"] for m in map(_OUTCOME.match, body) if m]
            found.append((name, outcomes[-1] if outcomes else None, "\n".join(body)))

    for line in output.splitlines():
        task = _TASK.match(line)
        if task or line.startswith("PLAY RECAP"):
            close()
            name, body = (task["name"], []) if task else (None, [])
        elif name is not None:
            body.append(line)
    close()
    return found
