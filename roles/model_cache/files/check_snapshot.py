"""Check that a model revision is complete in the local Hugging Face cache (role model_cache).

Run with the venv's python and HF_HOME set; HF_HUB_OFFLINE=1 makes huggingface_hub resolve the
revision from the cache alone, exactly as the SGLang server does with HF_HUB_OFFLINE=1.
Arguments: REPO_ID REVISION. Prints one JSON object; exits 1 when the snapshot is not usable.
"""

import glob
import json
import os
import sys

from huggingface_hub import snapshot_download
from huggingface_hub.constants import HF_HUB_CACHE


def main(repo_id, revision):
    report = {"repo_id": repo_id, "revision": revision, "problems": []}
    try:
        path = snapshot_download(repo_id, revision=revision, local_files_only=True)
    except Exception as exc:  # LocalEntryNotFoundError and friends: not in the cache
        report["problems"].append(f"not resolvable offline: {type(exc).__name__}: {exc}")
        return report
    report["snapshot"] = path
    report["commit"] = os.path.basename(path)

    files, size, dangling = 0, 0, []
    for root, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            if os.path.exists(full):
                files += 1
                size += os.path.getsize(full)
            else:
                dangling.append(os.path.relpath(full, path))
    report["files"] = files
    report["bytes"] = size
    if dangling:
        report["problems"].append("files whose blob is missing: " + ", ".join(sorted(dangling)))
    if not os.path.exists(os.path.join(path, "config.json")):
        report["problems"].append("config.json is missing")

    for index in glob.glob(os.path.join(path, "*.safetensors.index.json")):
        with open(index) as handle:
            shards = sorted(set(json.load(handle).get("weight_map", {}).values()))
        missing = [s for s in shards if not os.path.exists(os.path.join(path, s))]
        report.setdefault("shards", 0)
        report["shards"] += len(shards)
        if missing:
            report["problems"].append(
                f"{os.path.basename(index)} names {len(missing)} shard(s) not in the snapshot: "
                + ", ".join(missing[:10])
            )

    repo_dir = os.path.join(HF_HUB_CACHE, "models--" + repo_id.replace("/", "--"))
    incomplete = glob.glob(os.path.join(repo_dir, "blobs", "*.incomplete"))
    if incomplete:
        report["problems"].append(f"{len(incomplete)} unfinished download(s) (*.incomplete) in {repo_dir}/blobs")
    return report


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    print(json.dumps(result, sort_keys=True))
    sys.exit(1 if result["problems"] else 0)
