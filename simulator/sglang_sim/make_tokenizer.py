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
import sys

from .tokenizer import DEFAULT_VOCAB_SIZE, make_tokenizer


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
    args = parser.parse_args(argv)
    if args.vocab_size < 512:
        parser.error("--vocab-size must be at least 512")
    if args.sharegpt < 0:
        parser.error("--sharegpt must be >= 0")
    folder = make_tokenizer(args.directory, args.vocab_size, args.sharegpt)
    print(f"[sglang-sim] SYNTHETIC tokenizer written to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
