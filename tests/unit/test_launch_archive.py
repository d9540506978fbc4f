"""Module sglang_launch_archive, run as Ansible runs a module (its arguments in a JSON file)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from helpers.paths import MODULE_UTILS, REPO

MODULE = REPO / "plugins" / "modules" / "sglang_launch_archive.py"
# What ansible.cfg's module_utils setting does for a module Ansible runs: the project's module_utils
# join the ansible.module_utils package, then the module runs as __main__ with its arguments file.
RUN_AS_ANSIBLE = (
    "import runpy, sys, ansible.module_utils as mu; mu.__path__.append(sys.argv[1]); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, "-c", RUN_AS_ANSIBLE, str(MODULE_UTILS), str(MODULE), str(args_file)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_the_script_and_its_flag_sources_are_kept_by_content_once(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/bash\nexec python -m sglang.launch_server --tp 8\n")
    sha = hashlib.sha256(script.read_bytes()).hexdigest()
    meta = {"hash": "abc", "patches": [], "flag_sources": {"--tp": "baseline"}}
    first = run_module(tmp_path, script=str(script), tier="t03", expected_sha256=sha, meta=meta)
    kept = tmp_path / "launch" / "archive" / f"t03-{sha[:16]}"
    assert first["changed"] is True and first["script_sha256"] == sha
    assert first["archived_script"] == f"{kept}.sh" and first["archived_meta"] == f"{kept}.json"
    assert (kept.parent / f"t03-{sha[:16]}.sh").read_bytes() == script.read_bytes()
    assert json.loads((kept.parent / f"t03-{sha[:16]}.json").read_text()) == {
        **meta, "tier": "t03", "script": str(script), "script_sha256": sha}
    assert oct(kept.parent.stat().st_mode & 0o777) == "0o750"
    again = run_module(tmp_path, script=str(script), tier="t03", expected_sha256=sha, meta=meta)
    assert again["changed"] is False  # idempotent
    assert sorted(p.name for p in kept.parent.iterdir()) == [f"t03-{sha[:16]}.json", f"t03-{sha[:16]}.sh"]


def test_a_script_that_changed_since_the_check_is_refused_and_nothing_written(tmp_path):
    script = tmp_path / "t03.sh"
    script.write_text("#!/bin/bash\n")
    result = run_module(tmp_path, script=str(script), tier="t03", expected_sha256="0" * 64)
    assert result.get("failed") is True and "changed since it was checked" in result["msg"]
    assert not (tmp_path / "archive").exists()


def test_check_mode_writes_nothing(tmp_path):
    script = tmp_path / "t03.sh"
    script.write_text("#!/bin/bash\n")
    result = run_module(tmp_path, script=str(script), tier="t03", _ansible_check_mode=True)
    assert result["changed"] is True and not (tmp_path / "archive").exists()
