"""Where things are: the checkout and its folders, defined once for every test (tests/unit and
tests/integration sit at different depths from here, so no test computes them from its own file)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
MODULE_UTILS = REPO / "plugins" / "module_utils"
SIMULATOR = REPO / "simulator"
TOOLS = REPO / "tools"
ANSIBLE_CFG = REPO / "ansible.cfg"
LOCAL_INVENTORY = REPO / "inventory" / "local.yml"
REAL_MANIFEST = REPO / "data" / "flag_manifests" / "sglang-0.5.10.post1.json"

PYTHON = sys.executable
VENV_BIN = Path(sys.executable).parent
