# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small, deterministic, SYNTHETIC tokenizer for the simulated model.

``make_tokenizer(dir)`` writes a Hugging Face tokenizer folder
(tokenizer.json, tokenizer_config.json, special_tokens_map.json, config.json)
that ``transformers.AutoTokenizer.from_pretrained(dir)`` loads offline, so
SGLang's real bench_serving client can sample prompts and count tokens
without reaching the Hub. The vocabulary is a word list built here: special
tokens, ASCII punctuation, the numbers 0-999, a few hundred common English
words and made-up two-syllable words up to ``vocab_size``. A WordLevel model
over a whitespace + punctuation split means decode -> encode gives back the
same ids, so prompts built by bench_serving's ``random-ids`` dataset keep
their length on the server.

``TextCodec`` is what the server uses: it turns prompts into token ids (with
the tokenizer when one is configured, else a word/punctuation heuristic; the
radix cache matches on them) and makes the synthetic output tokens.
"""

from __future__ import annotations

import json
import random
import re
import string
import zlib
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
UNK, BOS, EOS, PAD = SPECIAL_TOKENS
DEFAULT_VOCAB_SIZE = 8192
MODEL_MAX_LENGTH = 131072
SYNTHETIC_NOTE = (
    "SYNTHETIC tokenizer made by sglang_sim.make_tokenizer for the SGLang-protocol "
    "simulator; it is not the tokenizer of any real model."
)

COMMON_WORDS = """
the of and to in is that it was for on are as with his they at be this from have
or by one had not but what all were when we there can an your which their said if
do will each about how up out them then she many some so these would other into
has more her two like him see time could no make than first been its who now
people my made over did down only way find use may water long little very after
words called just where most know get through back much before go good new write
our used me man too any day same right look think also around another came come
work three word must because does part even place well such here take why things
help put years different away again off went old number great tell men say small
every found still between name should home big give air line set own under read
last never us left end along while might next sound below saw something thought
both few those always looked show large often together asked house world going
want school important until form food keep children feet land side without boy
once animals life enough took sometimes four head above kind began almost live
page got earth need far hand high year mother light parts country father let
night following picture being study second eyes soon times story boys since white
days paper hard near sentence better best across during today others however sure
means knew its try told young miles sun ways thing whole hear example heard several
change answer room sea against top turned learn point city play toward five using
himself usually server model token request batch graph kernel memory cache tensor
expert layer attention decode prefill throughput latency concurrency benchmark
""".split()

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_SPLIT = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def build_vocab(vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[str]:
    """The deterministic token list, ids in list order."""
    if vocab_size < 512:
        raise ValueError("vocab_size must be at least 512")
    tokens: list[str] = []
    seen: set[str] = set()

    def add(items: Iterable[str]) -> None:
        for item in items:
            if len(tokens) >= vocab_size:
                return
            if item not in seen:
                seen.add(item)
                tokens.append(item)

    add(SPECIAL_TOKENS)
    add(string.punctuation)
    add(str(n) for n in range(1000))
    add(COMMON_WORDS)
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    add(a + b for a in syllables for b in syllables)
    add(a + b + c for a in syllables for b in syllables for c in syllables)
    return tokens


def build_tokenizer(vocab_size: int = DEFAULT_VOCAB_SIZE):
    """A ``tokenizers.Tokenizer`` over ``build_vocab(vocab_size)``."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    vocab = {token: index for index, token in enumerate(build_vocab(vocab_size))}
    tokenizer = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated")]
    )
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }} : {{ message['content'] }}</s>"
    "{% endfor %}{% if add_generation_prompt %}<s>assistant :{% endif %}"
)


