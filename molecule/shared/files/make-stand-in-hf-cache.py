"""Build a STAND-IN Hugging Face hub cache folder for a model (molecule test only).

The layout is huggingface_hub's (blobs/ named by hash, refs/<branch> holding the commit,
snapshots/<commit>/<file> as relative links to ../../blobs/<hash>), so huggingface_hub
resolves it offline like a real download. The files are small placeholders marked STAND-IN:
a config.json, a model.safetensors.index.json naming two shards, and the two shards.
Usage: python3 make-stand-in-hf-cache.py HUB_DIR ORG/NAME
"""

import hashlib
import json
import os
import sys

hub, repo_id = sys.argv[1], sys.argv[2]
repo_dir = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
commit = hashlib.sha1(("stand-in " + repo_id).encode()).hexdigest()
shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
files = {
    "config.json": json.dumps(
        {"STAND-IN": "molecule test placeholder, not the model's config", "model_type": "stand-in"}, indent=2
    ).encode(),
    "model.safetensors.index.json": json.dumps(
        {"metadata": {"STAND-IN": True}, "weight_map": {"layer.0.weight": shards[0], "layer.1.weight": shards[1]}},
        indent=2,
    ).encode(),
    shards[0]: b"STAND-IN shard 1 (placeholder bytes, not safetensors)\n" * 64,
    shards[1]: b"STAND-IN shard 2 (placeholder bytes, not safetensors)\n" * 64,
}

for sub in ("blobs", "refs", os.path.join("snapshots", commit)):
    os.makedirs(os.path.join(repo_dir, sub), exist_ok=True)
for name, data in files.items():
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(repo_dir, "blobs", digest), "wb") as handle:
        handle.write(data)
    link = os.path.join(repo_dir, "snapshots", commit, name)
    if not os.path.islink(link):
        os.symlink(os.path.join("..", "..", "blobs", digest), link)
with open(os.path.join(repo_dir, "refs", "main"), "w") as handle:
    handle.write(commit)
print(json.dumps({"repo_dir": repo_dir, "commit": commit, "files": sorted(files)}))
