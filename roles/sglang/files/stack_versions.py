"""Print the ML stack's versions as JSON (role sglang, run with the venv's python).

Reads package metadata only (no import), so it works where torch is absent.
Arguments: the CUDA home whose nvcc is asked for its release.
"""

import importlib.metadata as md
import json
import os
import re
import subprocess
import sys


def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def nvcc_release(cuda_home):
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    return match.group(2) if match else None


print(json.dumps({
    "sglang": version("sglang"),
    "flashinfer": version("flashinfer-python"),
    "flashinfer_cubin": version("flashinfer-cubin"),
    "torch": version("torch"),
    "cuda": nvcc_release(sys.argv[1]),
    "python": ".".join(str(part) for part in sys.version_info[:3]),
}, sort_keys=True))
