#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The experiment's preflight: is the whole cycle runnable? Checked before the lock and the stop.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_experiment_preflight
short_description: Check that a whole experiment can run, before anything is stopped
version_added: "1.0.0"
description:
  - Run by role sglang_experiment's validate entry point (and playbooks/validate.yml) after the
    tier's launch is composed and before the experiment lock and the verified stop. It reads,
    and changes nothing but the launch script of O(script) - written only when every check
    passed, so a refused tier leaves no script behind - and, with O(parser), the host's memo
    of SGLang's acceptances.
  - With O(parser), the last check is SGLang's own parser on the launch
    (C(prepare_server_args(argv)) from the ml-env, module_utils/sglang_parser_check.py), run
    only when every other check passed, so nothing that needs no SGLang waits for SGLang's
    import, and answered from the host's memo when the same launch was accepted before.
  - Checks the resolved benchmark settings (role sglang_bench's C(sglang_bench_cfg)), the
    launch's C(--port) (1-65535, the port the lifecycle and the client use, not held by a
    process other than the server this host recorded), the model (a local folder with
    C(config.json) and its weights, or a Hub id complete in the HF cache offline; on the
    simulator target only the simulator's own folder may be missing), the benchmark client's
    tokenizer, the GPUs on a GPU target (enough for tensor x pipeline x data parallel size, no
    foreign compute process), free disk space for logs and results, everything the FlashInfer
    patches step needs when it will run, and flag ownership (a flag the tier changes and the
    host override overrules is refused).
  - Fails with one message that lists every problem, each naming the variable, its value and
    what to do (module_utils/sglang_preflight.py; docs/experiment.md, "Preflight").
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.run_dir
  - sglang_lab_server.psutil
  - sglang_lab_server.patterns
  - sglang_lab_nvidia_smi
options:
  tier:
    description: The tier under test.
    type: str
    required: true
  launch:
    description:
      - The composed launch, C(sglang_launch_result) of role sglang_launch (flags, flag_sources,
        flag_conflicts, model, target, env, interpreter, pythonpath, script, patches).
    type: dict
    required: true
  server_port:
    description: The port the lifecycle watches (C(sglang_server_port)).
    type: int
  bench_port:
    description: The port the benchmark client talks to (C(sglang_bench_port)).
    type: int
  bench_settings:
    description: The resolved benchmark settings, C(sglang_bench_cfg) of role sglang_bench's settings step.
    type: dict
    required: true
  bench_point_timeout_s:
    description: C(sglang_bench_point_timeout_s), checked to be an integer >= 1.
    type: raw
  bench_tokenizer:
    description: C(sglang_bench_tokenizer); null means the server's tokenizer (C(--tokenizer-path), else the model).
    type: str
  sim_model:
    description:
      - The simulator's own model folder (C(sglang_experiment_sim_model)), the only one the
        validate step generates when it is missing.
    type: path
  sim_sharegpt_conversations:
    description: Conversations in the simulator's synthetic ShareGPT file; must cover the largest point's prompts.
    type: int
  hf_home:
    description:
      - The Hugging Face home (C(sglang_lab_hf_home)), used when the launch's environment sets
        neither HF_HUB_CACHE nor HF_HOME.
    type: path
  expect_gpu:
    description: A GPU target (C(sglang_lab_expect_gpu)) - check the GPUs with nvidia-smi.
    type: bool
    default: false
  kill_by_pattern:
    description:
      - The verified stop's command-line net is on (C(sglang_server_kill_by_pattern)); a process
        it would stop holding the port or a GPU counts as the server's own.
    type: bool
    default: false
  disk_paths:
    description: Where the server log and the results are written; the nearest existing folder of each is measured.
    type: list
    elements: path
    default: []
  ledger_mode:
    description: The ledger's file mode (C(sglang_bench_ledger_mode)), checked to be octal, as the record step reads it.
    type: raw
  min_free_mib:
    description: Free MiB each of O(disk_paths) needs (C(sglang_experiment_min_free_mib)).
    type: int
    default: 1024
  apply_patches:
    description: The FlashInfer patches step will run (C(sglang_experiment_apply_patches)); check what it needs.
    type: bool
    default: false
  flashinfer_catalog:
    description: The patch catalog, C(__flashinfer_patch_catalog) of roles/flashinfer/vars/main.yml.
    type: dict
    default: {}
  flashinfer_patch_files:
    description: The patch files of the catalog present on the controller (relative to roles/flashinfer/files/patches/).
    type: list
    elements: str
    default: []
  parser:
    description:
      - Run SGLang's own parser on the launch as the last check (role sglang_experiment passes it on real SGLang
        targets, C(sglang_experiment_real_parser)); as module M(sglang_launch_parse) does, in the same module call
        as the other checks.
      - A refusal, or a parser that cannot answer (no SGLang, a timeout), is a problem (check C(real_parser)); an
        acceptance is kept under O(parser.cache_dir) by content key.
      - Unset - SGLang's parser is not run.
    type: dict
    suboptions:
      cache_dir:
        description: Where the host keeps SGLang's acceptances (C(sglang_launch_parser_cache_dir)).
        type: path
        required: true
      timeout:
        description: Seconds the parser may take (C(sglang_launch_real_parser_timeout)).
        type: int
        default: 300
  script:
    description:
      - The launch script to write (role sglang_launch's C(sglang_launch_script_file) when its caller writes the
        script - role sglang_experiment's validate step), as module M(sglang_launch_script) writes it - the same
        options, the same C(bash -n) check, atomic writes, the C(archive/) copy with O(script.meta). One module
        call for what the render step and the preflight took two.
      - C(bash -n) refusing the text is a problem like the others (check C(launch_script)); the script is written
        only when no check found a problem. RV(script_sha256) is the text's.
      - Unset - nothing is written; RV(script_sha256) is the launch's script file's, as found.
    type: dict
    suboptions:
      path:
        description: The launch script (the launch's C(script)).
        type: path
        required: true
      content:
        description: The script's text (the launch template rendered on the controller).
        type: str
        required: true
      mode:
        description: The script's mode.
        type: raw
        default: "0750"
      dir_mode:
        description: The mode of the script's directory when it is created.
        type: raw
        default: "0750"
      archive:
        description: Also keep the script by content in C(archive/) beside it, with O(script.meta).
        type: bool
        default: false
      tier:
        description: The tier id the archive's file names start with; required with O(script.archive).
        type: str
      meta:
        description: What the archive's C(.json) records besides tier, script and script_sha256.
        type: dict
        default: {}
attributes:
  check_mode:
    support: full
    details: Runs every check and C(bash -n) on O(script.content); writes nothing.
  idempotent:
    support: full
    details: Only O(script) is written, and a second run finds it as it should be.
"""

EXAMPLES = r"""
- name: Check that the whole experiment can run
  sglang_experiment_preflight:
    tier: t03-single-batch-overlap
    launch: "{{ sglang_launch_result }}"
    run_dir: /root/sglang-lab/run
    server_port: 8000
    bench_port: 8000
    bench_settings: "{{ sglang_bench_cfg }}"
    expect_gpu: true
    disk_paths: [/root/sglang-lab/logs, /root/sglang-lab/results]
"""

RETURN = r"""
problems:
  description: Every problem found, each {check, var, value, message}; the module fails when there is one.
  returned: always
  type: list
  elements: dict
checks:
  description: The checks that ran (benchmark, flag_ownership, port, model, tokenizer, disk, ledger, gpu, flashinfer).
  returned: always
  type: list
  elements: str
script_sha256:
  description:
    - sha256 of the launch script - O(script.content)'s when O(script) is given (in check mode too), else the
      launch's script file's (null when there is none).
  returned: always
  type: str
server_pids:
  description: Pids of the server this host recorded, when it runs (what the port and GPU checks count as ours).
  returned: always
  type: list
  elements: int
gpus_needed:
  description: GPUs the launch uses (tensor x pipeline x data parallel size).
  returned: always
  type: int
sim_model_complete:
  description:
    - On a simulator target that serves O(sim_model), whether that folder already holds the tokenizer and at
      least O(sim_sharegpt_conversations) conversations (the validate step generates it only when not); else null.
  returned: always
  type: bool
parser:
  description:
    - SGLang's verdict on the launch, as M(sglang_launch_parse) returns it - C(accepted), C(cached), C(key),
      C(sglang) (version, server_args_sha256), C(rc), C(output), C(seconds).
  returned: when O(parser) is given and every other check passed
  type: dict
script:
  description:
    - What writing O(script) took, as M(sglang_launch_script) returns it - C(path), C(script_sha256),
      C(script_changed), C(changed) and, with O(script.archive), C(archived_script) and C(archived_meta). In check
      mode what it would write.
  returned: when O(script) is given and every check passed
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.sglang_launch_file import SCRIPT_OPTIONS, launch_script_writes, write_all
from ansible.module_utils.sglang_parser_check import REJECTED, UNANSWERED, answered, launch_verdict
from ansible.module_utils.sglang_preflight import (
    PROBE,
    benchmark_problems,
    context_problems,
    corpus_problems,
    dataset_problems,
    disk_problems,
    flag_conflict_problems,
    flashinfer_problems,
    format_problems,
    gpu_problems,
    gpus_needed,
    hub_cache_dir,
    hub_ids,
    largest_point_prompts,
    launch_port,
    ledger_mode_problems,
    model_problems,
    our_pids,
    port_problems,
    problem,
    sim_model_complete,
    stop_patterns,
    tokenizer_problems,
)
from ansible.module_utils.sglang_process import (
    STATE_NAME,
    file_sha256_or_none,
    port_holders,
    port_is_free,
    psutil,
    read_json,
)

try:
    from ansible.module_utils.nvidia_smi import gpu_snapshot

    HAS_NVIDIA_SMI_UTILS = True
except ImportError:
    HAS_NVIDIA_SMI_UTILS = False


def _cmdline(pid):
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return None


def _probe(module, launch, request):
    """Ask the ml-env (the launch's interpreter and environment) about FlashInfer and the HF cache."""
    python = launch.get("interpreter") or os.path.join(launch.get("ml_env") or "", "bin", "python3")
    env = {str(k): str(v) for k, v in (launch.get("env") or {}).items()}
    env["HF_HUB_OFFLINE"] = "1"
    if launch.get("pythonpath"):
        env["PYTHONPATH"] = ":".join(launch["pythonpath"] + [p for p in [env.get("PYTHONPATH")] if p])
    rc, out, err = module.run_command([python, "-c", PROBE, json.dumps(request)], environ_update=env)
    if rc != 0:
        return None, f"{python} -c <probe> exited {rc}: {(err or out or '').strip()[-400:]}"
    try:
        return json.loads(out.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, f"{python} printed no answer: {out[-300:]!r}"


def _real_parser(launch, settings):
    """SGLang's verdict on the launch (module_utils/sglang_parser_check.py): ``(verdict or None, problems)``."""
    verdict, refusal = launch_verdict(launch, settings["cache_dir"], settings["timeout"])
    if not refusal:
        return verdict, []
    text = refusal["message"]
    if refusal["kind"] == REJECTED:
        text += ": " + " | ".join(refusal["output"])
    elif refusal["kind"] == UNANSWERED:
        text += "."
    return verdict, [problem("real_parser", refusal["var"], refusal["value"], text)]


def main():
    argument_spec = dict(
        tier=dict(type="str", required=True),
        launch=dict(type="dict", required=True),
        run_dir=dict(type="path", required=True),
        server_port=dict(type="int"),
        bench_port=dict(type="int"),
        bench_settings=dict(type="dict", required=True),
        bench_point_timeout_s=dict(type="raw"),
        bench_tokenizer=dict(type="str"),
        sim_model=dict(type="path"),
        sim_sharegpt_conversations=dict(type="int"),
        hf_home=dict(type="path"),
        expect_gpu=dict(type="bool", default=False),
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        kill_by_pattern=dict(type="bool", default=False),
        patterns=dict(type="list", elements="str"),
        disk_paths=dict(type="list", elements="path", default=[]),
        min_free_mib=dict(type="int", default=1024),
        ledger_mode=dict(type="raw"),
        apply_patches=dict(type="bool", default=False),
        flashinfer_catalog=dict(type="dict", default={}),
        flashinfer_patch_files=dict(type="list", elements="str", default=[]),
        script=dict(type="dict", options=SCRIPT_OPTIONS),
        parser=dict(type="dict", options=dict(cache_dir=dict(type="path", required=True),
                                              timeout=dict(type="int", default=300))),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))
    p = module.params
    launch = p["launch"]
    flags = launch.get("flags") or {}
    cfg = p["bench_settings"]
    simulator = launch.get("target") == "simulator"
    problems, checks = [], []

    def run(name, found):
        checks.append(name)
        problems.extend(found)

    # Benchmark settings, as the measure step will use them.
    generated = None
    if simulator and p["sim_model"] and launch.get("model") == p["sim_model"]:
        generated = os.path.join(p["sim_model"], "synthetic_sharegpt.json")
    conversations = p["sim_sharegpt_conversations"] if generated and cfg.get("dataset_path") == generated else None
    run("benchmark", benchmark_problems(cfg, p["bench_point_timeout_s"], conversations)
        + dataset_problems(cfg.get("dataset_path"), generated=generated)
        + corpus_problems(cfg, largest_point_prompts(cfg))
        + context_problems(cfg, launch))

    # Flag ownership: the tier's changes must be what runs.
    run("flag_ownership", flag_conflict_problems(p["tier"], launch.get("flag_conflicts")))

    # The port, and whose it is.
    state = read_json(os.path.join(p["run_dir"], STATE_NAME)) or {}
    pids = our_pids(state)
    compiled = stop_patterns(p["kill_by_pattern"], p["patterns"])
    port = launch_port(launch)
    holders = port_holders(port) if port and not port_is_free(port) else []
    run("port", port_problems(launch, p["server_port"], p["bench_port"], holders, pids, state, compiled))

    # The ml-env's answers: huggingface_hub's offline lookup, and FlashInfer for the patches step.
    tokenizer = p["bench_tokenizer"] or flags.get("--tokenizer-path") or launch.get("model")
    tokenizer_source = (
        "sglang_bench_tokenizer" if p["bench_tokenizer"]
        else "the launch's --tokenizer-path" if flags.get("--tokenizer-path")
        else "the launch's model, sglang_bench_tokenizer being null"
    )
    cache = hub_cache_dir(launch.get("env"), p["hf_home"])
    revision = flags.get("--revision")
    request = {
        "hub": [
            {"id": rid, "cache_dir": cache, "revision": revision if rid == launch.get("model") else None}
            for rid in hub_ids(launch, tokenizer)
        ],
        "flashinfer": p["apply_patches"],
    }
    answer, probe_error = ({}, None)
    if request["hub"] or request["flashinfer"]:
        answer, probe_error = _probe(module, launch, request)
        if probe_error:
            run("ml_env", [problem(
                "ml_env", "sglang_lab_ml_env", launch.get("interpreter"),
                f"the ml-env's interpreter could not be asked about the model cache and FlashInfer: {probe_error}. "
                "Fix sglang_lab_ml_env (playbooks/provision.yml builds it).",
            )])
            answer = {}
    hub = answer.get("hub")

    found = model_problems(launch, p["sim_model"], hub, cache)
    run("model", found)
    # The model's own problem already says what is missing when the client would load the same thing.
    if not (found and tokenizer == launch.get("model")):
        run("tokenizer", tokenizer_problems(tokenizer, tokenizer_source, launch, p["sim_model"], hub, cache))
    run("disk", disk_problems(p["disk_paths"], p["min_free_mib"]))
    run("ledger", ledger_mode_problems(p["ledger_mode"]))

    needed = gpus_needed(flags)
    if p["expect_gpu"]:
        if HAS_NVIDIA_SMI_UTILS:
            snapshot = gpu_snapshot(module.run_command, p["nvidia_smi"])
        else:
            snapshot = {"available": False, "error": "module_utils nvidia_smi is not installed"}
        run("gpu", gpu_problems(snapshot, needed, pids, launch.get("env"), compiled, _cmdline))

    # The launch script's text: bash -n, and what writing it takes (written below, only when no check failed).
    script, writes = None, []
    if p["script"]:
        script, writes, refused = launch_script_writes(p["script"], module.run_command)
        run("launch_script", [problem("launch_script", "sglang_launch_template", p["script"]["path"], refused)]
            if refused else [])

    if p["apply_patches"] and not probe_error:
        run("flashinfer", flashinfer_problems(
            answer.get("flashinfer"), p["flashinfer_catalog"], launch.get("patches") or [],
            p["flashinfer_patch_files"], file_sha256_or_none,
        ))

    result = dict(
        changed=False,
        problems=problems,
        checks=checks,
        script_sha256=(script or {}).get("script_sha256") if p["script"]
        else file_sha256_or_none(launch["script"]) if launch.get("script") else None,
        sim_model_complete=(sim_model_complete(p["sim_model"], p["sim_sharegpt_conversations"] or 0)
                            if generated else None),
        server_pids=sorted(pids),
        gpus_needed=needed,
    )
    # SGLang's own parser last, only when nothing else is wrong: no other problem waits for its import.
    if p["parser"] and not problems:
        checks.append("real_parser")
        result["parser"], found = _real_parser(launch, p["parser"])
        problems.extend(found)
    if problems:
        module.fail_json(msg=format_problems(problems), **result)
    if p["script"]:
        result["script"] = script
        if writes and not module.check_mode:
            try:
                write_all(p["script"], writes)
            except OSError as exc:
                module.fail_json(msg=f"sglang_experiment_preflight: the launch script: {exc}", **result)
        result["changed"] = bool(writes)
    said = ""
    if result.get("parser"):
        verdict = result["parser"]
        said = "; SGLang {} accepted it ({})".format(verdict["sglang"]["version"], answered(verdict))
    module.exit_json(msg=f"tier {p['tier']}: every preflight check passed ({', '.join(checks)}){said}", **result)


if __name__ == "__main__":
    main()
