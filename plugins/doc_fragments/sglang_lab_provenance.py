# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provenance options of the modules that write ledger records (sglang_bench, sglang_ledger_append).

Declared once as PROVENANCE_ARGUMENT_SPEC in plugins/module_utils/sglang_provenance.py, next to
collect_provenance() that consumes them; documented once here. tests/unit/test_module_docs.py checks
that both agree, option by option.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  server_state:
    description:
      - The lifecycle's C(server.json) (pid, script, started_at), written by M(sglang_server) (C(state=started)).
    type: path
  launch_script:
    description: The launch script; its sha256 is recorded. Defaults to the script named in O(server_state).
    type: path
  launch_argv:
    description: Final server argv as rendered; else read from C(/proc) for the pid in O(server_state).
    type: list
    elements: str
  launch_env:
    description: Server environment as rendered; secret-looking names are redacted.
    type: dict
  facts_file:
    description: Local facts file with installed versions (JSON).
    type: path
    default: /etc/ansible/facts.d/sglang_lab.fact
  ml_env_python:
    description:
      - Interpreter of the ml-env, asked for versions through importlib.metadata when the facts
        file lacks them.
    type: path
  git_revision:
    description: The project's git revision on the controller.
    type: str
  collect_provenance:
    description: Collect provenance (server_info, versions, GPU, launch).
    type: bool
    default: true
"""
