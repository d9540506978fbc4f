# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module of this project declares, and its author, described once.

Modules list ``sglang_lab_attributes`` (and ``.read_only`` where it fits) under
``extends_documentation_fragment`` and state only their own ``support`` and ``details``. The
``facts`` attribute of the modules that set facts comes with their ``ansible_facts`` return value
from ``sglang_lab_facts``.
"""

from __future__ import annotations


class ModuleDocFragment:
    # Standard fragment: every module. No module of this project returns a diff. The author is the
    # project's (a module may add its own; author lists merge).
    DOCUMENTATION = r"""
options: {}
author:
  - SGLang lab contributors
attributes:
  check_mode:
    description: Can run in C(check_mode) and return a changed status prediction without modifying the target.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
    support: none
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled or queried by the module has not changed in a relevant way.
"""

    # With the standard fragment: a module that only reads.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action only reads; it runs the same in check mode.
  idempotent:
    support: full
    details:
      - This action does not modify state.
"""
