#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Run one SGLang bench_serving point and return its throughput facts
description:
  - Runs SGLang's own benchmark client, C(sglang.bench_serving), for one
    concurrency point (one repeat) against a running SGLang server on the
    target host, parses the JSONL line it appends to O(output_file), and
    returns the point's throughput and latency with full provenance under
    the fact C(sglang_bench).
  - With O(mode=parse) it runs nothing and parses the last result line of an
    existing O(output_file) instead.
  - A point is C(ok) only when bench_serving's C(completed) equals
    O(num_prompts); otherwise it is C(failed) with class C(incomplete_point)
    and the counts.
  - Provenance - tier, final server argv and env, launch script sha256,
    SGLang/FlashInfer/torch/CUDA versions, C(/server_info), GPU facts from
    nvidia-smi, host, git revision, timestamps and whether the target is the
    simulator - is collected on the target host.
version_added: "1.0.0"
author:
  - SGLang lab contributors
options:
  mode:
    description:
      - C(run) runs the client; C(parse) only parses O(output_file).
    type: str
    choices: [run, parse]
    default: run
  output_file:
    description:
      - bench_serving's JSONL output file on the target host. bench_serving
        appends; only the line this run adds is parsed in C(run) mode, the
        last line in C(parse) mode.
    type: path
    required: true
  client_command:
    description:
      - The command that starts the client, before its arguments, for
        example C([/root/ml-env/bin/python, -m, sglang.bench_serving]) or
        C([<venv>/bin/python, <dir>/sglang_bench_client.py]).
      - Required when O(mode=run).
    type: list
    elements: str
  client_env:
    description:
      - Extra environment for the client, for example C(HF_HUB_OFFLINE=1).
    type: dict
    default: {}
  host:
    description: Address of the SGLang server.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the SGLang server.
    type: int
    default: 30000
  concurrency:
    description: Maximum concurrent requests (C(--max-concurrency)).
    type: int
    required: true
  num_prompts:
    description:
      - Requests sent at this point (C(--num-prompts)). Give this or
        O(num_prompts_multiplier) and O(num_prompts_floor).
    type: int
  num_prompts_multiplier:
    description:
      - With O(num_prompts_floor), num_prompts is
        max(multiplier * concurrency, floor) (data/benchmark.yml's rule).
    type: int
  num_prompts_floor:
    description: Smallest num_prompts for the rule above.
    type: int
  repeat:
    description: Index of this repeat of the point, from 0.
    type: int
    default: 0
  input_len:
    description: Input tokens per request (C(--random-input-len)).
    type: int
    required: true
  output_len:
    description: Output tokens per request (C(--random-output-len)).
    type: int
    required: true
  range_ratio:
    description: C(--random-range-ratio); 1.0 makes every request full length.
    type: float
    default: 1.0
  dataset_name:
    description: bench_serving dataset (C(random) or C(random-ids)).
    type: str
    default: random
  dataset_path:
    description: Local dataset file (the ShareGPT JSON for C(random)).
    type: path
  request_rate:
    description: C(--request-rate); C(inf) sends all requests at once.
    type: str
    default: inf
  seed:
    description: C(--seed) for prompt and length sampling.
    type: int
    default: 1
  tokenizer:
    description:
      - Tokenizer path or Hugging Face id for the client. Required when
        O(mode=run).
    type: str
  model:
    description:
      - C(--model) for the client; defaults to O(tokenizer). Also the model
        name recorded when C(/server_info) is not available.
    type: str
  served_model_name:
    description: C(--served-model-name) for the client.
    type: str
  output_details:
    description:
      - Add C(--output-details) so per-request errors are kept; the point
        then carries the most common error messages.
    type: bool
    default: false
  client_warmup_requests:
    description: bench_serving's own C(--warmup-requests) (its default is 1).
    type: int
  extra_args:
    description: More client arguments, appended last.
    type: list
    elements: str
    default: []
  timeout:
    description:
      - Seconds the client may run; then its process group is killed and
        the point fails with class C(bench_timeout).
    type: int
    default: 7200
  fail_on_incomplete:
    description:
      - Fail the task when the point is not C(ok). With C(false) the task
        succeeds and the point's C(status) and C(failure) tell.
    type: bool
    default: true
  tier:
    description: Tier id recorded in the provenance.
    type: str
  server_state:
    description: The lifecycle's C(server.json) (pid, script, started_at).
    type: path
  launch_script:
    description: The launch script; its sha256 is recorded.
    type: path
  launch_argv:
    description: Final server argv as rendered; else read from /proc.
    type: list
    elements: str
  launch_env:
    description: Server environment as rendered; secret-looking names are redacted.
    type: dict
  facts_file:
    description: Local facts file with installed versions (JSON).
    type: path
    default: /etc/ansible/facts.d/sglang_lab.fact
  ml_env_python:
    description:
      - Interpreter of the ml-env, asked for versions through
        importlib.metadata when the facts file lacks them. Defaults to the
        first element of O(client_command).
    type: path
  git_revision:
    description: The project's git revision on the controller.
    type: str
  collect_provenance:
    description: Collect provenance (server_info, versions, GPU, launch).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Returns the command it would run and runs nothing.
  diff_mode:
    support: none
  idempotent:
    support: none
    description: Every run sends load to the server and appends to O(output_file).
notes:
  - The client must exist on the target host; role sglang_bench copies
    tools/sglang_bench_client.py there for hosts without torch.
seealso:
  - module: sglang_ledger_append
  - module: sglang_warmup
"""

EXAMPLES = r"""
- name: Benchmark concurrency 256 against the local server
  sglang_bench:
    client_command: [/root/ml-env/bin/python, -m, sglang.bench_serving]
    client_env:
      HF_HUB_OFFLINE: "1"
    port: 8000
    concurrency: 256
    num_prompts: 512
    input_len: 1024
    output_len: 1024
    tokenizer: lukealonso/GLM-5-NVFP4
    output_file: /var/lib/sglang-lab/results/raw/run1/c256_r0.jsonl
    tier: baseline
    fail_on_incomplete: false

- name: Parse a result file written earlier
  sglang_bench:
    mode: parse
    output_file: /tmp/bench.jsonl
    concurrency: 10
    num_prompts: 20
    input_len: 1024
    output_len: 1024
    collect_provenance: false
"""

RETURN = r"""
ansible_facts:
  description: Facts set by this module.
  returned: always
  type: dict
  contains:
    sglang_bench:
      description: The point, its provenance and the client command.
      type: dict
      returned: always
      contains:
        point:
          description:
            - The point; null in check mode for O(mode=run). Keys follow
              bench_serving's JSONL (see docs/ledger.md) - C(output_throughput)
              and C(total_throughput) (tok/s), C(request_throughput) (req/s),
              C(mean/median/p99_ttft_ms), C(..._tpot_ms), C(..._itl_ms),
              C(..._e2e_latency_ms), C(duration) (s) - plus C(concurrency),
              C(repeat), C(num_prompts), C(completed), C(failed)
              (num_prompts - completed), C(status) (ok or failed), C(failure),
              C(started_at), C(ended_at), C(command).
          type: dict
          returned: always
          sample:
            concurrency: 1024
            repeat: 0
            num_prompts: 2048
            completed: 2048
            failed: 0
            status: ok
            output_throughput: 1520.55
            total_throughput: 3028.87
            mean_tpot_ms: 523.0
        provenance:
          description:
            - Where the number came from - tier, hostname, server_info,
              target_is_simulator, model, launch (script, script_sha256, argv,
              env), versions, gpu, git_revision, client, collected_at, and the
              reasons for anything null.
          type: dict
          returned: always
        command:
          description: The client command line (run) or null (parse).
          type: list
          returned: always
        check_mode:
          description: Whether the module ran in check mode.
          type: bool
          returned: always
point:
  description: Same as RV(ansible_facts.sglang_bench.point), also returned when the task fails.
  returned: always
  type: dict
cmd:
  description: The client command line.
  returned: when O(mode=run)
  type: list
output_tail:
  description: Last lines of the client's output.
  returned: when the client ran
  type: str
client_rc:
  description:
    - Exit status of the client (not C(rc), which Ansible would read as the
      task's own failure; the point's C(status) says whether it failed).
  returned: when the client ran
  type: int
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_bench_results import (
    PROVENANCE_ARGUMENT_SPEC,
    build_client_argv,
    collect_provenance,
    num_prompts_for,
    point_from_result,
    read_new_results,
    run_point,
    tail,
)
from ansible.module_utils.sglang_ledger import POINT_OK


def _provenance(module, client):
    p = module.params
    if not p["collect_provenance"]:
        return {"collected": False, "client": client}

    def run(argv):
        return module.run_command(argv)

    python = p["ml_env_python"] or ((p["client_command"] or [None])[0])
    return collect_provenance(
        host=p["host"],
        port=p["port"],
        tier=p["tier"],
        server_state=p["server_state"],
        launch_script=p["launch_script"],
        launch_argv=p["launch_argv"],
        launch_env=p["launch_env"],
        facts_file=p["facts_file"],
        python=python,
        run=run,
        run_command=module.run_command,
        git_revision=p["git_revision"],
        hostname=socket.gethostname(),
        model=p["model"] or p["tokenizer"],
        client=client,
    )


def main():
    argument_spec = dict(
        mode=dict(type="str", choices=["run", "parse"], default="run"),
        output_file=dict(type="path", required=True),
        client_command=dict(type="list", elements="str"),
        client_env=dict(type="dict", default={}),
        host=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        concurrency=dict(type="int", required=True),
        num_prompts=dict(type="int"),
        num_prompts_multiplier=dict(type="int"),
        num_prompts_floor=dict(type="int"),
        repeat=dict(type="int", default=0),
        input_len=dict(type="int", required=True),
        output_len=dict(type="int", required=True),
        range_ratio=dict(type="float", default=1.0),
        dataset_name=dict(type="str", default="random"),
        dataset_path=dict(type="path"),
        request_rate=dict(type="str", default="inf"),
        seed=dict(type="int", default=1),
        tokenizer=dict(type="str"),
        model=dict(type="str"),
        served_model_name=dict(type="str"),
        output_details=dict(type="bool", default=False),
        client_warmup_requests=dict(type="int"),
        extra_args=dict(type="list", elements="str", default=[]),
        timeout=dict(type="int", default=7200),
        fail_on_incomplete=dict(type="bool", default=True),
        tier=dict(type="str"),
    )
    argument_spec.update(PROVENANCE_ARGUMENT_SPEC)
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[("mode", "run", ("client_command", "tokenizer"))],
        required_one_of=[("num_prompts", "num_prompts_multiplier")],
        mutually_exclusive=[("num_prompts", "num_prompts_multiplier")],
        required_together=[("num_prompts_multiplier", "num_prompts_floor")],
        supports_check_mode=True,
    )
    p = module.params
    if p["num_prompts"] is None:
        try:
            p["num_prompts"] = num_prompts_for(p["concurrency"], p["num_prompts_multiplier"], p["num_prompts_floor"])
        except ValueError as exc:
            module.fail_json(
                msg=f"sglang_bench: {exc}; fix num_prompts in data/benchmark.yml or "
                "sglang_bench_num_prompts_multiplier/_floor."
            )
    for name in ("concurrency", "num_prompts", "input_len", "output_len", "timeout"):
        if p[name] < 1:
            module.fail_json(
                msg=f"sglang_bench: {name} must be >= 1, got {p[name]}; fix the value passed "
                f"to the module (role variable sglang_bench_{name} or data/benchmark.yml)."
            )
    if not 0.0 <= p["range_ratio"] <= 1.0:
        module.fail_json(msg="sglang_bench: range_ratio must be within [0, 1], got {}.".format(p["range_ratio"]))

    if p["mode"] == "parse":
        results = read_new_results(p["output_file"], 0)
        if not results:
            module.fail_json(
                msg="sglang_bench: no bench_serving result line in {}; run the "
                "benchmark first or point output_file at its JSONL.".format(p["output_file"])
            )
        point = point_from_result(results[-1], p["concurrency"], p["repeat"], p["num_prompts"])
        point["output_file"] = p["output_file"]
        facts = {
            "point": point,
            "provenance": _provenance(module, {"mode": "parse"}),
            "command": None,
            "check_mode": module.check_mode,
        }
        module.exit_json(changed=False, point=point, ansible_facts={"sglang_bench": facts})

    try:
        argv = build_client_argv(
            p["client_command"],
            host=p["host"],
            port=p["port"],
            concurrency=p["concurrency"],
            num_prompts=p["num_prompts"],
            input_len=p["input_len"],
            output_len=p["output_len"],
            output_file=p["output_file"],
            tokenizer=p["tokenizer"],
            dataset_name=p["dataset_name"],
            dataset_path=p["dataset_path"],
            range_ratio=p["range_ratio"],
            request_rate=p["request_rate"],
            seed=p["seed"],
            model=p["model"],
            served_model_name=p["served_model_name"],
            output_details=p["output_details"],
            warmup_requests=p["client_warmup_requests"],
            extra_args=p["extra_args"],
        )
    except ValueError as exc:
        module.fail_json(
            msg="sglang_bench: request_rate {!r} is not 'inf' or a number ({}).".format(p["request_rate"], exc)
        )
    client = {"command_prefix": list(p["client_command"]), "env": dict(p["client_env"])}

    if module.check_mode:
        facts = {"point": None, "provenance": None, "command": argv, "check_mode": True}
        module.exit_json(
            changed=True,
            cmd=argv,
            point=None,
            msg="check mode: would run {}".format(" ".join(argv)),
            ansible_facts={"sglang_bench": facts},
        )

    directory = os.path.dirname(p["output_file"])
    if directory and not os.path.isdir(directory):
        try:
            os.makedirs(directory, 0o750)
        except OSError as exc:
            module.fail_json(msg=f"sglang_bench: cannot create {directory} for the output file: {exc}")
    try:
        point, outcome = run_point(
            argv,
            p["output_file"],
            p["concurrency"],
            p["repeat"],
            p["num_prompts"],
            env=p["client_env"],
            timeout=p["timeout"],
            log_path=p["output_file"] + ".log",
        )
    except OSError as exc:
        module.fail_json(
            msg=f"sglang_bench: cannot start the client {argv[0]!r}: {exc}; check client_command "
            "(role variable sglang_bench_client).",
            cmd=argv,
        )
    facts = {
        "point": point,
        "provenance": _provenance(module, client),
        "command": argv,
        "check_mode": False,
    }
    result = dict(
        changed=True,
        cmd=argv,
        client_rc=outcome["rc"],
        point=point,
        output_tail=tail(outcome["output"], 3000),
        ansible_facts={"sglang_bench": facts},
    )
    if point["status"] != POINT_OK and p["fail_on_incomplete"]:
        module.fail_json(
            msg=(
                f"sglang_bench: concurrency {p['concurrency']} failed "
                f"({point['failure']['class']}): {point['failure']['message']}. "
                f"Client log: {outcome['log']}"
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
