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
from ansible.module_utils.sglang_parser_check import MISSING, REJECTED, answered, launch_verdict


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
    verdict, refusal = launch_verdict(p["launch"], p["cache_dir"], p["timeout"])
    if refusal:
        prefix = "sglang_launch_parse: " if refusal["kind"] == MISSING else "sglang_launch: "
        if refusal["kind"] == REJECTED:
            module.fail_json(msg=prefix + refusal["message"] + ":\n" + "\n".join(refusal["output"]), parser=verdict)
        module.fail_json(msg=prefix + refusal["message"])
    module.exit_json(
        changed=False,
        parser=verdict,
        msg="SGLang {} accepted tier '{}' ({})".format(verdict["sglang"]["version"], p["launch"]["tier"],
                                                      answered(verdict)),
    )


if __name__ == "__main__":
    main()
