"""Static checks of every role in roles/ (found there, so a new role is checked without editing
this file): its meta/argument_specs.yml and defaults/main.yml agree (each entry point has its
tasks file; every option has a description, and a default equal to defaults/main.yml's unless it
is required; every default is an option of some entry point), its variables, registers and facts
carry the role's prefix (or are a declared option of the role they are handed to), and the
FlashInfer patch catalog matches its patch files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers.paths import REPO

ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml"))


def load(path):
    return yaml.safe_load(path.read_text()) or {}


def argument_specs(role):
    return load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]


def options(role):
    """Every option of every entry point of the role."""
    return {name for spec in argument_specs(role).values() for name in spec.get("options") or {}}


def prefix(role):
    """The prefix of a role's variables: its name. sglang_lab holds the settings every role
    shares, sglang_lab_*."""
    return role.removesuffix("_common")


def test_every_role_is_checked():
    folders = sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())
    assert ROLES == folders, "a folder in roles/ without tasks/main.yml"
    # The roles the README names (provisioning and experiments), at least.
    assert {"preflight", "cuda_toolkit", "ml_env", "flashinfer", "sglang", "model_cache",
            "sglang_launch", "sglang_server", "sglang_bench", "sglang_simulator"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_every_entry_point_has_its_tasks_file(role):
    specs = argument_specs(role)
    assert "main" in specs, "meta/argument_specs.yml has no main entry point"
    for entry, spec in specs.items():
        assert (REPO / "roles" / role / "tasks" / f"{entry}.yml").is_file(), entry
        assert spec.get("short_description"), entry


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    declared = set()
    for entry, spec in argument_specs(role).items():
        for name, option in (spec.get("options") or {}).items():
            declared.add(name)
            assert option.get("description"), (entry, name)
            if option.get("required"):
                # A required option has no default: one in defaults/main.yml would make it optional.
                assert "default" not in option and name not in defaults, (entry, name)
            else:
                assert name in defaults, (entry, name, "not in defaults/main.yml")
                assert option.get("default") == defaults[name], (entry, name)
    assert sorted(set(defaults) - declared) == [], "defaults/main.yml has variables no entry point declares"


def walk_tasks(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from walk_tasks(task.get(key))


def variables(role):
    """(file, name) of every variable the role defines: defaults, vars, registers, facts, task vars."""
    role_dir = REPO / "roles" / role
    names = {(role_dir / "defaults" / "main.yml", name) for name in load(role_dir / "defaults" / "main.yml")}
    for path in (role_dir / "vars").glob("*.yml"):
        names |= {(path, name) for name in load(path)}
    for path in (role_dir / "tasks").glob("*.yml"):
        for task in walk_tasks(yaml.safe_load(path.read_text())):
            if "register" in task:
                names.add((path, task["register"]))
            names |= {(path, name) for name in task.get("ansible.builtin.set_fact", {})}
            names |= {(path, name) for name in task.get("vars", {})}
    return names


@pytest.mark.parametrize("role", ROLES)
def test_variables_and_registers_carry_the_role_prefix(role):
    names = variables(role)
    assert len(names) > 3
    own = (prefix(role) + "_", "__" + prefix(role) + "_")
    for path, name in names:
        if name.startswith(own):
            continue
        # Otherwise another role's public variable, handed to it (include_role vars, a fact set
        # before it runs) or reset: one of its options or of the facts it sets, never a private one.
        owners = [other for other in ROLES if other != role and name.startswith(prefix(other) + "_")]
        known = any(name in options(other) | {n for _, n in variables(other)} for other in owners)
        assert known, (str(path), name, "carries no prefix of a role that has this variable")


def test_patch_catalog_matches_patch_files():
    catalog = load(REPO / "data" / "flashinfer_patches.yml")["patches"]
    files_dir = REPO / "roles" / "flashinfer" / "files" / "patches"
    assert sorted(catalog) == ["flashinfer-fp4-quantize-compiler-disable", "flashinfer-get-cuda-version-torch"]
    targets = [entry["file"] for entry in catalog.values()]
    assert len(set(targets)) == len(targets), "two patches change one file: sha256 states would clash"
    for patch_id, entry in catalog.items():
        text = (files_dir / entry["patch"]).read_text()
        assert Path(entry["patch"]).name == patch_id + ".patch"
        assert entry["patch"].startswith(entry["flashinfer_version"] + "/")
        headers = re.findall(r"^(?:---|\+\+\+) (\S+)", text, re.M)
        assert headers == ["a/" + entry["file"], "b/" + entry["file"]], patch_id
        added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
        assert any(entry["marker"] in line for line in added), patch_id
        for key in ("original_sha256", "patched_sha256"):
            assert re.fullmatch(r"[0-9a-f]{64}", entry[key]), (patch_id, key)


@pytest.mark.parametrize("role", ROLES)
def test_no_role_names_another_roles_private_variable(role):
    """Roles speak through their interfaces (../shared/STYLE.md): no file of a role's tasks, vars,
    defaults or templates names another role's ``__`` variable, not even inside a lookup of its
    files (the experiment's preflight once read role flashinfer's private patch catalog; the catalog
    is project data now, data/flashinfer_patches.yml)."""
    others = [prefix(other) for other in ROLES if other != role and prefix(other) != prefix(role)]
    found = []
    for folder in ("tasks", "vars", "defaults", "templates", "handlers"):
        for path in sorted((REPO / "roles" / role / folder).glob("**/*")):
            if not path.is_file():
                continue
            for name in re.findall(r"__([a-z][a-z0-9_]*)", path.read_text()):
                if any(name.startswith(other + "_") for other in others) and not name.startswith(prefix(role) + "_"):
                    found.append(f"{path.relative_to(REPO)}: __{name}")
    assert found == []


def _tasks(items):
    """Every task of a tasks file, blocks opened (block, rescue, always)."""
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item
        for section in ("block", "rescue", "always"):
            yield from _tasks(item.get(section))


@pytest.mark.parametrize("role", ROLES)
def test_no_role_sets_another_roles_variable(role):
    """A role hands another role its values through that role's interface (include_role/import_role
    vars, scoped to the call), never by a fact in the other role's name: a fact outlives the call and
    outranks the role's own defaults and task vars everywhere after it (issue 22: six such set_facts,
    each with a var-naming noqa, handed the launch, a campaign cell and the simulator's path)."""
    others = [prefix(other) for other in ROLES if other != role and prefix(other) != prefix(role)]
    found = []
    for path in sorted((REPO / "roles" / role / "tasks").glob("**/*.yml")):
        for task in _tasks(load(path)):
            facts = task.get("ansible.builtin.set_fact") or task.get("set_fact") or {}
            for name in facts if isinstance(facts, dict) else {}:
                bare = str(name).lstrip("_")
                if any(bare.startswith(other + "_") for other in others) and not bare.startswith(prefix(role) + "_"):
                    found.append(f"{path.relative_to(REPO)}: {name}")
    assert found == []
