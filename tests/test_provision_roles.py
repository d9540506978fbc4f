"""Static checks of the provisioning roles: every role's defaults/main.yml matches its
meta/argument_specs.yml (same names, same default values), variables carry the role's prefix,
and the FlashInfer patch catalog matches its patch files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
ROLES = ["preflight", "cuda_toolkit", "ml_env", "flashinfer", "sglang", "model_cache"]


def load(path):
    return yaml.safe_load(path.read_text()) or {}


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        assert spec.get("default") == defaults[name], name
        assert spec.get("description"), name


@pytest.mark.parametrize("role", ROLES)
def test_entry_points_repeat_main_defaults(role):
    specs = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    for entry, spec in specs.items():
        for name, option in spec.get("options", {}).items():
            assert name in defaults, (entry, name)
            assert option.get("default") == defaults[name], (entry, name)


def walk_tasks(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from walk_tasks(task.get(key))


@pytest.mark.parametrize("role", ROLES)
def test_variables_and_registers_carry_the_role_prefix(role):
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
    assert len(names) > 3
    for path, name in names:
        assert name.startswith((role + "_", "__" + role + "_")), (str(path), name)


def test_patch_catalog_matches_patch_files():
    catalog = load(REPO / "roles" / "flashinfer" / "vars" / "main.yml")["__flashinfer_patch_catalog"]
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
