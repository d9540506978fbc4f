# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia-smi option of the modules that read the GPUs (gpu_facts, gpu_telemetry,
the server object of sglang_server and sglang_server_info, sglang_lab_server.server)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  nvidia_smi:
    description:
      - Command name looked up on the node's PATH, or the path of nvidia-smi (or of a stand-in
        script that prints recorded output).
    type: str
    default: nvidia-smi
"""
