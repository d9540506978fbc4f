"""The FlashInfer patch catalog against the REAL pinned wheel (flashinfer-python 0.6.7.post3 from
PyPI, fetched once into .cache/ by `make flashinfer-wheel`): each original file's sha256 matches
the catalog and the wheel's RECORD, each patch applies with exact context, gives the catalog's
patched sha256 and the marker, and reverting it gives the original bytes back.

The hunks are applied by a small exact-context applier here (no fuzz, no offset), independent
of the role, which uses patch(1) in the molecule scenario provision (its verify)."""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile

import pytest
import yaml
from helpers.paths import REPO

CATALOG = yaml.safe_load((REPO / "data" / "flashinfer_patches.yml").read_text())["patches"]
PATCHES = REPO / "roles" / "flashinfer" / "files" / "patches"
VERSION = "0.6.7.post3"
CACHE = REPO / ".cache" / "flashinfer-wheels"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@pytest.fixture(scope="module")
def wheel():
    """The pinned wheel `make unit` fetched (target flashinfer-wheel). A unit test makes no network
    call; a missing wheel is set-up that did not run, so the test fails and says how to fix it."""
    found = sorted(CACHE.glob(f"flashinfer_python-{VERSION}-*.whl"))
    if not found:
        pytest.fail(f"no flashinfer-python=={VERSION} wheel in {CACHE}; `make flashinfer-wheel` fetches it "
                    "(make unit and make test do so first)")
    return zipfile.ZipFile(found[0])


def apply(text, patch, reverse=False):
    """Apply a one-file unified diff with exact context; return the new text."""
    lines = text.splitlines(keepends=True)
    out, pos = [], 0
    body = patch.splitlines(keepends=True)
    i = next(n for n, line in enumerate(body) if line.startswith("@@"))
    while i < len(body):
        match = HUNK.match(body[i])
        assert match, body[i]
        start = int(match.group(3 if reverse else 1)) - 1
        old, new = [], []
        i += 1
        while i < len(body) and not body[i].startswith("@@"):
            tag, line = body[i][0], body[i][1:]
            if tag in " -+":
                if tag != ("-" if reverse else "+"):
                    old.append(line)
                if tag != ("+" if reverse else "-"):
                    new.append(line)
            i += 1
        assert lines[start:start + len(old)] == old, f"hunk at line {start + 1} does not match"
        out += lines[pos:start] + new
        pos = start + len(old)
    return "".join(out + lines[pos:])


def sha256(data):
    return hashlib.sha256(data.encode()).hexdigest()


@pytest.mark.parametrize("patch_id", sorted(CATALOG))
def test_patch_applies_and_reverts_on_the_real_wheel(wheel, patch_id):
    entry = CATALOG[patch_id]
    assert entry["flashinfer_version"] == VERSION
    original = wheel.read(entry["file"]).decode()
    record = wheel.read(f"flashinfer_python-{VERSION}.dist-info/RECORD").decode()
    (recorded,) = re.findall(rf"^{re.escape(entry['file'])},sha256=([^,]+),", record, re.M)
    digest = base64.urlsafe_b64encode(hashlib.sha256(original.encode()).digest()).rstrip(b"=").decode()
    assert digest == recorded, "the wheel's RECORD disagrees with the file"
    assert sha256(original) == entry["original_sha256"]

    patch = (PATCHES / entry["patch"]).read_text()
    patched = apply(original, patch)
    assert sha256(patched) == entry["patched_sha256"]
    assert entry["marker"] in patched and entry["marker"] not in original
    assert apply(patched, patch, reverse=True) == original


def test_patched_code_still_compiles(wheel):
    for entry in CATALOG.values():
        patched = apply(wheel.read(entry["file"]).decode(), (PATCHES / entry["patch"]).read_text())
        compile(patched, entry["file"], "exec")


def test_get_cuda_version_patch_reads_torch_before_nvcc(wheel):
    entry = CATALOG["flashinfer-get-cuda-version-torch"]
    patched = apply(wheel.read(entry["file"]).decode(), (PATCHES / entry["patch"]).read_text())
    body = patched[patched.index("def get_cuda_version()"):patched.index("def is_cuda_version_at_least")]
    assert body.index("return Version(torch.version.cuda)") < body.index('subprocess.check_output([nvcc, "--version"]')


def test_fp4_quantize_patch_disables_dynamo_outermost(wheel):
    entry = CATALOG["flashinfer-fp4-quantize-compiler-disable"]
    patched = apply(wheel.read(entry["file"]).decode(), (PATCHES / entry["patch"]).read_text())
    assert re.search(r"@torch\.compiler\.disable\n@flashinfer_api\ndef fp4_quantize\(", patched)
