"""Module documentation against the modules' real argument specs, and the project's one licence.

For every module in plugins/modules/, DOCUMENTATION merged with its doc fragments
(plugins/doc_fragments/, merged by ansible's own loader exactly as ansible-doc merges them) must
describe the argument_spec the module really passes to AnsibleModule: the same options, and for
each the same type, required flag, default, choices, elements, aliases and suboptions. The spec is
captured by running the module's main() with AnsibleModule replaced by a stand-in that records its
arguments and stops, so nothing in the modules exists for the test's sake.

ansible-doc itself, configured by ansible.cfg (doc_fragment_plugins), must render every module.

The licence: LICENSE is the GPLv3 text, every role's galaxy_info says GPL-3.0-or-later, every
Python file under plugins/ tools/ simulator/ carries the same header, and nothing under plugins/
roles/ tools/ simulator/ names another licence.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from unittest import mock

import ansible.module_utils
import pytest
import yaml
from helpers.paths import REPO

MODULES_DIR = REPO / "plugins" / "modules"
FRAGMENTS_DIR = REPO / "plugins" / "doc_fragments"
_MU = str(REPO / "plugins" / "module_utils")
if _MU not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MU)

from ansible.plugins.loader import fragment_loader  # noqa: E402
from ansible.utils.plugin_docs import get_docstring  # noqa: E402

fragment_loader.add_directory(str(FRAGMENTS_DIR))

MODULES = sorted(path.stem for path in MODULES_DIR.glob("*.py") if not path.name.startswith("_"))

SPDX = "GPL-3.0-or-later"
HEADER = (
    "# Copyright: contributors to this project\n"
    "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)\n"
)


# --------------------------------------------------------------------------- loading


class _Captured(Exception):
    """Raised by the AnsibleModule stand-in once it has the module's arguments."""


def merged_doc(name):
    """DOCUMENTATION of a module with its extends_documentation_fragment merged in."""
    doc, _examples, _returns, _metadata = get_docstring(
        str(MODULES_DIR / f"{name}.py"), fragment_loader, is_module=True, ignore_errors=False
    )
    assert doc, f"{name}: no DOCUMENTATION"
    return doc


def module_arguments(name):
    """The keyword arguments the module's main() passes to AnsibleModule (argument_spec, ...)."""
    path = MODULES_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_sglang_lab_docs_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    captured = {}

    def stand_in(*args, **kwargs):
        captured.update(kwargs)
        if args:
            captured["argument_spec"] = args[0]
        raise _Captured

    with mock.patch.object(module, "AnsibleModule", stand_in), pytest.raises(_Captured):
        module.main()
    return captured


# --------------------------------------------------------------------------- comparing


def _canon(value, type_=None):
    """A comparable form of a default or choice: YAML-tagged strings become str, and an int
    given for a float option equals its float, while True never equals 1."""
    if value is None:
        return None
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        if type_ == "float" or isinstance(value, float):
            return ("float", float(value))
        return ("int", int(value))
    if isinstance(value, str):
        return ("str", str(value))
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canon(v) for v in value))
    return ("other", repr(value))


def _as_list(value):
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def compare_options(documented, declared, where):
    """Differences between documented options (DOCUMENTATION) and an argument spec."""
    documented = documented or {}
    declared = declared or {}
    problems = []
    only_doc = sorted(set(documented) - set(declared))
    only_spec = sorted(set(declared) - set(documented))
    if only_doc:
        problems.append(f"{where}: documented but not in the argument spec: {', '.join(only_doc)}")
    if only_spec:
        problems.append(f"{where}: in the argument spec but not documented: {', '.join(only_spec)}")
    for name in sorted(set(documented) & set(declared)):
        doc, spec = documented[name] or {}, declared[name] or {}
        at = f"{where}: option {name}"
        doc_type = str(doc.get("type", "str"))
        spec_type = spec.get("type", "str")
        spec_type = spec_type if isinstance(spec_type, str) else getattr(spec_type, "__name__", repr(spec_type))
        checks = [
            ("type", doc_type, spec_type),
            ("required", bool(doc.get("required", False)), bool(spec.get("required", False))),
            ("default", _canon(doc.get("default"), doc_type), _canon(spec.get("default"), spec_type)),
            (
                "choices",
                sorted(map(repr, (_canon(c, doc_type) for c in _as_list(doc.get("choices"))))),
                sorted(map(repr, (_canon(c, spec_type) for c in _as_list(spec.get("choices"))))),
            ),
            ("elements", doc.get("elements"), spec.get("elements")),
            ("aliases", sorted(_as_list(doc.get("aliases"))), sorted(_as_list(spec.get("aliases")))),
        ]
        for key, doc_value, spec_value in checks:
            if doc_value != spec_value:
                problems.append(f"{at}: {key} documented as {doc.get(key)!r} but declared as {spec.get(key)!r}")
        if doc.get("suboptions") or spec.get("options"):
            problems.extend(compare_options(doc.get("suboptions"), spec.get("options"), at))
    return problems


