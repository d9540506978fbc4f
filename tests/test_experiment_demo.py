"""playbooks/demo.yml: it parses, and it refuses to drive a real SGLang node.

The demo's full run (baseline + one tier + report, about three minutes here)
is playbooks/experiment.yml twice, which tests/test_experiment.py covers; this
module checks only what the demo adds, cheaply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def playbook(*args, timeout=300):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_demo_parses_with_both_inventories():
    for inventory in ("inventory/local.yml", "inventory/blackwell.yml"):
        result = playbook("-i", inventory, "--syntax-check", "playbooks/demo.yml")
        assert result.returncode == 0, result.stdout + result.stderr


def test_demo_refuses_a_real_sglang_node(tmp_path):
    work = tmp_path / "work"
    inventory = tmp_path / "inventory.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    group = {"hosts": {"gpu-node": host}, "vars": {"sglang_lab_target": "sglang", "sglang_lab_work_dir": str(work)}}
    inventory.write_text(json.dumps({"all": {"children": {"sglang_nodes": group}}}))
    result = playbook("-i", str(inventory), "playbooks/demo.yml")
    assert result.returncode != 0
    assert "drives the SGLang-protocol simulator, but gpu-node has" in result.stdout
    assert "sglang_lab_target 'sglang'" in result.stdout
    # Refused in the first play: no experiment task ran, nothing was written.
    assert "Validate the tier and render its launch script" not in result.stdout
    assert not work.exists()
