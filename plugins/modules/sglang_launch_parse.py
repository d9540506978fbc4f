#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_launch_parse
short_description: SGLang's own parser on a launch, run once per distinct input
version_added: "1.0.0"
description:
  - Runs C(sglang.srt.server_args.prepare_server_args(argv)) with the launch's interpreter and
    environment on the target host - SGLang's argparse parser and ServerArgs' start-up checks,
    without loading weights - and fails with SGLang's own words when it refuses the launch.
  - An acceptance is kept in O(cache_dir) under a content key - the argv, the launch's
    environment, the interpreter, the installed SGLang's version and the sha256 of its
    C(server_args.py) (read through importlib.metadata, without importing SGLang), and the
    model's C(config.json) when the model is a local folder. The same launch is then accepted
    in a fraction of a second instead of an import of SGLang (25 s on an H200); a changed
    install or argv runs the parser again. Refusals are never kept.
  - module_utils/sglang_parser_check.py says what the key does not cover.
extends_documentation_fragment:
  - sglang_lab_attributes
options:
  launch:
    description:
      - The launch, as role sglang_launch composes it (C(sglang_launch_result)); its
        C(interpreter), C(argv), C(env) and C(tier) are read.
    type: dict
    required: true
  cache_dir:
    description: Where acceptances are kept on the target host; created when needed.
    type: path
    required: true
  timeout:
    description: Seconds the parser may take.
    type: int
    default: 300
attributes:
  check_mode:
    support: full
    details: Runs the parser, which changes nothing; keeps an acceptance in the cache (a memo of SGLang's answer).
  idempotent:
    support: full
    details: Always C(changed=false).
"""

EXAMPLES = r"""
- name: Parse the argv with SGLang's prepare_server_args
  sglang_launch_parse:
    launch: "{{ sglang_launch_result }}"
    cache_dir: /var/lib/sglang-lab/run/parser-cache
"""

RETURN = r"""
parser:
  description: SGLang's verdict.
  returned: success
  type: dict
  contains:
    accepted:
      description: Always true on success.
      type: bool
    cached:
      description: The verdict came from the cache; the parser did not run.
      type: bool
    key:
      description: The content key.
      type: str
    sglang:
      description: The installed SGLang's version and the sha256 of its server_args.py.
      type: dict
    seconds:
      description: This check's wall time.
      type: float
    parser_seconds:
      description: The wall time of the parser run that gave the verdict (then or now).
      type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_parser_check import check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            launch=dict(type="dict", required=True),
            cache_dir=dict(type="path", required=True),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    p = module.params
    launch = p["launch"]
    missing = [key for key in ("interpreter", "argv", "tier") if not launch.get(key)]
    if missing:
        module.fail_json(msg="sglang_launch_parse: the launch lacks {}; pass sglang_launch_result "
                         "whole.".format(", ".join(missing)))
    tier, interpreter = launch["tier"], launch["interpreter"]
    try:
        verdict = check(interpreter, [str(a) for a in launch["argv"]], launch.get("env") or {}, p["cache_dir"],
                        p["timeout"])
    except RuntimeError as exc:
        module.fail_json(msg=f"sglang_launch: SGLang's own parser could not check tier '{tier}': {exc}")
    if not verdict["accepted"]:
        module.fail_json(
            msg="sglang_launch: SGLang's own parser rejected tier '{}' ({} -c prepare_server_args(argv), "
            "rc {}):\n{}".format(tier, interpreter, verdict["rc"], "\n".join(verdict["output"])),
            parser=verdict,
        )
    module.exit_json(
        changed=False,
        parser=verdict,
        msg="SGLang {} accepted tier '{}' ({} in {:.2f} s)".format(
            verdict["sglang"]["version"], tier, "cached verdict" if verdict["cached"] else "parser run",
            verdict["seconds"]),
    )


if __name__ == "__main__":
    main()
