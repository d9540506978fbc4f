"""playbooks/demo.yml: it parses, and it refuses to drive a real SGLang node.

The demo's full run (baseline + one tier + report, about three minutes here)
is playbooks/experiment.yml twice, which tests/integration/test_experiment.py covers; this
module checks only what the demo adds, cheaply.
"""

from __future__ import annotations

from helpers.playbooks import local_inventory, playbook_cli


def test_demo_parses_with_both_inventories():
    for inventory in ("inventory/local.yml", "inventory/blackwell.yml"):
        result = playbook_cli("-i", inventory, "--syntax-check", "playbooks/demo.yml")
        assert result.returncode == 0, result.stdout + result.stderr


def test_demo_refuses_a_real_sglang_node(tmp_path):
    work = tmp_path / "work"
    inventory = local_inventory(tmp_path / "inventory.yml", "gpu-node",
                                group_vars={"sglang_lab_target": "sglang", "sglang_lab_work_dir": str(work)})
    result = playbook_cli("-i", str(inventory), "playbooks/demo.yml")
    assert result.returncode != 0
    assert "drives the SGLang-protocol simulator, but gpu-node has" in result.stdout
    assert "sglang_lab_target 'sglang'" in result.stdout
    # Refused in the first play: no experiment task ran, nothing was written.
    assert "Validate the tier and render its launch script" not in result.stdout
    assert not work.exists()
