"""What every test shares beside the helpers (tests/helpers/, imported as ``helpers.<module>``):
the layout rule, the import path of ``ansible.module_utils``, and the fixtures both kinds use.

Layout. tests/unit holds the tests that run no playbook and start no server; tests/integration
holds the ones that drive ansible-playbook / ansible-runner or start servers and process trees
(simulator, sampler). The folder decides, and the hook below keeps it so:

- every test under tests/integration gets the ``integration`` mark (``-m "not integration"``
  still selects the unit tests; no module marks itself);
- the run stops, naming the test, when a test under tests/unit is marked ``integration`` or
  ``molecule``, asks for a fixture of tests/integration/conftest.py, or sits in a module that
  imports ansible_runner or a helper marked ``@integration_only`` (helpers/__init__.py);
- it stops too for a test module under tests/ outside those two folders.

Import path. pyproject.toml's ``pythonpath`` puts tests/ (for ``helpers``) and the code under
test on sys.path: plugins/module_utils, plugins/modules, tools and simulator, in that order
(plugins/module_utils before plugins/modules: both hold a ``gpu_telemetry.py``, and the plain
name means the logic, not the module). Nothing else changes sys.path. Here plugins/module_utils
is added to ``ansible.module_utils`` (as ansible.cfg does for the modules), so ``from
ansible.module_utils import sglang_process`` imports the code the modules import.

Fixtures of both kinds: ``tier_pages``. The simulator's (``sim_manifest``, ``sim_tokenizer``,
``sim_start``) are in tests/integration/conftest.py, out of the unit tests' reach.
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import ansible.module_utils
import pytest
import render_tier_docs
from helpers.paths import MODULE_UTILS, TESTS

if str(MODULE_UTILS) not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(MODULE_UTILS))

UNIT = TESTS / "unit"
INTEGRATION = TESTS / "integration"
INTEGRATION_MARKS = ("integration", "molecule")
IMPORTS_ANSIBLE_RUNNER = re.compile(r"^\s*(?:import|from)\s+ansible_runner\b", re.M)


# --------------------------------------------------------------------------- the layout rule


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def integration_fixtures() -> set[str]:
    """The names of the fixtures tests/integration/conftest.py defines, read from its source (a
    run of tests/unit alone never loads that file)."""
    names = set()
    for node in ast.parse((INTEGRATION / "conftest.py").read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in filter(_is_fixture, node.decorator_list):
            keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
            given = [k.value.value for k in keywords if k.arg == "name" and isinstance(k.value, ast.Constant)]
            names.add(given[0] if given else node.name)
    return names


def _integration_only_imports(module: types.ModuleType) -> list[str]:
    """The names by which ``module`` holds ansible_runner or an ``@integration_only`` helper."""
    found = []
    for name, value in vars(module).items():
        try:
            marked = getattr(value, "__integration_only__", False) is True
        except Exception:  # an object whose attribute lookup itself fails is no helper of ours
            marked = False
        if marked or (isinstance(value, types.ModuleType) and value.__name__ == "ansible_runner"):
            found.append(name)
    source = Path(module.__file__).read_text()
    if IMPORTS_ANSIBLE_RUNNER.search(source) and "ansible_runner" not in found:
        found.append("ansible_runner")
    return found


def layout_problems(items: list[pytest.Item]) -> list[str]:
    """Why ``items`` break the layout rule (the module docstring), one line each; marks every test
    under tests/integration ``integration`` on the way."""
    problems: set[str] = set()
    fixtures: set[str] | None = None
    modules_seen: set[str] = set()
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)
            continue
        if not path.is_relative_to(TESTS):
            continue
        where = path.relative_to(TESTS.parent)
        if not path.is_relative_to(UNIT):
            problems.add(f"{where}: a test module belongs in tests/unit or tests/integration")
            continue
        marks = sorted({m.name for m in item.iter_markers() if m.name in INTEGRATION_MARKS})
        if marks:
            problems.add(f"{item.nodeid}: marked {', '.join(marks)} under tests/unit (move it to tests/integration)")
        if fixtures is None:
            fixtures = integration_fixtures()
        wanted = sorted(set(item.fixturenames) & fixtures)
        if wanted:
            problems.add(f"{item.nodeid}: uses the integration fixture(s) {', '.join(wanted)} under tests/unit")
        module = getattr(item, "module", None)
        if module is not None and str(where) not in modules_seen:
            modules_seen.add(str(where))
            names = _integration_only_imports(module)
            if names:
                problems.add(f"{where}: imports integration-only {', '.join(names)} under tests/unit")
    return sorted(problems)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it must see the integration marks
def pytest_collection_modifyitems(items):
    problems = layout_problems(items)
    if problems:
        raise pytest.UsageError("the tests break the unit/integration layout (tests/conftest.py):\n  "
                                + "\n  ".join(problems))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def tier_pages(tmp_path):
    """docs/tiers/ as tools/render_tier_docs.py generates it, in a temp folder: every page with the
    status block's placeholder, between the markers the real pages have."""
    pages = tmp_path / "docs" / "tiers"
    assert render_tier_docs.main(["--out-dir", str(pages)]) == 0
    return pages
