# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Print a campaign's progress - cells done, failed and left, with an ETA - as each cell is recorded.

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_campaign
type: aggregate
short_description: Print a campaign's progress and ETA each time a cell is recorded
description:
  - Role sglang_campaign plans a campaign with module sglang_campaign_plan and records each cell
    with module sglang_ledger_append. This callback reads the plan's counts, then after every
    cell's record prints one line per host - cells done (and failed), cells left, and the ETA
    from the cells measured so far in this run (before the first one, from the campaign's
    earlier records).
  - Works with any stdout callback and with ansible-runner (the line is a display message, so
    it is in runner's stdout events too). Enabled by default; it only acts on those two modules'
    results.
author:
  - sglang-lab
"""

import importlib.util  # noqa: E402 - after DOCUMENTATION, as Ansible plugins are
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from ansible.plugins.callback import CallbackBase  # noqa: E402


def _campaign_logic():
    """plugins/module_utils/sglang_campaign.py, loaded once (this project is not a collection), as the
    filter plugin's ``_load`` loads it: under the same name, with its folder on sys.path for the
    siblings it imports (sglang_compare, sglang_interval), and never left half-loaded in sys.modules."""
    key = "sglang_lab_module_utils_sglang_campaign"  # the name the filter plugin loads it under
    folder = Path(__file__).resolve().parent.parent / "module_utils"
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, folder / "sglang_campaign.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


PLAN_MODULES = ("sglang_campaign_plan",)
RECORD_MODULES = ("sglang_ledger_append",)


def _short(action):
    return str(action or "").rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang_campaign"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hosts = {}

    def _state(self, host):
        return self._hosts.get(host)

    def v2_runner_on_ok(self, result):
        action = _short(result._task.action)
        host = result._host.get_name()
        if action in PLAN_MODULES:
            plan = result._result.get("plan") or {}
            counts = plan.get("counts") or {}
            campaign = (result._task.args or {}).get("campaign") or {}
            self._hosts[host] = {
                "name": campaign.get("name", "?"),
                "done": int(counts.get("done", 0)),
                "failed": int(counts.get("failed", 0)),
                "left": int(counts.get("pending", 0)),
                "seconds": [],
                "prior": plan.get("mean_cell_seconds"),
                "since": time.monotonic(),
            }
            return
        if action not in RECORD_MODULES:
            return
        state = self._state(host)
        record = result._result.get("record") or {}
        cell = (record.get("campaign") or {}).get("cell")
        if state is None or not cell or not result._result.get("appended", True):
            return
        logic = _campaign_logic()
        now = time.monotonic()
        state["seconds"].append(now - state["since"])
        state["since"] = now
        ok = record.get("status") == "success"
        klass = (record.get("failure") or {}).get("class")
        if ok or not logic.is_transient(klass):  # the cell ended; a transient failure is tried again
            state["left"] = max(0, state["left"] - 1)
            state["done"] += 1
            state["failed"] += 0 if ok else 1
        last = f"{cell} {'ok' if ok else 'failed: ' + str(klass)}"
        if not ok and logic.is_transient(klass):
            last += " (transient: tried again)"
        seconds = state["seconds"] or ([state["prior"]] if state["prior"] else [])
        line = logic.progress_line(state["name"], host, state["done"], state["failed"], state["left"], seconds, last)
        self._display.display("PROGRESS " + line, color="cyan")
