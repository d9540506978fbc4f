# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of the workload and client options that sglang_bench and sglang_slo_search
share, both handing them to build_client_argv() (sglang_bench_points.py) one point at a time.

Declared once here as WORKLOAD_ARGUMENT_SPEC, documented once in doc fragment sglang_lab_workload
(plugins/doc_fragments/sglang_lab_workload.py), option for option: tests/unit/test_module_docs.py
checks that both agree. Each module adds it to its own spec (``argument_spec.update(...)``); the
options whose meaning or rules differ between the two (client_command, output_dir, request_rate,
client_warmup_requests, point_timeout, timeout, ...) stay in each module's own spec and
documentation. A dict only: no imports, light to ship with a module.
"""

WORKLOAD_ARGUMENT_SPEC = dict(
    client_env=dict(type="dict", default={}),
    num_prompts=dict(type="int"),
    num_prompts_multiplier=dict(type="int"),
    num_prompts_floor=dict(type="int"),
    input_len=dict(type="int", required=True),
    output_len=dict(type="int", required=True),
    range_ratio=dict(type="float", default=1.0),
    dataset_name=dict(type="str", default="random"),
    dataset_path=dict(type="path"),
    seed=dict(type="int", default=1),
    tokenizer=dict(type="str"),
    model=dict(type="str"),
    served_model_name=dict(type="str"),
    output_details=dict(type="bool", default=False),
    extra_args=dict(type="list", elements="str", default=[]),
    measurement=dict(
        type="dict",
        options=dict(
            min_requests=dict(type="int", default=0),
            min_duration_s=dict(type="float", default=0.0),
            max_prompts=dict(type="int", default=20000),
            cache=dict(type="str", choices=["cold", "warm"], default="warm"),
            server_metrics=dict(type="bool", default=False),
        ),
    ),
)
