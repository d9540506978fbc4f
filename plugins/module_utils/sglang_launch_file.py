# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tier's launch script on the host: checked with ``bash -n``, written atomically, kept by content.

Shared by module sglang_launch_script (role sglang_launch's render step) and module
sglang_experiment_preflight, which writes the script the experiment validated in the same module
call as its checks (one module call fewer a cycle). ``launch_script_writes`` decides what to write
and ``write_all`` writes it; the text is the launch template rendered on the controller.
"""

import hashlib
import json
import os
import stat
import tempfile

from ansible.module_utils.sglang_ledger import launch_archive_paths

# What a caller passes for one script (module options of the same names).
SCRIPT_OPTIONS = dict(
    path=dict(type="path", required=True),
    content=dict(type="str", required=True),
    mode=dict(type="raw", default="0750"),
    dir_mode=dict(type="raw", default="0750"),
    archive=dict(type="bool", default=False),
    tier=dict(type="str"),
    meta=dict(type="dict", default={}),
)


def meta_document(tier, script, sha256, meta):
    """The .json's bytes: the given meta with tier, script and script_sha256, sorted, indented."""
    document = dict(meta or {})
    document.update({"tier": tier, "script": script, "script_sha256": sha256})
    return (json.dumps(document, indent=4, sort_keys=True) + "\n").encode("utf-8")


def parse_mode(value, name):
    """An octal mode given as "0750", "750" or an int (YAML 0750 is already 488)."""
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 8)
    except ValueError:
        raise ValueError(f"{name} {value!r} is not an octal mode such as '0750'") from None


def read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def mode_of(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def write_atomically(path, data, mode):
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def bash_syntax_error(run_command, data):
    """What ``bash -n`` says of ``data`` (None when it accepts it), checked from a temporary file.
    ``run_command(argv) -> (rc, out, err)`` (AnsibleModule.run_command)."""
    handle, temporary = tempfile.mkstemp(prefix="sglang-launch-", suffix=".sh")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        rc, out, err = run_command(["bash", "-n", temporary])
    finally:
        os.unlink(temporary)
    return None if rc == 0 else (err or out or f"bash -n exited {rc}").strip()


def launch_script_writes(spec, run_command):
    """What writing the script ``spec`` (SCRIPT_OPTIONS' keys) takes, without writing anything.

    Returns ``(result, writes, problem)``: ``result`` has ``path``, ``script_sha256``,
    ``script_changed``, ``changed`` and, with ``archive``, ``archived_script`` and ``archived_meta``;
    ``writes`` is ``[(path, bytes, mode)]`` (the script when its bytes or mode differ, the archive's
    files when missing or different); ``problem`` is what is wrong (a bad mode, ``bash -n``'s refusal)
    or None. Reads the files and runs ``bash -n``."""
    try:
        mode = parse_mode(spec["mode"], "mode")
        parse_mode(spec["dir_mode"], "dir_mode")
    except ValueError as exc:
        return {"path": spec["path"]}, [], str(exc)
    if spec.get("archive") and not spec.get("tier"):
        return {"path": spec["path"]}, [], "archive needs the tier"
    script = spec["content"].encode("utf-8")
    sha256 = hashlib.sha256(script).hexdigest()
    result = {"path": spec["path"], "script_sha256": sha256}
    problem = bash_syntax_error(run_command, script)
    if problem:
        return result, [], (f"bash -n refuses the rendered launch script for {spec['path']}, so it was not "
                            f"written: {problem}. The launch template (sglang_launch_template) made invalid shell.")
    writes = []
    old = read_bytes(spec["path"])
    result["script_changed"] = old != script or mode_of(spec["path"]) != mode
    if result["script_changed"]:
        writes.append((spec["path"], script, mode))
    if spec.get("archive"):
        kept_script, kept_meta = launch_archive_paths(spec["path"], spec["tier"], sha256)
        meta = meta_document(spec["tier"], spec["path"], sha256, spec.get("meta"))
        writes += [(path, data, kept_mode) for path, data, kept_mode in ((kept_script, script, 0o750),
                                                                         (kept_meta, meta, 0o640))
                   if read_bytes(path) != data]
        result.update(archived_script=kept_script, archived_meta=kept_meta)
    result["changed"] = bool(writes)
    return result, writes, None


def write_all(spec, writes):
    """Write ``writes`` (launch_script_writes'), creating the script's folder (``dir_mode``) and the
    archive's (0750) when missing. Raises OSError with the path that failed in its message."""
    dir_mode = parse_mode(spec["dir_mode"], "dir_mode")
    for path, data, file_mode in writes:
        try:
            folder = os.path.dirname(path)
            if not os.path.isdir(folder):
                os.makedirs(folder, exist_ok=True)
                os.chmod(folder, dir_mode if path == spec["path"] else 0o750)  # makedirs' mode obeys the umask
            write_atomically(path, data, file_mode)
        except OSError as exc:
            raise OSError(f"cannot write {path}: {exc}") from None
