# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SYNTHETIC stand-in for ``python -m sglang.launch_server``.

    PYTHONPATH=simulator python -m sglang_sim.launch_server --model-path DIR --tp-size 8 ...

Same command line as SGLang (built from the flag manifest), SGLang's process
tree, log lines and HTTP API; tokens come from an invented speed model.
Knobs: SGLANG_SIM_* environment variables (simulator/README.md).

This module stays light on purpose: multiprocessing's spawn start method
re-imports the main module in every child process, so the heavy imports
(aiohttp, tokenizers, yaml) happen inside main() only.
"""

from __future__ import annotations

import os
import sys
import warnings


def fail(message: str, code: int = 2):
    """One line on stderr, non-zero exit."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    from . import logs

    logs.banner()
    # SGLang's launch_server warns the same way before parsing.
    warnings.warn(
        "'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "  Example: sglang serve --model-path <model> [options]",
        UserWarning,
        stacklevel=1,
    )
    import asyncio
    import traceback

    from .config import ConfigError, parse_env
    from .manifest import (
        ManifestError,
        load_manifest,
        parse_server_args,
        post_parse_warnings,
        resolve_manifest_path,
        sglang_warning_text,
    )
    from .server import Server, check_gpu_mode, kill_process_tree

    try:
        cfg = parse_env(os.environ)
        manifest = load_manifest(resolve_manifest_path(os.environ))
        check_gpu_mode(cfg)
    except (ConfigError, ManifestError) as exc:
        fail(f"[sglang-sim] error: {exc}")

    def warn(message: str) -> None:
        sys.stderr.write(sglang_warning_text(message) + "\n")
        sys.stderr.flush()

    args = parse_server_args(sys.argv[1:] if argv is None else argv, manifest, warn)
    for message in post_parse_warnings(args):
        sys.stderr.write(message + "\n")
    logs.configure("")
    try:
        server = Server(args, cfg, manifest)
        logs.configure_engine(server.topology.schedulers[0].prefix)
    except (ConfigError, ValueError, OSError) as exc:
        fail(f"[sglang-sim] error: {exc}")
    try:
        asyncio.run(server.run())
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        kill_process_tree(server.skip_pids(), include_parent=False)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
