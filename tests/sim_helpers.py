"""The simulator helpers now live in tests/conftest.py; this module only re-exports them.

tests/test_bench_ansible.py and tests/test_bench_client.py still ``import sim_helpers``; once
they import from conftest, this file goes. The flag manifest is the checkout's
data/flag_manifests/sglang-0.5.10.post1.json: a missing one fails the test (there is no
stand-in manifest any more).
"""

from __future__ import annotations

from conftest import PYTHON, REAL_MANIFEST, REPO, SIMULATOR, SimServer, free_port, manifest_for_tests, sim_env, wait_for

__all__ = [
    "PYTHON",
    "REAL_MANIFEST",
    "REPO",
    "SIMULATOR",
    "SimServer",
    "free_port",
    "manifest_for_tests",
    "sim_env",
    "wait_for",
]
