# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules that set facts (gpu_facts, sglang_bench, sglang_bench_compare, sglang_ledger_info,
sglang_server_info): the ``facts`` attribute and the ``ansible_facts`` return value.

A module lists ``sglang_lab_facts`` under ``extends_documentation_fragment`` in DOCUMENTATION (the
attribute) and again in RETURN, where it documents only the fact it sets, under
``ansible_facts.contains``.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    RETURN = r"""
ansible_facts:
  description: Facts set by this module.
  returned: always
  type: dict
"""