# --------------------------------------------------------------------------- the modules' docs


def test_every_module_is_covered():
    assert len(MODULES) >= 10, MODULES
    assert FRAGMENTS_DIR.is_dir()


@pytest.mark.parametrize("name", MODULES)
def test_documentation_matches_argument_spec(name):
    declared = module_arguments(name)["argument_spec"]
    documented = merged_doc(name).get("options")
    problems = compare_options(documented, declared, name)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", MODULES)
def test_attributes_are_declared(name):
    attributes = merged_doc(name).get("attributes") or {}
    problems = []
    for key in ("check_mode", "diff_mode", "idempotent"):
        entry = attributes.get(key) or {}
        if entry.get("support") not in ("full", "partial", "none", "N/A"):
            problems.append(f"{name}: attribute {key} has no support level (got {entry.get('support')!r})")
    check_mode = (attributes.get("check_mode") or {}).get("support")
    supports = bool(module_arguments(name).get("supports_check_mode", False))
    if supports != (check_mode in ("full", "partial")):
        problems.append(f"{name}: supports_check_mode={supports} but attribute check_mode support is {check_mode!r}")
    assert not problems, "\n".join(problems)


def test_compare_options_names_each_difference():
    """The comparison itself: every kind of drift is reported, naming the option."""
    documented = {
        "a": {"type": "int", "default": 1},
        "b": {"type": "list", "elements": "str", "required": True},
        "c": {"type": "str", "choices": ["x", "y"]},
        "d": {"type": "float", "default": 30},
        "e": {"type": "dict", "suboptions": {"inner": {"type": "bool", "default": True}}},
        "gone": {"type": "str"},
    }
    declared = {
        "a": {"type": "int", "default": 2},
        "b": {"type": "list", "elements": "dict"},
        "c": {"type": "str", "choices": ["x"]},
        "d": {"type": "float", "default": 30.0},
        "e": {"type": "dict", "options": {"inner": {"type": "bool", "default": 1}}},
        "new": {"type": "str"},
    }
    problems = "\n".join(compare_options(documented, declared, "m"))
    assert "option a: default" in problems
    assert "option b: required" in problems and "option b: elements" in problems
    assert "option c: choices" in problems
    assert "option d" not in problems  # 30 documented for a float option is 30.0
    assert "option e: option inner: default" in problems  # True is not 1
    assert "documented but not in the argument spec: gone" in problems
    assert "in the argument spec but not documented: new" in problems


def test_provenance_fragment_is_the_provenance_argument_spec():
    """The fragment sglang_bench and sglang_ledger_append share is PROVENANCE_ARGUMENT_SPEC."""
    from ansible.module_utils.sglang_provenance import PROVENANCE_ARGUMENT_SPEC

    fragment = yaml.safe_load(fragment_loader.get("sglang_lab_provenance").DOCUMENTATION)
    assert not compare_options(fragment["options"], PROVENANCE_ARGUMENT_SPEC, "sglang_lab_provenance")


def test_workload_fragment_is_the_workload_argument_spec():
    """The workload is one dict option: fragment sglang_lab_workload is WORKLOAD_ARGUMENT_SPEC, which
    every module that needs the workload takes whole, and declares no workload field of its own;
    its .client part is CLIENT_ARGUMENT_SPEC, shared by the two modules that run points."""
    from ansible.module_utils.sglang_workload_options import (
        CLIENT_ARGUMENT_SPEC,
        WORKLOAD_ARGUMENT_SPEC,
        WORKLOAD_OPTIONS,
    )

    fragment = fragment_loader.get("sglang_lab_workload")
    assert not compare_options(yaml.safe_load(fragment.DOCUMENTATION)["options"], WORKLOAD_ARGUMENT_SPEC,
                               "sglang_lab_workload")
    assert not compare_options(yaml.safe_load(fragment.CLIENT)["options"], CLIENT_ARGUMENT_SPEC,
                               "sglang_lab_workload.client")
    for name in ("sglang_bench", "sglang_slo_search", "sglang_ledger_append"):
        declared = module_arguments(name)["argument_spec"]
        assert {option: declared[option] for option in WORKLOAD_ARGUMENT_SPEC} == WORKLOAD_ARGUMENT_SPEC, name
        if name != "sglang_ledger_append":
            assert {option: declared[option] for option in CLIENT_ARGUMENT_SPEC} == CLIENT_ARGUMENT_SPEC, name
        # No workload field beside the object: num_prompts is the client's fixed count (not the rule),
        # warmup sglang_bench's order to warm up first (with the workload's block, fragment sglang_lab_warmup).
        assert not (set(WORKLOAD_OPTIONS) - {"num_prompts", "warmup"}) & set(declared), name


