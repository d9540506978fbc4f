#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_bench_standby
short_description: Start the benchmark client beside the server, so that it is imported when the server is ready
version_added: "1.0.0"
description:
  - Starts SGLang's benchmark client (tools/sglang_bench_client.py) in standby on the target
    host and returns at once. The client imports bench_serving while the server loads - about
    20 s with the full SGLang on an H200, beside the server's own 50-60 s - then waits for
    the measure step (M(sglang_bench) with O(directory) as its C(standby_dir)) to hand it the
    plan.
  - A standby client never outlives its purpose. It exits without sending anything when
    the server's pid (O(server_pid)) ends, when O(max_wait) passes, or when it is told to
    abort (O(state=absent), or a warm-up that failed). Its leash is the controller's
    ansible-playbook process when the controller runs on this host - when that process
    ends (an interrupted play), the client kills its own process group within 0.2 s.
  - The client started replaces any standby client already in O(directory).
extends_documentation_fragment:
  - sglang_lab_attributes
options:
  state:
    description:
      - C(started) starts a standby client; C(absent) ends the one in O(directory), if any.
    type: str
    choices: [started, absent]
    default: started
  directory:
    description: The standby directory (C(state.json), C(client.log), C(go.json)); created when missing.
    type: path
    required: true
  client_command:
    description:
      - The command that starts the client loader, as M(sglang_bench)'s O(client_command).
      - Required with O(state=started).
    type: list
    elements: str
  client_env:
    description: Extra environment of the client, as M(sglang_bench)'s O(client_env).
    type: dict
    default: {}
  server_pid:
    description: The server's main pid; the client exits when it ends. 0 or unset - not watched.
    type: int
  max_wait:
    description: Seconds the client waits for its plan before it exits unused.
    type: float
    default: 3600
attributes:
  check_mode:
    support: full
    details: Says what it would start and starts nothing.
  idempotent:
    support: none
    details: Each run with O(state=started) starts a new client (the one it replaces is ended).
seealso:
  - module: sglang_bench
"""

EXAMPLES = r"""
- name: Start the benchmark client beside the server
  sglang_bench_standby:
    directory: /var/lib/sglang-lab/results/standby
    client_command: [/opt/ml-env/bin/python, /opt/sglang-lab/sglang_bench_client.py, --full-sglang]
    server_pid: "{{ sglang_server_start_result['pid'] }}"
"""

RETURN = r"""
standby:
  description: The client started (C(state=started)), as M(sglang_bench) finds it.
  returned: when started
  type: dict
  contains:
    pid:
      description: The client's pid (its process group's too).
      type: int
    command:
      description: Its command line.
      type: list
      elements: str
    log:
      description: Its output, on the target host.
      type: str
    leash_pid:
      description: The controller's pid it is leashed to, null when the controller is another machine.
      type: int
ended:
  description: Whether a standby client was running and was ended (C(state=absent)).
  returned: when absent
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_bench_points import end_standby, start_standby
from ansible.module_utils.sglang_lock import find_controller


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["started", "absent"], default="started"),
            directory=dict(type="path", required=True),
            client_command=dict(type="list", elements="str"),
            client_env=dict(type="dict", default={}),
            server_pid=dict(type="int"),
            max_wait=dict(type="float", default=3600.0),
        ),
        required_if=[("state", "started", ("client_command",))],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "absent":
        if module.check_mode:
            module.exit_json(changed=False, ended=False, msg="check mode: would end the standby client, if any")
        ended = end_standby(p["directory"], "ended by sglang_bench_standby state=absent")
        module.exit_json(changed=ended, ended=ended)
    if p["max_wait"] <= 0:
        module.fail_json(msg=f"sglang_bench_standby: max_wait must be > 0, got {p['max_wait']:g}.")
    if module.check_mode:
        module.exit_json(changed=True, msg="check mode: would start {} in standby".format(
            " ".join(p["client_command"])))
    leash_pid, _created = find_controller()
    try:
        state = start_standby(
            p["client_command"],
            p["directory"],
            env=p["client_env"],
            server_pid=p["server_pid"] or None,
            leash_pid=leash_pid,
            max_wait=p["max_wait"],
        )
    except OSError as exc:
        module.fail_json(
            msg=f"sglang_bench_standby: cannot start the client {p['client_command'][0]!r}: {exc}; check "
            "client_command (role variable sglang_bench_client)."
        )
    module.exit_json(
        changed=True,
        standby={key: state[key] for key in ("pid", "command", "log", "leash_pid")},
    )


if __name__ == "__main__":
    main()
