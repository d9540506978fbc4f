"""Campaign workloads that name the workload catalogue (issue 27): ``{name: generated-shared-prefix}``
in a campaign file takes data/workloads.yml's entry, under the workload's own settings
(module_utils/sglang_campaign.py catalogue_workloads), run against the real catalogue, schema,
data/benchmark.yml and data/campaigns/demo.yml.
"""

from __future__ import annotations

import json

import pytest
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_campaign as campaign_logic
import yaml
from helpers.paths import REPO

SCHEMA = json.loads((REPO / "data" / "campaigns" / "schema.json").read_text())
DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
CATALOGUE = campaign_logic.load_catalogue(str(REPO))
RAW = yaml.safe_load((REPO / "data" / "workloads.yml").read_text())["workloads"]


def check(workloads):
    return campaign_logic.check_campaign({"name": "x", "tiers": ["t"], "workloads": workloads}, SCHEMA, None)


def test_a_workload_named_after_a_catalogue_entry_takes_its_settings_under_its_own():
    campaign = check([{"name": "generated-shared-prefix", "settings": {"concurrency": [2], "gsp_num_groups": 2}},
                      {"name": "short", "settings": {"input_len": 64}}])
    gsp, short = campaign["workloads"]
    entry = RAW["generated-shared-prefix"]["settings"]
    assert gsp["catalogue"] == "generated-shared-prefix"
    assert gsp["settings"] == {**entry, "concurrency": [2], "gsp_num_groups": 2}
    # A name the catalogue does not hold is the campaign's own, as before.
    assert short == {"name": "short", "settings": {"input_len": 64}}
    # The settings resolve as a campaign workload's do (they win over the inventory's overrides).
    cfg = settings.resolve_settings(DATA, {"sglang_bench_input_len": 32}, "f", gsp["settings"])
    assert (cfg["dataset_name"], cfg["input_len"], cfg["gsp_num_groups"]) == ("generated-shared-prefix", 128, 2)
    assert cfg["cache_hit_target"] == entry["cache_hit_target"]


def test_the_default_loader_reads_this_repositorys_catalogue():
    assert campaign_logic.load_catalogue() == CATALOGUE and set(RAW) == set(CATALOGUE)
    assert campaign_logic.load_catalogue(str(REPO / "nowhere")) is None


@pytest.mark.parametrize(("workload", "words"), [
    ({"name": "chat-corpus"}, "workload 'chat-corpus' is the catalogue's, which needs dataset_path"),
    ({"name": "long-context", "settings": {"dataset_name": "sharegpt"}},
     "sends bench_serving's random dataset, but its settings name 'sharegpt'"),
])
def test_a_catalogue_workload_that_cannot_run_as_named_is_refused(workload, words):
    with pytest.raises(campaign_logic.CampaignError, match=words):
        check([workload])


def test_a_corpus_given_in_the_campaign_satisfies_the_need():
    campaign = check([{"name": "chat-corpus", "settings": {"dataset_path": "/data/corpus.json"}}])
    assert campaign["workloads"][0]["settings"]["dataset_path"] == "/data/corpus.json"
    assert campaign["workloads"][0]["settings"]["dataset_name"] == "sharegpt"


def test_the_demo_campaign_runs_two_workloads_one_from_the_catalogue():
    demo = yaml.safe_load((REPO / "data" / "campaigns" / "demo.yml").read_text())
    campaign = campaign_logic.check_campaign(demo, SCHEMA, None)
    names = [w["name"] for w in campaign["workloads"]]
    assert len(names) == 2 and [w.get("catalogue") for w in campaign["workloads"]] == [None, names[1]]
    cells = campaign_logic.expand_cells(campaign)
    assert {c["workload"] for c in cells} == set(names)
    # Its shared-prefix points are checked against the server's hit rate, in whole groups.
    cfg = settings.resolve_settings(DATA, {}, "f", campaign["workloads"][1]["settings"])
    assert cfg["cache_hit_target"]["rate"] == "expected"
    specs = bp.plan_points(cfg["concurrency"], 1, "/o", multiplier=2, floor=8, min_requests=8,
                           groups=cfg["gsp_num_groups"])
    assert all(s["num_prompts"] % cfg["gsp_num_groups"] == 0 for s in specs)
