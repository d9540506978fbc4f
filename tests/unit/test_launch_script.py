"""Module sglang_launch_script, run as Ansible runs a module (its arguments in a JSON file)."""

from __future__ import annotations

import hashlib
import json

from helpers.modules import run_module as _run


def run_module(tmp_path, **args):
    return _run("sglang_launch_script", tmp_path, **args)


SCRIPT = "#!/usr/bin/env bash\nexec python -m sglang.launch_server --tp 8\n"


def test_the_script_and_its_flag_sources_are_kept_by_content_once(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    sha = hashlib.sha256(SCRIPT.encode()).hexdigest()
    meta = {"hash": "abc", "patches": [], "flag_sources": {"--tp": "baseline"}}
    first = run_module(tmp_path, path=str(script), content=SCRIPT, archive=True, tier="t03", meta=meta)
    kept = tmp_path / "launch" / "archive" / f"t03-{sha[:16]}"
    assert first["changed"] is True and first["script_sha256"] == sha
    assert first["archived_script"] == f"{kept}.sh" and first["archived_meta"] == f"{kept}.json"
    assert (kept.parent / f"t03-{sha[:16]}.sh").read_bytes() == script.read_bytes()
    assert json.loads((kept.parent / f"t03-{sha[:16]}.json").read_text()) == {
        **meta, "tier": "t03", "script": str(script), "script_sha256": sha}
    assert oct(kept.parent.stat().st_mode & 0o777) == "0o750"
    again = run_module(tmp_path, path=str(script), content=SCRIPT, archive=True, tier="t03", meta=meta)
    assert again["changed"] is False  # idempotent
    assert sorted(p.name for p in kept.parent.iterdir()) == [f"t03-{sha[:16]}.json", f"t03-{sha[:16]}.sh"]



def test_content_is_written_with_its_directory_and_mode_then_left_alone(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    first = run_module(tmp_path, path=str(script), content=SCRIPT, mode="0750", _ansible_diff=True)
    assert first["changed"] is True and first["script_changed"] is True, first
    assert script.read_text() == SCRIPT and oct(script.stat().st_mode & 0o777) == "0o750"
    assert oct(script.parent.stat().st_mode & 0o777) == "0o750"
    assert first["script_sha256"] == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert first["diff"]["before"] == "" and first["diff"]["after"] == SCRIPT
    assert "archived_script" not in first and not (script.parent / "archive").exists()
    again = run_module(tmp_path, path=str(script), content=SCRIPT, mode="0750")
    assert again["changed"] is False and again["script_changed"] is False
    script.chmod(0o700)
    mode_only = run_module(tmp_path, path=str(script), content=SCRIPT, mode="0750")
    assert mode_only["changed"] is True and oct(script.stat().st_mode & 0o777) == "0o750"


def test_content_and_archive_in_one_call(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    result = run_module(tmp_path, path=str(script), content=SCRIPT, archive=True, tier="t03",
                        meta={"flag_sources": {"--tp": "baseline"}})
    sha = hashlib.sha256(SCRIPT.encode()).hexdigest()
    kept = script.parent / "archive" / f"t03-{sha[:16]}.sh"
    assert result["archived_script"] == str(kept) and kept.read_text() == SCRIPT
    assert json.loads(kept.with_suffix(".json").read_text())["flag_sources"] == {"--tp": "baseline"}
    changed = SCRIPT.replace("--tp 8", "--tp 4")
    second = run_module(tmp_path, path=str(script), content=changed, archive=True, tier="t03")
    assert second["changed"] is True and script.read_text() == changed
    assert len(list((script.parent / "archive").glob("t03-*.sh"))) == 2  # each content kept once


def test_text_that_bash_refuses_is_not_written(tmp_path):
    script = tmp_path / "t03.sh"
    script.write_text(SCRIPT)
    result = run_module(tmp_path, path=str(script), content="#!/usr/bin/env bash\nif then fi (\n", archive=True,
                        tier="t03")
    assert result.get("failed") is True and "bash -n refuses" in result["msg"], result
    assert script.read_text() == SCRIPT and not (tmp_path / "archive").exists()


def test_check_mode_with_content_writes_nothing(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    result = run_module(tmp_path, path=str(script), content=SCRIPT, archive=True, tier="t03",
                        _ansible_check_mode=True)
    assert result["changed"] is True and not script.parent.exists()


# --- the same writer in the experiment's preflight (module_utils/sglang_launch_file.py) -----------------------


def preflight(tmp_path, script, content, **changes):
    """Module sglang_experiment_preflight with a launch whose port (0) and model (missing) are refused, and the
    launch script to write (option script)."""
    args = {
        "tier": "t03",
        "launch": {"tier": "t03", "script": str(script), "flags": {"--port": 0}, "target": "simulator",
                   "model": str(tmp_path / "no-model"), "env": {}},
        "run_dir": str(tmp_path / "run"), "bench_settings": {"concurrency": [1]},
        "script": {"path": str(script), "content": content, "archive": True, "tier": "t03", "meta": {"hash": "h"}},
    }
    args.update(changes)
    return _run("sglang_experiment_preflight", tmp_path, **args)


def test_the_preflight_writes_no_script_for_a_tier_it_refuses(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    result = preflight(tmp_path, script, SCRIPT)
    assert result["failed"] and "port" in result["checks"] and "launch_script" in result["checks"], result
    # The text's checksum is known without writing it; nothing is written for a refused tier.
    assert result["script_sha256"] == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert not script.parent.exists() and "script" not in result


def test_the_preflight_lists_bash_refusing_the_text_with_the_other_problems(tmp_path):
    script = tmp_path / "launch" / "t03.sh"
    result = preflight(tmp_path, script, "#!/usr/bin/env bash\nif then\n")
    assert result["failed"], result
    refused = [p for p in result["problems"] if p["check"] == "launch_script"]
    assert len(refused) == 1 and "bash -n refuses the rendered launch script" in refused[0]["message"]
    assert refused[0]["var"] == "sglang_launch_template"
    assert any(p["check"] == "port" for p in result["problems"])  # every problem in one message
    assert not script.parent.exists()


def test_the_writer_decides_before_it_writes(tmp_path):
    import sglang_launch_file as lf

    def bash(argv):
        import subprocess
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    script = tmp_path / "launch" / "t03.sh"
    spec = {"path": str(script), "content": SCRIPT, "mode": "0750", "dir_mode": "0700", "archive": True,
            "tier": "t03", "meta": {}}
    result, writes, problem = lf.launch_script_writes(spec, bash)
    assert problem is None and result["changed"] and len(writes) == 3 and not script.parent.exists()
    lf.write_all(spec, writes)
    assert script.read_text() == SCRIPT and oct(script.parent.stat().st_mode & 0o777) == "0o700"
    again = lf.launch_script_writes(spec, bash)
    assert again[1] == [] and again[0]["changed"] is False and again[0]["script_changed"] is False
    assert lf.launch_script_writes({**spec, "mode": "rwx"}, bash)[2] == "mode 'rwx' is not an octal mode such as '0750'"
    assert lf.launch_script_writes({**spec, "tier": None}, bash)[2] == "archive needs the tier"
