# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options shared by the modules that talk to, or manage, the SGLang server.

DOCUMENTATION: the server's HTTP address, for clients of a running server (sglang_warmup,
sglang_bench, sglang_slo_search). The named fragments serve the lifecycle modules (sglang_server_*):
``.run_dir`` (the run-state directory), ``.psutil`` (the requirement of the modules that find,
signal or probe the server's processes: sglang_server_start, _stop, _wait_ready, _status and
sglang_experiment_preflight; sglang_server_lock states its own, optional use), ``.port`` (the
port of the managed server, required), ``.health`` (the health probe) and ``.patterns`` (the
command lines of SGLang server processes).
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  host:
    description: Address of the SGLang server.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the SGLang server.
    type: int
    default: 30000
"""

    RUN_DIR = r"""
options:
  run_dir:
    description:
      - The server's run-state directory (role variable C(sglang_server_run_dir)), written by
        M(sglang_server_start) and read by the other lifecycle modules - C(sglang.pid),
        C(server.json), C(server.exit), C(wait_ready.json) and the experiment lock C(sglang.lock).
    type: path
    required: true
"""

    # No options: the requirement only (a fragment needs options or attributes).
    PSUTIL = r"""
options: {}
requirements:
  - psutil (on the host that runs the server)
"""

    PORT = r"""
options:
  port:
    description: The server's HTTP port (role variable C(sglang_server_port)).
    type: int
    required: true
"""

    HEALTH = r"""
options:
  host:
    description: Address to probe the health endpoint on.
    type: str
    default: 127.0.0.1
  health_paths:
    description: Health endpoints in order of preference; a 404 moves to the next one.
    type: list
    elements: str
    default: [/health_generate, /health]
"""

    PATTERNS = r"""
options:
  patterns:
    description:
      - Python regexes searched (C(re.search)) in a process's command line, joined with spaces,
        that mark it as part of an SGLang server.
      - When not set, the built-in list, C(KILL_PATTERNS) in
        C(plugins/module_utils/sglang_process.py) - SGLang's process titles
        (C(sglang::scheduler*), C(sglang::detokenizer), C(sglang::data_parallel_controller),
        C(sglang::tokenizer_worker)), C(python -m sglang.launch_server), C(sglang serve) and the
        simulator's C(python -m sglang_sim.launch_server). An empty list matches nothing.
    type: list
    elements: str
"""
