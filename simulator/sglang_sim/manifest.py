# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the simulator's command line from a flag manifest.

The manifest (``data/flag_manifests/sglang-<version>.json``, written by
``tools/build_flag_manifest.py`` from SGLang's own ``server_args.py``) lists
every option of ``python -m sglang.launch_server``. The simulator accepts
exactly those options, so a launch script that works here parses the same way
on the GPU node, and a flag SGLang does not know fails here as it fails there.

Pure functions only; ``launch_server`` wires them to ``sys.argv``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

DEFAULT_SGLANG_VERSION = "0.5.10.post1"
ENV_MANIFEST = "SGLANG_SIM_MANIFEST"
PROG = "launch_server.py"  # what argparse prints for `python -m sglang.launch_server`
PORT_MIN, PORT_MAX = 1, 65535

# ServerArgs.from_cli_args renames these argparse dests (first long flag wins
# in argparse: --tensor-parallel-size/--tp-size -> tensor_parallel_size).
CLI_DEST_RENAMES = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
}

_PACKAGE_DIR = Path(__file__).resolve().parent


class ManifestError(Exception):
    """The flag manifest is missing or malformed."""


def default_manifest_paths(version: str = DEFAULT_SGLANG_VERSION) -> list[Path]:
    """Where the manifest is looked for when SGLANG_SIM_MANIFEST is unset.

    First the repository's data/ (simulator/sglang_sim -> repo root), then a
    copy shipped beside the package (for a simulator copied to another host).
    """
    name = f"sglang-{version}.json"
    return [
        _PACKAGE_DIR.parent.parent / "data" / "flag_manifests" / name,
        _PACKAGE_DIR / "flag_manifests" / name,
    ]


def resolve_manifest_path(environ: dict[str, str] | None = None) -> Path:
    """Return the manifest path from SGLANG_SIM_MANIFEST or the defaults.

    Raises ManifestError with a one-line message when no file exists.
    """
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_MANIFEST)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ManifestError(
                f"{ENV_MANIFEST}={explicit} does not name a file; point it at a "
                "flag manifest (tools/build_flag_manifest.py writes one)"
            )
        return path
    candidates = default_manifest_paths()
    for path in candidates:
        if path.is_file():
            return path
    raise ManifestError(
        "no flag manifest found (looked at "
        + ", ".join(str(p) for p in candidates)
        + f"); build it with tools/build_flag_manifest.py or set {ENV_MANIFEST}"
    )


def load_manifest(path: Path) -> dict[str, Any]:
    """Read and check a manifest file. Raises ManifestError (one line)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read flag manifest {path}: {exc}") from exc
    check_manifest(data, str(path))
    return data


def check_manifest(data: Any, where: str = "manifest") -> None:
    """Raise ManifestError unless ``data`` has the shape the contract names."""
    if not isinstance(data, dict) or not isinstance(data.get("options"), list):
        raise ManifestError(f"{where}: expected an object with an 'options' list")
    if not data.get("sglang_version"):
        raise ManifestError(f"{where}: 'sglang_version' is missing")
    for index, option in enumerate(data["options"]):
        flags = option.get("flags") if isinstance(option, dict) else None
        if not flags or not all(isinstance(f, str) and f.startswith("-") for f in flags):
            raise ManifestError(f"{where}: options[{index}] has no usable 'flags'")
        if not option.get("dest"):
            raise ManifestError(f"{where}: options[{index}] ({flags[0]}) has no 'dest'")


# --- value types --------------------------------------------------------------


def human_readable_int(value: str) -> int:
    """SGLang's human_readable_int: 1k, 25.6k, 1M, 1Ki, 1Mi, plain ints."""
    text = value.strip()
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suffix, mult in iec.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * mult
    for suffix, mult in si.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * mult)
    return int(text)


def nullable_str(value: str) -> str | None:
    """SGLang's nullable_str: empty or 'None' means None."""
    if not value or value == "None":
        return None
    return value


