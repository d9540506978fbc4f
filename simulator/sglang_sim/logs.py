# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Log lines in SGLang's format.

SGLang configures ``logging.basicConfig(format="[%(asctime)s{prefix}]
%(message)s", datefmt="%Y-%m-%d %H:%M:%S")`` on stderr in every process, with
prefixes like `` TP3`` or `` DP1 TP0`` in schedulers; uvicorn's own lines use
``[time] INFO:     message``. The simulator does the same so that a log
parser built against this output reads the node's logs too.
"""

from __future__ import annotations

import logging
import sys

from . import BANNER

DATEFMT = "%Y-%m-%d %H:%M:%S"
logger = logging.getLogger("sglang_sim")
uvicorn_logger = logging.getLogger("sglang_sim.uvicorn")


class _UvicornFormatter(logging.Formatter):
    """uvicorn's ``%(levelprefix)s``: 'INFO:' padded to 9 characters."""

    def format(self, record: logging.LogRecord) -> str:
        record.levelprefix = (record.levelname + ":").ljust(9)
        return super().format(record)


def configure(prefix: str = "") -> None:
    """Configure this process's logging like SGLang's configure_logger."""
    logging.basicConfig(
        level=logging.INFO,
        format=f"[%(asctime)s{prefix}] %(message)s",
        datefmt=DATEFMT,
        stream=sys.stderr,
        force=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_UvicornFormatter("[%(asctime)s] %(levelprefix)s %(message)s", DATEFMT))
    uvicorn_logger.handlers[:] = [handler]
    uvicorn_logger.propagate = False
    uvicorn_logger.setLevel(logging.INFO)


def configure_engine(prefix: str) -> None:
    """Batch logs come from the first scheduler in SGLang: use its prefix."""
    engine_logger = logging.getLogger("sglang_sim.engine")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[%(asctime)s{prefix}] %(message)s", DATEFMT))
    engine_logger.handlers[:] = [handler]
    engine_logger.propagate = False
    engine_logger.setLevel(logging.INFO)


def banner() -> None:
    """The first line of every simulator log: it is SYNTHETIC."""
    print(BANNER, flush=True)


def raw(text: str) -> None:
    """Write a line as-is to stderr (progress bars, tracebacks)."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def progress_line(desc: str, done: int, total: int, elapsed: float) -> str:
    """A tqdm line in SGLang's checkpoint-loading bar format."""
    percent = 100.0 * done / total if total else 100.0
    rate = elapsed / done if done else 0.0
    remaining = rate * (total - done)
    rate_text = f"{rate:.2f}s/it" if done else "?it/s"
    return (
        f"{desc}: {percent:3.0f}% Completed | {done}/{total} "
        f"[{_clock(elapsed)}<{_clock(remaining) if done else '?'}, {rate_text}]"
    )


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"
