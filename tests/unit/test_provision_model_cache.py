"""The model_cache role's offline check (roles/model_cache/files/check_snapshot.py) run with the
project venv's real huggingface_hub against a STAND-IN hub cache built by the molecule prepare's
script (molecule/shared/files/make-stand-in-hf-cache.py): complete, a blob missing, a shard
missing from the index, an unfinished download, and an empty cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.paths import REPO

MAKE = REPO / "molecule" / "shared" / "files" / "make-stand-in-hf-cache.py"
CHECK = REPO / "roles" / "model_cache" / "files" / "check_snapshot.py"
MODEL = "lukealonso/GLM-5-NVFP4"


@pytest.fixture
def hf_home(tmp_path):
    home = tmp_path / "hf"
    subprocess.run([sys.executable, str(MAKE), str(home / "hub"), MODEL], check=True, capture_output=True)
    return home


def repo_dir(home):
    return home / "hub" / "models--lukealonso--GLM-5-NVFP4"


def snapshot(home):
    (path,) = (repo_dir(home) / "snapshots").iterdir()
    return path


def check(home):
    env = dict(os.environ, HF_HOME=str(home), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(CHECK), MODEL, "main"], env=env, capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout)


def test_complete_snapshot_resolves_offline(hf_home):
    rc, report = check(hf_home)
    assert rc == 0, report
    assert report["problems"] == []
    assert report["snapshot"] == str(snapshot(hf_home))
    assert report["commit"] == (repo_dir(hf_home) / "refs" / "main").read_text()
    assert report["files"] == 4 and report["shards"] == 2


def test_missing_blob_is_reported(hf_home):
    os.remove(os.path.realpath(snapshot(hf_home) / "model-00002-of-00002.safetensors"))
    rc, report = check(hf_home)
    assert rc == 1
    assert any("blob is missing: model-00002-of-00002.safetensors" in p for p in report["problems"])
    assert any("names 1 shard(s) not in the snapshot" in p for p in report["problems"])


def test_shard_named_by_the_index_but_absent_is_reported(hf_home):
    os.remove(snapshot(hf_home) / "model-00001-of-00002.safetensors")
    rc, report = check(hf_home)
    assert rc == 1
    assert report["problems"] == [
        "model.safetensors.index.json names 1 shard(s) not in the snapshot: model-00001-of-00002.safetensors"
    ]


def test_unfinished_download_is_reported(hf_home):
    (repo_dir(hf_home) / "blobs" / ("0" * 64 + ".incomplete")).write_bytes(b"partial")
    rc, report = check(hf_home)
    assert rc == 1
    assert any("unfinished download" in p for p in report["problems"])


def test_empty_cache_does_not_resolve(tmp_path):
    rc, report = check(tmp_path / "empty")
    assert rc == 1
    assert report["problems"][0].startswith("not resolvable offline:")