def json_value(value: str) -> Any:
    """SGLang's json.loads / json_list_type arguments."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON value: {value!r}") from exc


human_readable_int.__name__ = "int"  # argparse says "invalid int value"
json_value.__name__ = "json"

_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "human_readable_int": human_readable_int,
    "nullable_str": nullable_str,
    "json": json_value,
    "json.loads": json_value,
    "loads": json_value,
    "json_list_type": json_value,
}


def value_type(name: Any) -> Callable[[str], Any]:
    """Map a manifest type name to a converter; unknown names parse as str."""
    return _TYPES.get(str(name), str) if name else str


# --- deprecation --------------------------------------------------------------


def deprecation_message(option_string: str, option: dict[str, Any]) -> str:
    """The text SGLang's DeprecatedAction / DeprecatedStoreTrueAction logs."""
    if _stores_true(option):
        new_flag = option.get("replacement")
        tail = f" Use '{new_flag}' instead." if new_flag else ""
        return f"'{option_string}' is deprecated and will be removed in a future release.{tail}"
    return (
        f"The command line argument '{option_string}' is deprecated and will be "
        "removed in future versions."
    )


def sglang_warning_text(message: str) -> str:
    """SGLang's print_deprecated_warning wraps the text in bold yellow."""
    return f"\033[1;33m{message}\033[0m"


def is_deprecated_action(option: dict[str, Any]) -> bool:
    """SGLang warns at parse time only for its Deprecated*Action options.

    Options whose help text alone says "deprecated" (the manifest marks them
    ``deprecated`` with ``deprecated_by: help``) parse with their own action.
    """
    return bool(option.get("deprecated")) and "deprecated" in str(option.get("action") or "").lower()


def _stores_true(option: dict[str, Any]) -> bool:
    return "storetrue" in str(option.get("action") or "").lower().replace("_", "")


# ServerArgs._handle_deprecated_args: warnings SGLang logs after parsing.
_DEPRECATED_TOOL_CALL_PARSERS = {"qwen25": "qwen", "glm45": "glm"}


def post_parse_warnings(args: dict[str, Any]) -> list[str]:
    """The deprecation warnings SGLang's ServerArgs.__post_init__ logs."""
    out = []
    parser = args.get("tool_call_parser")
    if parser in _DEPRECATED_TOOL_CALL_PARSERS:
        out.append(
            f"The tool_call_parser '{parser}' is deprecated. Please use "
            f"'{_DEPRECATED_TOOL_CALL_PARSERS[parser]}' instead."
        )
    if args.get("enable_nan_detection"):
        out.append(
            "--enable-nan-detection is deprecated. "
            "Use SGLANG_SPEC_NAN_DETECTION=1 and SGLANG_SPEC_OOB_DETECTION=1 instead."
        )
    return out


