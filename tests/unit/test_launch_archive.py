"""Module sglang_launch_archive, run as Ansible runs a module (its arguments in a JSON file)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from helpers.paths import REPO

MODULE = REPO / "plugins" / "modules" / "sglang_launch_archive.py"


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = {"PYTHONPATH": str(REPO / "plugins" / "module_utils")}
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True,
                          env={**env, "PATH": "/usr/bin:/bin"}, timeout=60, check=False)
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
