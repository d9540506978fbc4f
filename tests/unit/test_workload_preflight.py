"""The workload's checks before the stop (module_utils/sglang_preflight.py): the longest request
against the launch's --context-length, and a sharegpt corpus that exists, parses and holds enough
conversations. Run on the catalogue's real workloads (data/workloads.yml) resolved over the real
data/benchmark.yml, and on the simulator's real synthetic ShareGPT file."""

from __future__ import annotations

import json
import sys

import pytest
import sglang_bench_settings as settings
import sglang_preflight as pf
import sglang_workload_catalogue as catalogue
import yaml
from helpers.paths import REPO

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
WORKLOADS = catalogue.check_catalogue(
    yaml.safe_load((REPO / "data" / "workloads.yml").read_text()),
    json.loads((REPO / "data" / "workloads.schema.json").read_text()),
    DATA,
)


def cfg_of(name, **overrides):
    return settings.resolve_settings(DATA, overrides, None, None, named=WORKLOADS[name])


def launch(context=None, source="host_override"):
    flags = {"--model": "m"} if context is None else {"--model": "m", "--context-length": context}
    return {"flags": flags, "flag_sources": {"--context-length": source}}


@pytest.mark.parametrize(("name", "context", "words"), [
    ("long-context", 8192, "workload 'long-context' sends requests of 7680 prompt + 512 output = 8192 tokens, "
                           "but the launch's --context-length (set by the host override - "
                           "sglang_launch_flags_override) is 8192"),
    ("long-context", "4096", "= 8192 tokens, but the launch's --context-length"),
    ("generated-shared-prefix", 2048, "2176 prompt + 256 output = 2432 tokens"),
    ("seeds-random", 2048, "1024 prompt + 1024 output = 2048 tokens"),
])
def test_a_request_longer_than_the_context_is_refused_with_the_numbers(name, context, words):
    found = pf.context_problems(cfg_of(name, sglang_bench_dataset_path="/c.json"), launch(context))
    assert len(found) == 1 and found[0]["var"] == "--context-length", found
    assert words in found[0]["message"], found[0]["message"]


@pytest.mark.parametrize(("name", "context"), [
    ("long-context", 8193), ("long-context", None), ("seeds-random", 2049), ("generated-shared-prefix", 4096),
    ("chat-corpus", 4096),  # the corpus's prompts are not counted: only the output must fit
])
def test_a_request_that_fits_passes(name, context):
    assert pf.context_problems(cfg_of(name, sglang_bench_dataset_path="/c.json"), launch(context)) == []


def test_a_corpus_output_longer_than_the_context_is_refused():
    found = pf.context_problems(cfg_of("chat-corpus", sglang_bench_dataset_path="/c.json"), launch(256))
    assert "256 output tokens alone" in found[0]["message"]


def test_the_largest_point_in_whole_groups():
    assert pf.largest_point_prompts(cfg_of("seeds-random")) == 2048
    assert pf.largest_point_prompts(cfg_of("long-context")) == 128
    gsp = cfg_of("generated-shared-prefix", sglang_bench_concurrency="1,5")
    assert pf.largest_point_prompts(gsp) == 24  # max(2 x 5, 10, min_requests 20) -> 3 groups of 8


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The simulator's synthetic ShareGPT file, as make_tokenizer --sharegpt writes it."""
    sys.path.insert(0, str(REPO / "simulator"))
    from sglang_sim.tokenizer import write_sharegpt

    return write_sharegpt(tmp_path_factory.mktemp("corpus") / "synthetic_sharegpt.json", 30)


def test_a_corpus_with_enough_conversations_passes(corpus):
    assert pf.corpus_problems(cfg_of("chat-corpus", sglang_bench_dataset_path=str(corpus)), 30) == []


def test_a_corpus_with_too_few_conversations_is_refused_with_the_numbers(corpus):
    found = pf.corpus_problems(cfg_of("chat-corpus", sglang_bench_dataset_path=str(corpus)), 2048)
    assert "holds 30 conversations of two turns or more (of 30), but the largest point sends 2048 prompts" \
        in found[0]["message"]


@pytest.mark.parametrize(("text", "words"), [
    ("{not json", "does not parse as JSON"),
    ('{"conversations": []}', "is a JSON dict, not the list of conversations"),
    ('[{"conversations": [{"from": "human", "value": "hi"}]}]', "holds 0 conversations of two turns or more (of 1)"),
])
def test_a_corpus_that_does_not_parse_is_refused(tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    found = pf.corpus_problems(cfg_of("chat-corpus", sglang_bench_dataset_path=str(path)), 1)
    assert len(found) == 1 and words in found[0]["message"], found


def test_a_missing_corpus_is_left_to_the_dataset_check_and_random_is_not_read(tmp_path):
    missing = str(tmp_path / "none.json")
    cfg = cfg_of("chat-corpus", sglang_bench_dataset_path=missing)
    assert pf.corpus_problems(cfg, 1) == []
    assert pf.dataset_problems(missing)[0]["var"] == "sglang_bench_dataset_path"
    # random's corpus is not parsed here (the real ShareGPT file is hundreds of megabytes).
    assert pf.corpus_problems(cfg_of("seeds-random", sglang_bench_dataset_path=str(tmp_path)), 10 ** 6) == []