def _deprecated_action(option: dict[str, Any], warn: Callable[[str], None]) -> type:
    stores_true = _stores_true(option)
    takes_value = bool(option.get("takes_value"))

    class _Deprecated(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            warn(deprecation_message(option_string or option["flags"][0], option))
            if stores_true:
                setattr(namespace, self.dest, True)
            elif takes_value:
                setattr(namespace, self.dest, values)

    return _Deprecated


# --- parser -------------------------------------------------------------------


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with the usage block left out of errors.

    SGLang's parser prints a usage block of several hundred options before the
    error; the last line (``launch_server.py: error: ...``) is the same here.
    """

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def _is_required(option: dict[str, Any]) -> bool:
    if "required" in option:
        return bool(option["required"])
    # The contract's manifest has no "required" key; SGLang requires this one.
    return option.get("dest") == "model_path"


def add_option(
    parser: argparse.ArgumentParser, option: dict[str, Any], warn: Callable[[str], None]
) -> None:
    """Add one manifest option to ``parser`` the way SGLang declares it."""
    flags = list(option["flags"])
    dest = option["dest"]
    action = str(option.get("action") or "store")
    kwargs: dict[str, Any] = {"dest": dest}
    if _is_required(option):
        kwargs["required"] = True
    else:
        kwargs["default"] = option.get("default")

    if is_deprecated_action(option):
        kwargs["action"] = _deprecated_action(option, warn)
        if option.get("takes_value"):
            kwargs["nargs"] = option.get("nargs")
            kwargs["type"] = value_type(option.get("type"))
        else:
            kwargs["nargs"] = 0
        parser.add_argument(*flags, **kwargs)
        return

    lowered = action.lower()
    if "booleanoptional" in lowered:
        flags = [f for f in flags if not f.startswith("--no-")]
        kwargs["action"] = argparse.BooleanOptionalAction
    elif lowered in ("store_true", "store_false"):
        kwargs["action"] = lowered
        if kwargs.get("default") is None and not kwargs.get("required"):
            kwargs["default"] = lowered == "store_false"
    elif lowered in ("store_const", "append_const", "count", "help", "version"):
        # Not used by SGLang's server args; parse as a bare switch.
        kwargs["action"] = "store_true"
    elif not option.get("takes_value", True):
        kwargs["action"] = "store_true"
    else:
        if lowered == "append":
            kwargs["action"] = "append"
        kwargs["type"] = value_type(option.get("type"))
        if option.get("nargs") is not None:
            kwargs["nargs"] = option["nargs"]
        choices = option.get("choices")
        if choices:
            kwargs["choices"] = list(choices)
    parser.add_argument(*flags, **kwargs)


def build_parser(
    manifest: dict[str, Any],
    warn: Callable[[str], None] | None = None,
    prog: str = PROG,
) -> argparse.ArgumentParser:
    """An ArgumentParser that accepts exactly the manifest's options."""
    warn = warn or (lambda message: None)
    parser = OneLineArgumentParser(
        prog=prog,
        description=(
            "SYNTHETIC SGLang-protocol simulator; accepts the command line of "
            f"sglang.launch_server {manifest.get('sglang_version')}."
        ),
        allow_abbrev=False,
    )
    seen: set[str] = {"-h", "--help"}
    for option in manifest["options"]:
        flags = [f for f in option["flags"] if f not in seen]
        if not flags:
            continue
        seen.update(flags)
        add_option(parser, {**option, "flags": flags}, warn)
    return parser


def check_port(port: Any) -> str | None:
    """Return an error message when ``port`` is not a TCP port number."""
    if port is None:
        return None
    if isinstance(port, bool) or not isinstance(port, int):
        return f"argument --port: invalid int value: {port!r}"
    if not PORT_MIN <= port <= PORT_MAX:
        return f"argument --port: {port} is out of range ({PORT_MIN}-{PORT_MAX})"
    return None


def parse_server_args(
    argv: Iterable[str],
    manifest: dict[str, Any],
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Parse ``argv`` like sglang.launch_server; exit 2 with one line on error.

    Returns the arguments as an ordered mapping (manifest order) named as
    ServerArgs names them (from_cli_args: tensor_parallel_size -> tp_size,
    ...; the no-op deprecated switches dropped), with tokenizer_path and
    served_model_name falling back to model_path as SGLang does.
    """
    parser = build_parser(manifest, warn)
    namespace = parser.parse_args(list(argv))
    parsed = vars(namespace)
    dropped = {
        o["dest"]
        for o in manifest["options"]
        if is_deprecated_action(o) and not o.get("takes_value") and not _stores_true(o)
    }
    args = {
        CLI_DEST_RENAMES.get(key, key): value
        for key, value in parsed.items()
        if key not in dropped
    }
    problem = check_port(args.get("port"))
    if problem:
        parser.error(problem)
    if args.get("tokenizer_path") is None:
        args["tokenizer_path"] = args.get("model_path")
    if args.get("served_model_name") is None:
        args["served_model_name"] = args.get("model_path")
    return args


def server_args_repr(args: dict[str, Any]) -> str:
    """The shape of SGLang's ``server_args=ServerArgs(...)`` log line."""
    body = ", ".join(f"{key}={value!r}" for key, value in args.items())
    return f"server_args=ServerArgs({body})"
