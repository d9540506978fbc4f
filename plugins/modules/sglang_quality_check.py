#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_quality_check
short_description: Collect greedy outputs of a fixed prompt set from an SGLang server, for the output-quality check
version_added: "1.0.0"
description:
  - Sends every prompt of O(prompt_set) (data/quality.yml) to the server's native C(/generate), greedily
    (temperature 0, the set's C(max_new_tokens), C(return_logprob)), one request at a time, then once more
    with up to the set's C(batch_size) texts per request, which SGLang schedules as one batch.
  - Returns the output token ids and the log-probabilities of the chosen tokens
    (C(meta_info.output_token_logprobs)) of both passes, the batch pass held against the single one, and
    the seconds each pass took, as the record's C(quality) block (module_utils/sglang_quality.py collect).
    Module M(sglang_ledger_append) stores it and compares it with the host's latest baseline (docs/quality.md).
  - A failed request does not fail the task; the block then has C(status=failed), the error and the outputs
    collected before it, so the benchmark's record is kept. A prompt set that is not valid fails the task.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_server
options:
  prompt_set:
    description:
      - The prompt set, as data/quality.yml holds it - C(name), C(version), C(enabled), C(sampling)
        (C(temperature) 0, C(max_new_tokens), C(ignore_eos)), C(batch_size), C(timeout_s) and C(prompts)
        (C(id), C(text)).
      - With C(enabled=false) nothing is sent and the block says C(status=off).
    type: dict
    required: true
  flush_cache:
    description:
      - POST the server's C(/flush_cache) before each pass (it waits for the server to be idle), so that
        both passes start from an empty prefix cache whatever the benchmark before them left there. On real
        SGLang 0.5.17 greedy outputs of one launch moved (93.5 % token agreement) after a benchmark that
        left other prompts cached (docs/quality.md).
      - A flush that fails is recorded in C(cache_flush) and does not stop the check.
    type: bool
    default: true
seealso:
  - module: sglang_ledger_append
"""

EXAMPLES = r"""
- name: Check the outputs of the running server
  sglang_quality_check:
    port: 30000
    prompt_set: "{{ lookup('ansible.builtin.file', 'data/quality.yml') | from_yaml }}"
  register: quality
"""

RETURN = r"""
quality:
  description: The record's C(quality) block.
  returned: always
  type: dict
  contains:
    status:
      description: C(ok), C(failed) (a request failed; see C(error)) or C(off) (not enabled, or check mode).
      type: str
    prompt_set:
      description: The set's name, version, number of prompts and the sha256 of its prompts and sampling.
      type: dict
    sampling:
      description: The sampling parameters sent.
      type: dict
    batch_size:
      description: Texts per request in the batch pass.
      type: int
    seconds:
      description: Wall seconds of the single and of the batch pass.
      type: dict
    outputs:
      description: C(single) and C(batch), each a list of C(id), C(token_ids), C(logprobs), C(text), C(finish_reason).
      type: dict
    batch_vs_single:
      description: The batch pass held against the single pass (module_utils/sglang_quality.py compare).
      type: dict
    cache_flush:
      description: With O(flush_cache), the flush before each pass - C(single) and C(batch), each C(ok), C(status),
        C(attempts), C(seconds).
      type: dict
      returned: when O(flush_cache) is true and the check ran
    error:
      description: What failed (null when nothing did).
      type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_quality import STATUS_OFF, check_prompt_set, collect, flush_cache, prompt_set_identity


def main():
    module = AnsibleModule(
        argument_spec=dict(
            address=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            prompt_set=dict(type="dict", required=True),
            flush_cache=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problems = check_prompt_set(p["prompt_set"])
    if problems:
        module.fail_json(
            msg="sglang_quality_check: the prompt set is not valid: " + "; ".join(problems)
            + ". Fix data/quality.yml (docs/quality.md)."
        )
    url = f"http://{p['address']}:{p['port']}/generate"
    if not p["prompt_set"]["enabled"] or module.check_mode:
        why = "check mode: nothing sent" if module.check_mode else "off for this run (enabled: false)"
        module.exit_json(changed=False, quality={
            "status": STATUS_OFF, "prompt_set": prompt_set_identity(p["prompt_set"]), "url": url, "error": None,
            "reason": why,
        })
    base = f"http://{p['address']}:{p['port']}"
    flush = (lambda: flush_cache(base + "/flush_cache")) if p["flush_cache"] else None
    module.exit_json(changed=False, quality=collect(url, p["prompt_set"], flush=flush))


if __name__ == "__main__":
    main()
