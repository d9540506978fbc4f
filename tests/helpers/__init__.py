"""The helpers the tests share, written once; ``from helpers.<module> import ...`` in any test.

tests/ is on sys.path through pyproject.toml (``[tool.pytest.ini_options] pythonpath``), with
the code under test (plugins/module_utils, plugins/modules, tools, simulator); no test changes
sys.path itself.

- ``helpers.paths``: REPO, FIXTURES, the manifest and inventory paths, the interpreter;
- ``helpers.processes``: ``free_port``, ``session_pids``, ``kill_session``,
  ``kill_recorded_sessions``, ``wait_for``, ``alive``;
- ``helpers.playbooks``: ansible-playbook through ansible-runner (``run_playbook``,
  ``run_play``) or plain (``playbook_cli``), ``local_inventory``, the readers of runner events,
  ``PlaybookLab``, ``ExperimentLab`` and ``experiment_lab`` (experiments on the simulator);
- ``helpers.sim``: the SYNTHETIC simulator as a process (``SimServer``, ``start_bench_sim``),
  its environment, manifest and tokenizer, and the lifecycle's server state file;
- ``helpers.records``: ledger records as the report and statistics tests build them;
- ``helpers.reports``: reading what the report tools write (PNG text chunks);
- ``helpers.gpu``: the stand-in nvidia-smi and the telemetry summary expected from its rows;
- ``helpers.recordings``: a recording of real SGLang (tests/fixtures/real-sglang/, phases f and g):
  its ledger, each run's client status events, the tasks of its playbook output.

What runs ansible-playbook or starts a server is marked ``@integration_only``: tests/conftest.py
refuses a module under tests/unit that imports one of those.
"""

from __future__ import annotations


def integration_only(obj):
    """Mark a helper that runs ansible-playbook / ansible-runner or starts servers: only modules
    under tests/integration may use it (tests/conftest.py checks)."""
    obj.__integration_only__ = True
    return obj
