# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CLI: write the simulator's SYNTHETIC tokenizer folder.

    PYTHONPATH=simulator python -m sglang_sim.make_tokenizer DIR [--vocab-size N]
        [--sharegpt N]

DIR then works as --model-path / --tokenizer-path for the simulator and as
--tokenizer for bench_serving (offline). --sharegpt N also writes
DIR/synthetic_sharegpt.json with N made-up conversations, a --dataset-path
for bench_serving's ``random`` dataset on a host without the Hub.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .tokenizer import DEFAULT_VOCAB_SIZE, make_tokenizer


def is_complete(directory: str, sharegpt_conversations: int) -> bool:
    """The folder holds the tokenizer files and enough synthetic ShareGPT conversations."""
    folder = Path(directory)
    if not all((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "config.json")):
        return False
    if sharegpt_conversations <= 0:
        return True
    try:
        return len(json.loads((folder / "synthetic_sharegpt.json").read_text())) >= sharegpt_conversations
    except (OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sglang_sim.make_tokenizer",
        description="Write the SYNTHETIC tokenizer of the SGLang-protocol simulator.",
    )
    parser.add_argument("directory", help="folder to write (created if missing)")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument(
        "--sharegpt", type=int, default=0, metavar="N",
        help="also write synthetic_sharegpt.json with N conversations",
    )
    parser.add_argument(
        "--if-missing", action="store_true",
        help="write nothing when the folder already has the tokenizer and at least N "
        "ShareGPT conversations (prints 'unchanged'; for Ansible's changed_when)",
    )
    args = parser.parse_args(argv)
    if args.vocab_size < 512:
        parser.error("--vocab-size must be at least 512")
    if args.sharegpt < 0:
        parser.error("--sharegpt must be >= 0")
    if args.if_missing and is_complete(args.directory, args.sharegpt):
        print(f"[sglang-sim] unchanged: SYNTHETIC tokenizer already in {args.directory}")
        return 0
    folder = make_tokenizer(args.directory, args.vocab_size, args.sharegpt)
    print(f"[sglang-sim] SYNTHETIC tokenizer written to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
