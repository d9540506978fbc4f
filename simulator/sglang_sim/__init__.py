# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang-sim: a SYNTHETIC SGLang-protocol simulator.

It speaks SGLang's command line, process titles, log lines and HTTP API so
that the project's Ansible roles and SGLang's real benchmark client can be
exercised on a machine without a GPU. Nothing it reports is a measurement:
every number comes from the invented model in ``throughput_model.yml``.
"""

SIM_NAME = "sglang-sim"
SIM_VERSION = "0.1.0"
BANNER = (
    "[sglang-sim] SYNTHETIC SGLang-protocol simulator - not real performance, "
    "no model, no GPU work (unless SGLANG_SIM_GPU_MEM_MB is set)"
)
