# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options shared by the modules that talk to, or manage, the SGLang server.

DOCUMENTATION: the server's HTTP address, for clients of a running server (sglang_warmup,
sglang_bench, sglang_slo_search). The named fragments serve the lifecycle modules: ``.server``
(the server object that sglang_server and sglang_server_info take whole; its argument spec is
SERVER_SPEC in module_utils/sglang_server_ops.py), ``.run_dir`` (the run-state directory, for
sglang_server_lock and sglang_experiment_preflight), ``.psutil`` (the requirement of the modules
that find, signal or probe the server's processes), ``.port`` (the port of the managed server,
required), ``.health`` (the health probe) and ``.patterns`` (the command lines of SGLang server
processes).
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  address:
    description: Address of the SGLang server, as the target host reaches it (never the inventory host name).
    type: str
    default: 127.0.0.1
  port:
    description: Port of the SGLang server.
    type: int
    default: 30000
"""

    SERVER = r"""
options:
  server:
    description:
      - The managed SGLang server, one object wherever it enters (role C(sglang_server) builds it
        once from its variables, C(sglang_server_object)); validated by one argument spec,
        C(SERVER_SPEC) in C(plugins/module_utils/sglang_server_ops.py).
    type: dict
    required: true
    suboptions:
      run_dir:
        description:
          - The server's run-state directory (role variable C(sglang_server_run_dir)) - C(sglang.pid),
            C(server.json), C(server.exit), C(wait_ready.json) and the experiment lock C(sglang.lock).
        type: path
        required: true
      port:
        description: The server's HTTP port (role variable C(sglang_server_port)).
        type: int
        required: true
      address:
        description: The address the server answers on, for its health endpoint (never the inventory host).
        type: str
        default: 127.0.0.1
      log_dir:
        description: Where C(state=started) writes the server log, C(<log_dir>/<tier>.log); required by it.
        type: path
      log_keep:
        description: Rotated logs of the same tier to keep (C(<tier>.log.1) ...).
        type: int
        default: 5
      patterns:
        description:
          - Python regexes searched (C(re.search)) in a process's command line, joined with spaces,
            that mark it as part of an SGLang server.
          - When not set, the built-in list, C(KILL_PATTERNS) in C(plugins/module_utils/sglang_process.py).
            An empty list matches nothing.
        type: list
        elements: str
      health_paths:
        description: Health endpoints in order of preference; a 404 moves to the next one.
        type: list
        elements: str
        default: [/health_generate, /health]
      health_timeout_seconds:
        description: Timeout of one health request.
        type: float
        default: 10.0
      gpu_check:
        description: Read GPU memory with nvidia-smi (the stop's verification, the info's table).
        type: bool
        default: true
      nvidia_smi:
        description: The nvidia-smi executable.
        type: str
        default: nvidia-smi
"""

    READY = r"""
options:
  ready:
    description:
      - How the ready-wait proceeds (M(sglang_server) C(state=ready)), and how
        M(sglang_server_info) reads a dead server's log (its C(classify) option).
    type: dict
    default: {}
    suboptions:
      signatures:
        description:
          - The crash-signature catalog, a list of entries (class, regex, fatal, explanation, remedy,
            optional after / near). Required by C(state=ready) and by classify.
        type: list
        elements: dict
      timeout_seconds:
        description: The hard cap - total seconds from the server's start until it counts as hung.
        type: float
        default: 3600.0
      stall_timeout_seconds:
        description:
          - Seconds the log may go without progress before the server counts as hung, below the hard
            cap (any new line but health/info access lines, or a redrawn progress bar is progress).
            0 disables it.
        type: float
        default: 600.0
      window_seconds:
        description: Return after this many seconds with RV(pending) to report progress; 0 waits in one call.
        type: float
        default: 0.0
      interval_seconds:
        description: Seconds between two looks at log, process and health.
        type: float
        default: 0.25
      linger_seconds:
        description: Seconds to keep reading after the first fatal line, so the excerpt holds the rest of the crash.
        type: float
        default: 0.5
      excerpt_before:
        description: Log lines before the matching line in RV(excerpt).
        type: int
        default: 30
      excerpt_after:
        description: Log lines after the matching line in RV(excerpt).
        type: int
        default: 10
"""

    RUN_DIR = r"""
options:
  run_dir:
    description:
      - The server's run-state directory (role variable C(sglang_server_run_dir)), written by
        M(sglang_server) (C(state=started)) and read by the other lifecycle modules - C(sglang.pid),
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
