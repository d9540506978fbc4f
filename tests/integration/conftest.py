"""Fixtures only the integration tests may use: the SYNTHETIC simulator as real processes.

tests/conftest.py reads the names of the fixtures defined here and refuses a test under
tests/unit that asks for one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.processes import free_port
from helpers.sim import SimServer, make_tokenizer, manifest_for_tests, sim_env


@pytest.fixture(scope="session")
def sim_manifest() -> Path:
    """The flag manifest the simulators of this run parse their command line with."""
    return manifest_for_tests()[0]


@pytest.fixture(scope="session")
def sim_tokenizer(tmp_path_factory) -> Path:
    """The simulated model's tokenizer folder (with a synthetic ShareGPT file), written by the real CLI."""
    folder = tmp_path_factory.mktemp("model") / "sim-model"
    assert "SYNTHETIC" in make_tokenizer(folder, "--sharegpt", "60").stdout
    return folder


@pytest.fixture
def sim_start(sim_manifest, tmp_path):
    """Start simulators: ``sim_start(*argv, port=None, manifest=None, **env)`` returns a SimServer
    on a free loopback port (``manifest``: another flag manifest than ``sim_manifest``); every one
    started is SIGKILLed (process group) at teardown."""
    servers: list[SimServer] = []

    def start(*argv: str, port: int | None = None, manifest: Path | None = None, **env: str) -> SimServer:
        port = free_port() if port is None else port
        full = [*argv, "--host", "127.0.0.1", "--port", str(port)]
        server = SimServer(full, sim_env(manifest or sim_manifest, **env), tmp_path / f"sim{len(servers)}.log", port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
