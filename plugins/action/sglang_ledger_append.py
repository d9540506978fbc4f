# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for module sglang_ledger_append: append on the host, then bring the controller's copy up to date.

The module appends the record on the host and returns the ledger's checksum (sha1, as Ansible's own
fetch compares). With ``controller_copy`` set, this action then copies the ledger over the task's
connection (the connection's fetch_file: a file copy on a local connection, sftp/scp over SSH) to a
temporary file beside ``controller_copy``, checks the checksum and renames it into place. That is the
fetch step's work in the same task, without its remote stat module (one module run fewer per
cycle); role sglang_bench's fetch entry point then skips its fetch when this copy is current
(docs/ledger.md, "The controller's copy").

Nothing is copied in check mode, when the module failed, or with become (the file may be
readable only by the become user; the fetch entry point's ansible.builtin.fetch handles that
with slurp). The result says which under ``controller_copy``.
"""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.hashing import checksum


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        dest = args.get("controller_copy")
        result.update(self._execute_module(module_name="sglang_ledger_append", module_args=args,
                                           task_vars=task_vars))
        if not dest or result.get("failed"):
            return result
        dest = os.path.realpath(self._loader.path_dwim(dest))
        copy = {"path": dest, "copied": False, "in_sync": False, "ledger": result.get("ledger"), "reason": None}
        result["controller_copy"] = copy
        remote = result.get("ledger_checksum")
        if self._task.check_mode:
            copy["reason"] = "check mode: nothing was appended"
        elif self._connection.become:
            copy["reason"] = "become: the fetch step copies the ledger (with slurp)"
        elif not remote:
            copy["reason"] = "the module returned no ledger checksum"
        elif checksum(dest) == remote:
            copy["in_sync"] = True
        else:
            try:
                copy.update(self._copy(result["ledger"], dest, remote))
            except (AnsibleError, OSError) as exc:
                copy["reason"] = f"the copy failed ({exc}); the fetch step copies the ledger"
        return result

    def _copy(self, source, dest, remote):
        """fetch_file to a temporary file beside ``dest``, checked against ``remote``, then renamed."""
        folder = os.path.dirname(dest)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".ledger-", dir=folder)
        os.close(handle)
        try:
            self._connection.fetch_file(source, temporary)
            got = checksum(temporary)
            if got != remote:
                raise AnsibleError(f"checksum {got} of the copy is not the host's {remote}")
            os.chmod(temporary, 0o640)
            os.replace(temporary, dest)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        return {"copied": True, "in_sync": True}
