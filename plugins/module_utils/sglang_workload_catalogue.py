# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload catalogue: named workloads (data/workloads.yml, schema data/workloads.schema.json).

``check_catalogue`` checks the file against its schema and every workload's settings by resolving
them over data/benchmark.yml with the workload's own resolver (sglang_bench_settings.resolve_settings,
which checks every value by workload_problems, the one check of the workload object), so an entry
that cannot run is refused when the catalogue is read, naming the workload. ``entry`` picks one by
name, or refuses with the list of names. The resolver takes the entry as its ``named`` layer
(below the sglang_bench_* variables and the override dict, above data/benchmark.yml).

Pure functions; jsonschema is imported by ``check_catalogue`` only (the controller's side).
"""

import copy

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_bench_settings import SettingsError, resolve_settings
    from ansible.module_utils.sglang_schema import schema_problems
except ImportError:  # pytest, the filter plugin and tools put module_utils on sys.path.
    from sglang_bench_settings import SettingsError, resolve_settings
    from sglang_schema import schema_problems

# The extra variable that names a workload (-e workload=NAME) and the role variable it becomes.
WORKLOAD_NAME_VAR = "sglang_bench_workload_name"


class CatalogueError(ValueError):
    """The catalogue, or the name asked of it, cannot be used; ``problems`` lists each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def check_catalogue(data, schema, bench_data, source="data/workloads.yml"):
    """The catalogue's workloads by name (each ``{name, description, source, settings, needs}``),
    or CatalogueError naming every problem: the schema's, then each workload's settings resolved
    over ``bench_data`` (data/benchmark.yml) with nothing else."""
    if not isinstance(data, dict):
        raise CatalogueError([f"{source} must be a mapping with workloads, got {type(data).__name__}"])
    problems = schema_problems(data, schema, source)
    if problems:
        raise CatalogueError(problems)
    workloads = {}
    for name, raw in data["workloads"].items():
        workload = dict(copy.deepcopy(raw), name=name)
        workload.setdefault("needs", [])
        try:
            resolve_settings(bench_data, named={**workload, "needs": []})
        except SettingsError as exc:
            label = f"workload {name!r}"
            problems += [f"{source}: {p}" if label in p else f"{source}: {label}: {p}" for p in exc.problems]
        workloads[name] = workload
    if problems:
        raise CatalogueError(problems)
    return workloads


def entry(workloads, name, source="data/workloads.yml"):
    """The workload called ``name``, or CatalogueError with the names there are."""
    name = str(name).strip()
    if name in workloads:
        return workloads[name]
    raise CatalogueError(
        [f"workload {name!r} is not in {source}; the workloads there: {', '.join(sorted(workloads))}"]
    )
