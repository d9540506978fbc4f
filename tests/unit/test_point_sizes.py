"""Prompt counts kept per point across server starts (module_utils sglang_point_sizes)."""

from __future__ import annotations

import json

import sglang_point_sizes as sizes

WINDOW = {"min_requests": 20, "min_duration_s": 5.0, "max_prompts": 1000}
ARGV = ["--backend", "sglang", "--dataset-name", "random-ids", "--num-prompts", "32", "--max-concurrency", "16",
        "--output-file", "/r/run1/c16_r0.jsonl", "--seed", "1"]


def spec(num_prompts=32, argv=ARGV, window=WINDOW, output_file="/r/run1/c16_r0.jsonl"):
    return {"num_prompts": num_prompts, "argv": list(argv), "window": window, "output_file": output_file}


def with_flag(argv, flag, value):
    argv = list(argv)
    argv[argv.index(flag) + 1] = value
    return argv


def test_the_key_names_what_is_sent_not_how_many_or_where():
    key = sizes.size_key(ARGV, WINDOW)
    assert sizes.size_key(with_flag(ARGV, "--num-prompts", "600"), WINDOW) == key
    assert sizes.size_key(with_flag(ARGV, "--output-file", "/r/run2/c16_r1.jsonl"), WINDOW) == key
    assert sizes.size_key(with_flag(ARGV, "--max-concurrency", "1"), WINDOW) != key
    assert sizes.size_key(with_flag(ARGV, "--seed", "2"), WINDOW) != key
    assert sizes.size_key(ARGV, dict(WINDOW, min_duration_s=30.0)) != key
    # The shortfall an evaluated point's window carries is no part of the key.
    assert sizes.size_key(ARGV, dict(WINDOW, shortfall={"seconds": 1})) == key


def test_a_point_starts_at_the_larger_kept_count_within_the_window_cap():
    kept = {sizes.size_key(ARGV, WINDOW): {"num_prompts": 600}}
    assert sizes.pin(spec(), kept) == 600
    assert sizes.pin(spec(num_prompts=600), kept) is None  # not larger: as planned
    assert sizes.pin(spec(num_prompts=700), kept) is None
    assert sizes.pin(spec(window=None), kept) is None  # no window: nothing re-sizes it, nothing pins it
    assert sizes.pin(spec(), {}) is None
    assert sizes.pin(spec(), kept, groups=8) == 600 and sizes.pin(spec(), kept, groups=7) == 602  # whole groups
    capped = {sizes.size_key(ARGV, dict(WINDOW, max_prompts=500)): {"num_prompts": 600}}
    assert sizes.pin(spec(window=dict(WINDOW, max_prompts=500)), capped) == 500
    assert sizes.pin(spec(), {sizes.size_key(ARGV, WINDOW): {"num_prompts": "600"}}) is None  # not a count


def test_the_kept_count_only_grows_and_failed_points_teach_nothing(tmp_path):
    path = tmp_path / "state" / "point-sizes.json"
    planned = [spec(), spec(argv=with_flag(ARGV, "--max-concurrency", "1"), output_file="/r/run1/c1_r0.jsonl")]
    points = [
        {"output_file": "/r/run1/c16_r0.jsonl", "status": "ok", "num_prompts": 520},
        {"output_file": "/r/run1/c1_r0.jsonl", "status": "failed", "num_prompts": 90},
    ]
    assert sizes.remember(str(path), planned, points, now=1.0) == [sizes.size_key(ARGV, WINDOW)]
    assert sizes.load(str(path)) == {sizes.size_key(ARGV, WINDOW): {"num_prompts": 520, "updated": 1.0}}
    # A faster start's smaller count leaves it; a slower start's larger one (too_short counts) grows it.
    assert sizes.remember(str(path), planned, [dict(points[0], num_prompts=450)]) == []
    assert sizes.remember(str(path), planned, [dict(points[0], num_prompts=640, status="too_short")], now=2.0)
    assert sizes.load(str(path))[sizes.size_key(ARGV, WINDOW)] == {"num_prompts": 640, "updated": 2.0}
    # The next start of the same point, whatever its run directory, starts there.
    assert sizes.pin(spec(output_file="/r/run9/c16_r0.jsonl"), sizes.load(str(path))) == 640


def test_a_broken_file_is_a_missing_hint_and_is_replaced(tmp_path):
    path = tmp_path / "point-sizes.json"
    path.write_text("{not json")
    assert sizes.load(str(path)) == {} and sizes.load(None) == {}
    path.write_text("[1, 2]")
    assert sizes.load(str(path)) == {}
    sizes.remember(str(path), [spec()], [{"output_file": "/r/run1/c16_r0.jsonl", "status": "ok", "num_prompts": 64}])
    assert json.loads(path.read_text())[sizes.size_key(ARGV, WINDOW)]["num_prompts"] == 64
    assert sizes.remember(None, [spec()], []) == []
