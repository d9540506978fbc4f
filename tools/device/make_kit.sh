#!/usr/bin/env bash
# Build, on this machine (it needs PyPI), what `make real-gpu-check` needs on the lent H200:
#   .whl/         the wheel set real SGLang 0.5.17 needs there (../shared/real-sglang/build_wheelhouse.sh),
#                 without zstandard (a stand-in below; the set must fit the 64 MiB carry)
#   .awhl/        ansible-core and resolvelib, pinned as in constraints.txt (the image has jinja2,
#                 PyYAML, packaging and psutil already)
#   .device-kit/  the recipe: stand-in packages, the prebuilt sm90 JIT cache, the tiny-model builder
# All three are git-ignored; carry them to the device: carry [".whl", ".awhl", ".device-kit"].
set -euo pipefail
cd "$(dirname "$0")/../.."
RECIPE=${RECIPE:-../shared/real-sglang}
PY=${PY:-.venv/bin/python}
[ -d "$RECIPE" ] || { echo "make_kit: no recipe at $RECIPE (shared/real-sglang beside the checkout)" >&2; exit 1; }
if [ ! -f .whl/.built ]; then
  bash "$RECIPE/build_wheelhouse.sh" .whl /tmp/sgl-dl
  rm -f .whl/zstandard-*.whl
  touch .whl/.built
fi
# SGLang's diffusion runtime (sglang/multimodal_gen, 2.4 MB of the wheel) is left out: only `sglang serve`
# of a diffusion model imports it, never sglang.launch_server, and the working tree travels beside the kit
# under the same 64 MiB. The wheel's RECORD loses the same lines, so what pip installs matches it.
"$PY" - .whl/sglang-*.whl <<'STRIP'
import os, sys, zipfile
path = sys.argv[1]
drop = "sglang/multimodal_gen/"
with zipfile.ZipFile(path) as src:
    if not any(i.filename.startswith(drop) for i in src.infolist()):
        sys.exit(0)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(drop):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(drop.encode()))
            dst.writestr(info, data)
os.replace(tmp, path)
STRIP
pin() { grep -i "^$1==" constraints.txt | cut -d= -f3; }
mkdir -p .awhl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .awhl \
  "ansible-core==$(pin ansible-core)" "resolvelib==$(pin resolvelib)"
rm -rf .device-kit && mkdir -p .device-kit
cp -r "$RECIPE"/stubs "$RECIPE"/jitcache-*.tgz "$RECIPE"/make_tiny_llama.py "$RECIPE"/env.sh .device-kit/
cp -r tools/device/stubs/. .device-kit/stubs/
# The device's copy of the tree has no .git: the ledger's git revision travels with the kit.
git describe --always --dirty --abbrev=12 > .device-kit/git-revision
chmod -R u+w .device-kit
du -cb .whl/*.whl .awhl/*.whl .device-kit | tail -1 | awk '{printf "kit: %.1f MB to carry\n", $1/1e6}'