def make_tokenizer(directory: str | Path, vocab_size: int = DEFAULT_VOCAB_SIZE,
                   sharegpt_conversations: int = 0) -> Path:
    """Write the tokenizer folder (and optionally a synthetic ShareGPT file).

    Returns the folder. Running it twice gives byte-identical files.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size)
    tokenizer.save(str(folder / "tokenizer.json"), pretty=False)
    special = {"unk_token": UNK, "bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    _write_json(
        folder / "tokenizer_config.json",
        {
            "_comment": SYNTHETIC_NOTE,
            "tokenizer_class": "PreTrainedTokenizerFast",
            **special,
            "model_max_length": MODEL_MAX_LENGTH,
            "clean_up_tokenization_spaces": False,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    _write_json(folder / "special_tokens_map.json", special)
    _write_json(
        folder / "config.json",
        {
            "_comment": SYNTHETIC_NOTE,
            "sglang_sim_synthetic": True,
            "architectures": ["SglangSimSyntheticForCausalLM"],
            "model_type": "llama",
            "vocab_size": vocab_size,
            "max_position_embeddings": MODEL_MAX_LENGTH,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 3,
            "torch_dtype": "bfloat16",
        },
    )
    if sharegpt_conversations > 0:
        write_sharegpt(folder / "synthetic_sharegpt.json", sharegpt_conversations, vocab_size)
    return folder


def write_sharegpt(path: str | Path, conversations: int = 200,
                   vocab_size: int = DEFAULT_VOCAB_SIZE, seed: int = 0) -> Path:
    """A ShareGPT-format JSON of made-up two-turn conversations (synthetic).

    bench_serving's ``random`` dataset cuts prompts from ShareGPT token ids;
    pass this file as --dataset-path on a host that cannot reach the Hub.
    """
    rng = random.Random(seed)
    words = [t for t in build_vocab(vocab_size) if t.isalpha()]
    data = []
    for index in range(conversations):
        turns = []
        for role in ("human", "gpt"):
            length = rng.randint(40, 400)
            turns.append({"from": role, "value": " ".join(rng.choices(words, k=length)) + "."})
        data.append({"id": f"sglang-sim-synthetic-{index}", "conversations": turns})
    target = Path(path)
    target.write_text(json.dumps(data), encoding="utf-8")
    return target


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def heuristic_token_count(text: str) -> int:
    """Words and single punctuation marks; what the synthetic tokenizer counts."""
    return len(_SPLIT.findall(text))


class TextCodec:
    """Prompt token counting and synthetic output tokens for the server."""

    def __init__(self, tokenizer_dir: str | Path | None = None):
        self.tokenizer_dir = str(tokenizer_dir) if tokenizer_dir else None
        self._tokenizer = None
        pieces: list[tuple[int, str]]
        if self.tokenizer_dir:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(Path(self.tokenizer_dir) / "tokenizer.json"))
            pieces = self._word_pieces(self._tokenizer)
        else:
            vocab = build_vocab()
            pieces = [(i, " " + t) for i, t in enumerate(vocab) if t.isalpha()]
        if not pieces:
            raise ValueError(f"tokenizer {self.tokenizer_dir} has no word-like tokens")
        self._pieces = pieces
        self.eos_token_id = self._eos_id()

    @staticmethod
    def _word_pieces(tokenizer, limit: int = 4096) -> list[tuple[int, str]]:
        special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
        pieces = []
        for token, index in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]):
            if token in special:
                continue
            text = tokenizer.decode([index])
            if text.strip().isalpha():
                pieces.append((index, text if text.startswith(" ") else " " + text))
                if len(pieces) >= limit:
                    break
        return pieces

    def _eos_id(self) -> int:
        if self._tokenizer is not None:
            index = self._tokenizer.token_to_id(EOS)
            if index is not None:
                return index
        return 2

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Prompt token ids: the tokenizer's, else one id per word or punctuation mark (a hash
        of the lower-cased piece, as the synthetic tokenizer lower-cases)."""
        if self._tokenizer is not None:
            return self._tokenizer.encode(text, add_special_tokens=False).ids
        return [zlib.crc32(piece.lower().encode("utf-8", "replace")) for piece in _SPLIT.findall(text)]

    def output_token(self, seed: int, position: int) -> tuple[int, str]:
        """Token id and text of output position ``position`` (deterministic)."""
        index = (seed * 2654435761 + position * 40503) % len(self._pieces)
        return self._pieces[index]
