"""Role sglang_launch and playbooks/render.yml driven by real ansible-playbook runs
(ansible-runner) against localhost, with every path in a temporary directory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import sglang_tiers as st
from helpers.paths import REPO, VENV_BIN
from helpers.playbooks import run_play
from helpers.processes import free_port

SHELLCHECK = VENV_BIN / "shellcheck"


def run_playbook(tmp_path: Path, playbook: str | Path, inventory: str, cmdline: str = "", roles_path: str = ""):
    """Run a playbook through ansible-runner; return (status, stats, results by task name)."""
    envvars = {"ANSIBLE_ROLES_PATH": f"{roles_path}{os.pathsep}{REPO / 'roles'}"} if roles_path else None
    runner, results = run_play(tmp_path, playbook, inventory, cmdline=cmdline or None, envvars=envvars)
    return runner.status, runner.stats or {}, results


def localhost_inventory(group: str = "all", hostvars: dict | None = None) -> str:
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    host.update(hostvars or {})
    if group == "all":
        return json.dumps({"all": {"hosts": {"localhost": host}}})
    return json.dumps({"all": {"children": {group: {"hosts": {"localhost": host}}}}})


def changed(stats: dict) -> int:
    return sum((stats.get("changed") or {}).values())


def shellcheck(path: Path):
    proc = subprocess.run([str(SHELLCHECK), str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


# --------------------------------------------------------------------------- playbooks/render.yml


def test_render_playbook_renders_every_runnable_tier_idempotently(tmp_path):
    port = free_port()
    work = tmp_path / "work"
    inventory = localhost_inventory(
        "sglang_nodes",
        {
            "sglang_lab_work_dir": str(work),
            "sglang_lab_ml_env": str(VENV_BIN.parent),
            "sglang_lab_target": "simulator",
            "sglang_lab_port": port,
        },
    )
    status, stats, _ = run_playbook(tmp_path, REPO / "playbooks" / "render.yml", inventory)
    assert status == "successful"
    catalog = __import__("yaml").safe_load((REPO / "data" / "tiers.yml").read_text())
    runnable = st.runnable_tiers(catalog)
    scripts = sorted(p.name for p in (work / "launch").iterdir())
    assert scripts == sorted(f"{t}.sh" for t in runnable)
    # One task (one loop item per tier): module sglang_launch_script writes the directory and the scripts.
    assert changed(stats) == 1
    assert stat.S_IMODE((work / "launch").stat().st_mode) == 0o750
    for name in scripts:
        path = work / "launch" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o750
        text = path.read_text()
        assert f"  --port {port}" in text.splitlines()[-1] or f"  --port {port} \\" in text
        assert "  --host 127.0.0.1 \\" in text
        assert "-u -m sglang_sim.launch_server \\" in text
        assert f"export PYTHONPATH={REPO / 'simulator'}" in text
        subprocess.run(["bash", "-n", str(path)], check=True)
        shellcheck(path)
    status, stats, _ = run_playbook(tmp_path, REPO / "playbooks" / "render.yml", inventory)
    assert status == "successful" and changed(stats) == 0


# --------------------------------------------------------------------------- role: values end to end

DUMP_MODULE = """\
import json, os, sys
with open(os.environ["ARGV_DUMP_OUT"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, fh)
"""

AWKWARD_FLAGS = {
    "--served-model-name": "glm 5 'quoted' \"double\" $HOME `date` ; echo pwned",
    "--json-model-override-args": '{"a": 1, "b": "x y"}',
    "--tokenizer-path": "/path with spaces/*",
    "--port": None,  # drop a baseline flag
}


def fixture_dirs(tmp_path: Path) -> dict:
    ml_env = tmp_path / "ml-env"
    (ml_env / "bin").mkdir(parents=True)
    (ml_env / "bin" / "activate").write_text("export FAKE_ENV_ACTIVATED=yes\n")
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "argv_dump.py").write_text(DUMP_MODULE)
    return {"ml_env": ml_env, "mods": mods, "launch": tmp_path / "launch", "dump": tmp_path / "dump.json"}


def role_vars(d: dict, **extra) -> dict:
    out = {
        "sglang_launch_tier": "t04-ep8",
        "sglang_launch_target": "sglang",
        "sglang_launch_validate_with_real_parser": False,
        "sglang_launch_dir": str(d["launch"]),
        "sglang_launch_ml_env": str(d["ml_env"]),
        "sglang_launch_interpreter": sys.executable,
        "sglang_launch_module": "argv_dump",
        "sglang_launch_pythonpath": [str(d["mods"])],
        "sglang_launch_port": 0,
        "sglang_launch_flags_override": AWKWARD_FLAGS,
        "sglang_launch_env_override": {"ARGV_DUMP_OUT": str(d["dump"]), "WEIRD": "a b'c\"$d", "NCCL_P2P_LEVEL": None},
    }
    out.update(extra)
    return out


def server_stand_in(tmp_path: Path, marker: Path) -> Path:
    """A role standing in for sglang_server: it only records that it ran."""
    roles = tmp_path / "roles"
    tasks = roles / "fake_sglang_server" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        "- name: Stand in for stopping and starting the server\n"
        f"  ansible.builtin.copy:\n    content: ran\n    dest: {json.dumps(str(marker))}\n    mode: '0640'\n"
    )
    return roles


def play(vars_: dict, roles: list[str], post_tasks: str = "") -> str:
    return (
        f"- name: Launch test\n  hosts: localhost\n  gather_facts: false\n  vars: {json.dumps(vars_)}\n"
        f"  roles: {json.dumps(roles)}\n"
        "  tasks:\n    - name: Show the result\n      ansible.builtin.debug:\n        var: sglang_launch_result\n"
        + post_tasks
    )


def test_role_renders_runs_and_is_idempotent(tmp_path):
    d = fixture_dirs(tmp_path)
    marker = tmp_path / "server-ran"
    roles = server_stand_in(tmp_path, marker)
    text = play(role_vars(d), ["sglang_launch", "fake_sglang_server"])
    status, stats, results = run_playbook(tmp_path, text, localhost_inventory(), roles_path=str(roles))
    assert status == "successful"
    assert marker.exists()  # positive control for the validate-before-stop test below
    result = results["Show the result"][0][1]["sglang_launch_result"]
    script = Path(result["script"])
    assert script == d["launch"] / "t04-ep8.sh" and stat.S_IMODE(script.stat().st_mode) == 0o750
    # the fact agrees with an independent composition of the same data
    expected = st.compose(
        __import__("yaml").safe_load((REPO / "data" / "baseline.yml").read_text()),
        __import__("yaml").safe_load((REPO / "data" / "tiers.yml").read_text())["tiers"]["t04-ep8"],
        AWKWARD_FLAGS,
        role_vars(d)["sglang_launch_env_override"],
        module="argv_dump",
    )
    assert result["argv"] == expected["argv"] and result["env"] == expected["env"]
    assert result["hash"] == st.launch_hash("argv_dump", expected["argv"], expected["env"])
    assert result["port"] is None and "--port" not in result["argv"]
    text_ = script.read_text()
    assert f"# tier hash:      sha256:{result['hash']} " in text_
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck(script)
    # run it: the Python process receives exactly the argv and env of the fact
    subprocess.run([str(script)], env={"PATH": os.environ["PATH"]}, check=True, timeout=60)
    got = json.loads(d["dump"].read_text())
    assert got["argv"] == result["argv"]
    for name, value in result["env"].items():
        assert got["env"][name] == value
    assert "NCCL_P2P_LEVEL" not in got["env"] and got["env"]["FAKE_ENV_ACTIVATED"] == "yes"
    status, stats, _ = run_playbook(tmp_path, text, localhost_inventory(), roles_path=str(roles))
    assert status == "successful" and changed(stats) == 0


def test_bad_flag_fails_before_the_server_role_runs(tmp_path):
    d = fixture_dirs(tmp_path)
    marker = tmp_path / "server-ran"
    roles = server_stand_in(tmp_path, marker)
    bad = role_vars(d, sglang_launch_flags_override={"--nsa-decode-backend": "fastest"})
    status, stats, results = run_playbook(
        tmp_path, play(bad, ["sglang_launch", "fake_sglang_server"]), localhost_inventory(), roles_path=str(roles)
    )
    assert status == "failed"
    assert not marker.exists()  # the stand-in for sglang_server never ran
    assert not (d["launch"] / "t04-ep8.sh").exists()  # nor was a script rendered
    failed = [res for evs in results.values() for ev, res in evs if ev == "runner_on_failed"]
    assert len(failed) == 1 and "--nsa-decode-backend: invalid choice 'fastest'" in failed[0]["msg"]


def test_check_mode_writes_nothing(tmp_path):
    d = fixture_dirs(tmp_path)
    text = play(role_vars(d), ["sglang_launch"])
    status, stats, results = run_playbook(tmp_path, text, localhost_inventory(), cmdline="--check")
    assert status == "successful"
    assert not d["launch"].exists()
    assert results["Show the result"][0][1]["sglang_launch_result"]["tier"] == "t04-ep8"


# --------------------------------------------------------------------------- role: rejections

FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for <ml-env>/bin/python. Asked which SGLang it has (sglang_parser_check's fingerprint,
# which reads package metadata and imports no SGLang), it answers as an install of 0.5.10.post1
# would; asked to run SGLang's prepare_server_args, it records its arguments.
case "$2" in
  *metadata.distribution*)
    echo '{{"installed": true, "version": "0.5.10.post1", "server_args": "x", "server_args_sha256": "0"}}'
    exit 0 ;;
esac
printf '%s\\0' "$@" > {calls}
if [ "${{FAKE_REJECT:-0}}" = 1 ]; then
  echo "usage: sglang serve [-h] --model-path MODEL_PATH" >&2
  echo "sglang serve: error: argument --tp-size: invalid int value: 'x'" >&2
  exit 2
fi
echo "SGLang accepted the argv: ServerArgs"
"""


def rejection_case(name: str, role_vars_: dict, tasks_from: str = "validate") -> str:
    return (
        f"    - name: Case {name}\n      block:\n"
        f"        - name: Validate {name}\n          ansible.builtin.include_role:\n"
        f"            name: sglang_launch\n            tasks_from: {tasks_from}\n"
        f"          vars: {json.dumps(role_vars_)}\n"
        f"        - name: Accepted {name}\n          ansible.builtin.debug:\n            msg: accepted\n"
        f"      rescue:\n        - name: Rejected {name}\n          ansible.builtin.debug:\n"
        '            msg: "{{ ansible_failed_result.msg }}"\n'
    )


def test_role_rejections_name_the_problem(tmp_path):
    d = fixture_dirs(tmp_path)
    calls = tmp_path / "calls.bin"
    fake_python = tmp_path / "fake-python"
    fake_python.write_text(FAKE_PYTHON.format(calls=calls))
    fake_python.chmod(0o755)
    base = role_vars(d, sglang_launch_flags_override={})
    real_parser = dict(base, sglang_launch_validate_with_real_parser=True, sglang_launch_interpreter=str(fake_python))
    cases = {
        "unknown": dict(base, sglang_launch_tier="t04-ep9"),
        "not_runnable": dict(base, sglang_launch_tier="t07-persistent-grouped-gemm"),
        "malformed_extra": dict(
            base,
            sglang_launch_tier="t12-foo",
            sglang_launch_extra_tiers={
                "t12-foo": {"title": "x", "level": 4, "runnable": True, "hypothesis": "h", "expected_impact": "e"}
            },
        ),
        "typo_flag": dict(base, sglang_launch_flags_override={"--tp-sise": 8}),
        "incompatible": dict(base, sglang_launch_flags_override={"--tp-size": 4}),
        "bad_target": dict(base, sglang_launch_target="gpu"),
        "real_parser_rejects": dict(
            real_parser, sglang_launch_env_override={"ARGV_DUMP_OUT": str(d["dump"]), "FAKE_REJECT": "1"}
        ),
        "real_parser_accepts": real_parser,
        "user_tier": dict(
            base,
            sglang_launch_tier="ep8-mscclpp",
            sglang_launch_extra_tiers={
                "ep8-mscclpp": {
                    "title": "EP8 + MSCCL++ with CUDA graphs",
                    "level": 1,
                    "runnable": True,
                    "hypothesis": "h",
                    "expected_impact": "e",
                    "flags_remove": ["--disable-cuda-graph"],
                    "flags_add": {"--ep-size": 8, "--enable-mscclpp": True},
                }
            },
        ),
    }
    text = "- name: Rejections\n  hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(
        rejection_case(name, v) for name, v in cases.items()
    )
    text += (
        "    - name: Load the catalog\n      ansible.builtin.include_role:\n        name: sglang_launch\n"
        f"        tasks_from: catalog\n      vars: {json.dumps(cases['user_tier'])}\n"
        "    - name: Show the catalog\n      ansible.builtin.debug:\n        var: sglang_launch_catalog\n"
    )
    status, _, results = run_playbook(tmp_path, text, localhost_inventory())
    assert status == "successful"

    def outcome(name):
        if f"Rejected {name}" in results:
            return "rejected", results[f"Rejected {name}"][0][1]["msg"]
        return "accepted", ""

    kind, msg = outcome("unknown")
    assert kind == "rejected" and "unknown tier 't04-ep9'" in msg and "Did you mean 't04-ep8'?" in msg
    assert "t11-column-major-xshare" in msg  # lists the known tiers
    kind, msg = outcome("not_runnable")
    assert kind == "rejected" and "is not runnable" in msg and "needs kernel work" in msg
    kind, msg = outcome("malformed_extra")
    assert kind == "rejected" and "tier 't12-foo': field 'level' must be one of 1,2,3 (got 4)" in msg
    kind, msg = outcome("typo_flag")
    assert kind == "rejected" and "--tp-sise: not an option of SGLang 0.5.10.post1; did you mean --tp-size?" in msg
    kind, msg = outcome("incompatible")
    assert kind == "rejected" and "[flashinfer-cutlass-ep-size]" in msg
    kind, msg = outcome("bad_target")
    assert kind == "rejected" and "sglang_launch_target" in msg
    kind, msg = outcome("real_parser_rejects")
    assert kind == "rejected" and "SGLang's own parser rejected tier 't04-ep8'" in msg
    assert "sglang serve: error: argument --tp-size: invalid int value: 'x'" in msg
    assert outcome("real_parser_accepts")[0] == "accepted"
    # the stand-in got `-c <code calling prepare_server_args>` followed by the composed argv
    args = calls.read_bytes().split(b"\0")[:-1]
    assert args[0] == b"-c" and b"prepare_server_args(sys.argv[1:])" in args[1]
    assert args[2:4] == [b"--model", b"lukealonso/GLM-5-NVFP4"] and b"--ep-size" in args
    assert outcome("user_tier")[0] == "accepted"
    # validation renders no script: the launch dir holds at most the parser's cache of acceptances
    assert sorted(p.name for p in d["launch"].iterdir()) == ["parser-cache"]
    assert any((d["launch"] / "parser-cache").iterdir())  # the accepted argv was kept
    summary = results["Show the catalog"][0][1]["sglang_launch_catalog"]
    assert summary["ids"][0] == "baseline" and summary["ids"][-1] == "ep8-mscclpp"
    assert "t06-l2-cache-pinning" in summary["ids"] and "t06-l2-cache-pinning" not in summary["runnable"]
    assert "ep8-mscclpp" in summary["runnable"]
