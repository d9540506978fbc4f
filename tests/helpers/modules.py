"""Run one of the project's modules as Ansible runs it, without a playbook: its arguments in a JSON file,
the project's module_utils joined to the ansible.module_utils package (what ansible.cfg's module_utils
setting does), the module executed as __main__. Returns the module's JSON result."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.paths import MODULE_UTILS, REPO

RUN_AS_ANSIBLE = (
    "import runpy, sys, ansible.module_utils as mu; mu.__path__.append(sys.argv[1]); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run_module(name, folder, **args):
    """plugins/modules/<name>.py with ``args`` (``_ansible_check_mode`` and friends included)."""
    args_file = folder / f"{name}-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    module = REPO / "plugins" / "modules" / f"{name}.py"
    proc = subprocess.run([sys.executable, "-c", RUN_AS_ANSIBLE, str(MODULE_UTILS), str(module), str(args_file)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)
