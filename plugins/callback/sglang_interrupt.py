# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# A first interrupt ends the running task, so that the play's rescue records it and gives the lock back.

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_interrupt
type: aggregate
short_description: A first Ctrl-C (or SIGTERM) ends the running step; the rescue records it and gives the lock back
description:
  - Without it, SIGINT or SIGTERM to ansible-playbook ends the play at once (exit 99); no rescue or
    always block runs, so an experiment leaves its lock held, no record of the attempt, and, where a
    module spawned helpers in sessions of their own, those helpers running.
  - With it, the first SIGINT or SIGTERM is passed to the processes of the tasks that run now (the
    children of Ansible's workers, not the workers, whose death would abort the play), and
    SGLANG_LAB_INTERRUPTED is set to the signal's name in the controller's environment. The
    project's modules end their helpers and fail with class C(interrupted) (module sglang_bench
    keeps the points that completed); any other task fails as its signal makes it. The play's
    rescue then records the attempt as C(interrupted) with its step, skips the restore, and its
    always block gives the lock back (role sglang_experiment); a campaign starts no new cell.
  - A benchmark client waiting in standby on this machine (started by module
    sglang_bench_standby, leashed with C(--leash) to this controller, not yet taken over by a
    measure step) is not a task process, since it runs in a session of its own. The first
    interrupt ends its process group with SIGTERM at once, rather than leaving it to the
    rescue's first task a few tasks later. A standby
    client on another machine is ended by the rescue (role sglang_experiment).
  - A task that has not started its process yet is signalled as soon as it does, for up to
    O(grace) seconds. When no task fails from the interrupt - the running task was an action of
    the controller (set_fact, assert), or ended well before the signal reached it - the play ends
    as Ansible's own interrupt ends it (exit 99), at the first task that ends well or after
    O(grace) - it never goes on to its next step. A second SIGINT or SIGTERM always ends it at once.
  - On by default for every playbook of this project (callback_plugins in ansible.cfg).
options:
  grace:
    description: Seconds the first interrupt waits for a task process to signal before it ends the play.
    type: float
    default: 10
    env:
      - name: SGLANG_LAB_INTERRUPT_GRACE
author:
  - sglang-lab
"""

import os  # noqa: E402 - after DOCUMENTATION, as Ansible plugins are
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from ansible.plugins.callback import CallbackBase  # noqa: E402

ENV = "SGLANG_LAB_INTERRUPTED"
POLL_S = 0.05
# The measure step's handover file in a standby directory (module_utils sglang_bench_points.STANDBY_GO).
STANDBY_GO = "go.json"
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def children(pid):
    """Every descendant pid of ``pid`` (from /proc: the controller's own machine, Linux)."""
    found, todo = [], [int(pid)]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children", encoding="ascii") as handle:
                kids = [int(word) for word in handle.read().split()]
        except (OSError, ValueError):
            continue
        found.extend(kids)
        todo.extend(kids)
    return found


def leashed_standby(holder, proc="/proc"):
    """pids of the standby clients leashed to ``holder`` that no measure step has taken over.

    A standby client's argv holds ``--standby DIR`` and ``--leash PID`` (module_utils
    sglang_bench_points.start_standby); DIR/go.json is the measure step's handover, after
    which that step owns (and ends) the client."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                argv = handle.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        pairs = dict(zip(argv, argv[1:], strict=False))
        if pairs.get("--leash") != str(holder) or "--standby" not in pairs:
            continue
        if not os.path.exists(os.path.join(pairs["--standby"], STANDBY_GO)):
            found.append(int(entry))
    return found


def end_groups(pids, signum=signal.SIGTERM):
    """Signal the process group of each of ``pids`` (each leads its own session)."""
    for pid in pids:
        try:
            os.killpg(pid, signum)
        except OSError:
            pass


def live_workers(handler):
    """The pids of the live workers of the TaskQueueManager whose signal handler ``handler`` is."""
    tqm = getattr(handler, "__self__", None)
    workers = getattr(tqm, "_workers", None) or []
    return [w.pid for w in workers if w is not None and w.pid and w.is_alive()]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang_interrupt"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.previous = {}
        self.interrupted = None
        self.ended = threading.Event()
        # Task processes the first interrupt was passed to: a task that got it may still end well
        # (a ready-wait with failed_when false); the play's next task then says what it means.
        self.signalled = set()

    def v2_playbook_on_start(self, playbook):
        # The TaskQueueManager installed its handlers (pass the signal to the workers, then abort)
        # before the callbacks were loaded; they stay the second interrupt's answer.
        for signum in SIGNALS:
            current = signal.getsignal(signum)
            if callable(current) and not live_workers_supported(current):
                continue
            self.previous[signum] = current
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame):
        previous = self.previous.get(signum, signal.SIG_DFL)
        if self.interrupted:
            # The second interrupt: Ansible's own handling, at once.
            for each in SIGNALS:
                signal.signal(each, self.previous.get(each, signal.SIG_DFL))
            self._display.warning(f"{signal.Signals(signum).name} again: ending the play now.")
            if callable(previous):
                previous(signum, frame)
            else:
                raise KeyboardInterrupt()
            return
        name = signal.Signals(signum).name
        self.interrupted = name
        os.environ[ENV] = name
        self._display.warning(
            f"{name}: ending the running step; the attempt is recorded as interrupted and the lock given back "
            f"(interrupt again to end the play at once)."
        )
        threading.Thread(target=self._pass_on, args=(signum, previous), name="sglang-interrupt", daemon=True).start()

    def _pass_on(self, signum, previous):
        """Signal each task process once, new ones too, until a task failed or the grace ran out."""
        try:
            grace = float(self.get_option("grace"))
        except (KeyError, TypeError, ValueError, AttributeError):
            grace = 10.0
        deadline = time.monotonic() + grace
        done = self.signalled
        end_groups(leashed_standby(os.getpid()))
        while not self.ended.is_set() and time.monotonic() < deadline:
            for worker in live_workers(previous):
                for pid in children(worker):
                    if pid in done:
                        continue
                    done.add(pid)
                    try:
                        os.kill(pid, signum)
                    except OSError:
                        pass
            time.sleep(POLL_S)
        if not self.ended.is_set():
            # No task failed from it (nothing ran, or a task shrugged it off): end the play as
            # Ansible would have, through the second-interrupt path.
            os.kill(os.getpid(), signum)

    def _failed(self):
        if self.interrupted:
            self.ended.set()

    def v2_runner_on_ok(self, result):
        # A task that ended well after the interrupt, when no task process got it, did not see it
        # (an action of the controller, a module that had already returned): the play must not go
        # on to its next step, so it ends here, as Ansible's own interrupt would end it.
        if self.interrupted and not self.ended.is_set() and not self.signalled:
            self.ended.set()
            self._display.warning(f"{self.interrupted}: the running task did not stop for it; ending the play now.")
            os.kill(os.getpid(), getattr(signal, self.interrupted))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._failed()

    def v2_runner_on_unreachable(self, result):
        self._failed()


def live_workers_supported(handler):
    """Whether ``handler`` is a TaskQueueManager's (its workers can be found); else keep it."""
    return hasattr(getattr(handler, "__self__", None), "_workers")
