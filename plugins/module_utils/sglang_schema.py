# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A data file checked against its JSON schema, one sentence per problem (the campaign files and
the workload catalogue). Controller side only: jsonschema is imported when a check runs."""


def schema_problems(data, schema, source):
    """Every way ``data`` breaks ``schema``, each as ``<source>: <where>: <what>``, in a fixed order."""
    import jsonschema  # controller side only

    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(data), key=str):
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        problems.append(f"{source}: {where}: {error.message}")
    return problems