def test_the_warmup_option_is_one_fragment_and_one_spec():
    """sglang_bench and sglang_warmup take the resolved warm-up block as option warmup: both declare
    WARMUP_SETTINGS_OPTIONS, documented once by fragment sglang_lab_warmup."""
    from ansible.module_utils.sglang_warmup_rounds import WARMUP_SETTINGS_OPTIONS

    fragment = yaml.safe_load(fragment_loader.get("sglang_lab_warmup").DOCUMENTATION)
    assert not compare_options(fragment["options"]["warmup"]["suboptions"], WARMUP_SETTINGS_OPTIONS,
                               "sglang_lab_warmup")
    for name in ("sglang_bench", "sglang_warmup"):
        assert module_arguments(name)["argument_spec"]["warmup"]["options"] == WARMUP_SETTINGS_OPTIONS, name
        own = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', (MODULES_DIR / f"{name}.py").read_text(),
                                        re.S).group(1))
        assert "warmup" not in own["options"], f"{name} documents warmup again beside the fragment"
        assert "sglang_lab_warmup" in own["extends_documentation_fragment"], name


def test_ansible_doc_renders_every_module():
    """One ansible-doc run over all modules, configured by ansible.cfg only (doc_fragment_plugins)."""
    ansible_doc = Path(sys.executable).with_name("ansible-doc")
    command = str(ansible_doc) if ansible_doc.exists() else shutil.which("ansible-doc")
    assert command, "ansible-doc is not installed next to this Python"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    env.pop("ANSIBLE_DOC_FRAGMENT_PLUGINS", None)
    result = subprocess.run(
        [command, "--json", "-M", str(MODULES_DIR), *MODULES],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    rendered = json.loads(result.stdout)
    assert sorted(rendered) == MODULES
    for name in MODULES:
        options = rendered[name]["doc"].get("options") or {}
        assert sorted(options) == sorted(merged_doc(name).get("options") or {}), name


PLUGIN_DOCS = sorted(
    str(path.relative_to(REPO))
    for kind in ("callback", "filter", "action")
    for path in (REPO / "plugins" / kind).glob("*.py")
    if "DOCUMENTATION" in path.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("rel", PLUGIN_DOCS)
def test_every_plugin_documentation_is_yaml(rel):
    """A callback's DOCUMENTATION is parsed when Ansible loads its callbacks: a YAML error there
    breaks every playbook of the project before its first task."""
    doc = get_docstring(str(REPO / rel), fragment_loader)[0]
    assert isinstance(doc, dict) and doc.get("short_description"), rel


# --------------------------------------------------------------------------- the licence


def test_license_file_is_gplv3():
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("GNU GENERAL PUBLIC LICENSE")
    assert "Version 3, 29 June 2007" in text.splitlines()[1]
    assert "END OF TERMS AND CONDITIONS" in text


def test_every_role_declares_the_licence_of_license_file():
    metas = sorted((REPO / "roles").glob("*/meta/main.yml"))
    assert metas
    wrong = {}
    for meta in metas:
        licence = (yaml.safe_load(meta.read_text()).get("galaxy_info") or {}).get("license")
        if licence != SPDX:
            wrong[str(meta.relative_to(REPO))] = licence
    assert not wrong, f"roles must declare license: {SPDX} (LICENSE is the GPLv3): {wrong}"


_OTHER_LICENCE = re.compile(r"\b(?:Apache|MIT|BSD)\b|SPDX-License-Identifier:\s*(?!GPL-3\.0-or-later)")


def test_no_file_names_another_licence():
    found = []
    for top in ("plugins", "roles", "tools", "simulator"):
        for path in sorted((REPO / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if _OTHER_LICENCE.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "another licence is named:\n" + "\n".join(found)


def _python_files():
    files = sorted(
        path.relative_to(REPO).as_posix()
        for top in ("plugins", "tools", "simulator")
        for path in (REPO / top).rglob("*.py")
        if "__pycache__" not in path.parts
    )
    return files


@pytest.mark.parametrize("rel", _python_files())
def test_python_file_has_the_licence_header(rel):
    lines = (REPO / rel).read_text().splitlines(keepends=True)
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    assert "".join(lines[:2]) == HEADER, f"{rel} must open (after any #! line) with:\n{HEADER}"
