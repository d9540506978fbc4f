# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Print the progress of the ready-wait (sglang_server, state=ready) while a server loads.

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_progress
type: aggregate
short_description: Print SGLang server start-up progress on every retry of the ready wait
description:
  - The ready wait (module sglang_server, state=ready, in role sglang_server) runs in an until loop;
    each call watches the server for a few seconds and returns its progress.
  - On every retry this callback prints one line per host - seconds since the server started,
    the timeout, the health answer and the last line of the server log - so a person watching
    ansible-playbook during a five-minute model load sees it move.
  - Enabled by default (it only acts on results that carry sglang_progress).
author:
  - sglang-lab
"""

from ansible.plugins.callback import CallbackBase  # noqa: E402 - after DOCUMENTATION, as Ansible plugins are


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang_progress"
    CALLBACK_NEEDS_ENABLED = False

    def v2_runner_retry(self, result):
        progress = result._result.get("sglang_progress")
        if not progress:
            return
        health = progress.get("health") or "?"
        if progress.get("health_code"):
            health = f"{health} {progress['health_code']}"
        line = progress.get("last_line") or "(log empty)"
        if len(line) > 160:
            line = line[:157] + "..."
        self._display.display(
            f"  [{result._host.get_name()}] sglang {progress.get('tier')}: "
            f"{progress.get('elapsed_s', 0):.0f}s/{progress.get('timeout_s', 0):.0f}s, "
            f"health {health}, {progress.get('log_lines', 0)} log lines | {line}"
        )
