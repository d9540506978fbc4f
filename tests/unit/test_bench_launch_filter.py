"""The filter sglang_bench_launch (plugins/filter/sglang_lab.py): a launch as role sglang_launch composes
it, handed to role sglang_bench as one object (issue 22) - the fields the record keeps, the server's
environment under the script's own exports, and a clear refusal of something that is not a launch."""

from __future__ import annotations

from importlib import util

import pytest
from ansible.errors import AnsibleFilterError
from helpers.paths import REPO


def bench_launch():
    spec = util.spec_from_file_location("sglang_lab_filter_for_launch", REPO / "plugins" / "filter" / "sglang_lab.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["sglang_bench_launch"]


LAUNCH = {"tier": "t03", "script": "/w/launch/t03.sh", "command": ["python", "-m", "sglang.launch_server"],
          "argv": ["--tp", "8"], "env": {"NCCL_P2P_LEVEL": "NVL", "A": "script"}, "model": "/m", "hash": "x"}


def test_the_launch_becomes_the_object_the_record_keeps():
    got = bench_launch()(LAUNCH, {"A": "server", "SGLANG_SIM_FAULT": "none"})
    assert got == {"tier": "t03", "script": "/w/launch/t03.sh", "argv": LAUNCH["command"], "model": "/m",
                   # the script exports last: its value wins over the server's extra environment
                   "env": {"A": "script", "NCCL_P2P_LEVEL": "NVL", "SGLANG_SIM_FAULT": "none"}}
    assert LAUNCH["env"] == {"NCCL_P2P_LEVEL": "NVL", "A": "script"}  # the launch itself is not changed


def test_a_launch_with_only_a_tier_leaves_the_rest_to_the_server():
    assert bench_launch()({"tier": "baseline"}) == {"tier": "baseline", "script": None, "argv": None,
                                                    "env": {}, "model": None}


@pytest.mark.parametrize("bad", [None, {}, {"script": "/x.sh"}, "baseline"])
def test_something_that_is_not_a_launch_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match="a launch with a tier is needed"):
        bench_launch()(bad)
