#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a flag manifest from SGLang's own argument definitions.

Reads an SGLang wheel (.whl), sdist (.tar.gz) or unpacked source directory and
writes ``data/flag_manifests/sglang-<version>.json``: every command-line option
that ``sglang.launch_server`` accepts, with its option strings, whether it takes
a value, nargs, type, choices, action, deprecation and default.

Static analysis only: the source is parsed with :mod:`ast`; nothing from SGLang
is imported, so no torch/CUDA is needed. Two layouts are understood:

* ``parser.add_argument(...)`` calls (``sglang/srt/server_args.py`` up to
  0.5.13.post1, and the few manual registrations that remain later);
* dataclass/msgspec fields annotated ``A[T, "help"]`` or ``A[T, Arg(...)]`` and
  registered by ``add_cli_args_from_dataclass`` (0.5.14+ ``ServerArgs`` fields,
  0.5.20+ ``sglang/srt/arg_groups/fields/*.py`` namespaces collected by
  ``collect_input_fields``). The conversion mirrors ``arg_utils.py``'s rules.

Values that only exist at run time (a choices list built by a comprehension, a
default read from an environment variable) are recorded as ``null`` and the
field name is listed in the option's ``unresolved`` list, so a reader can tell
"no choices" from "choices unknown".

Usage:
    tools/build_flag_manifest.py /path/to/sglang-0.5.23-...whl
    tools/build_flag_manifest.py --version 0.5.10.post1 --version 0.5.23
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = REPO / "data" / "flag_manifests"
DEFAULT_WHEEL_CACHE = REPO / ".cache" / "sglang-wheels"
MANIFEST_FORMAT = 1
ENTRY_MODULE = "sglang.srt.server_args"

# argparse actions that never consume a value.
_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
# Requires-Dist entries worth recording: they decide whether a version fits the node.
_PINNED_REQUIREMENTS = re.compile(r"^(torch|cuda-python|flashinfer[-_a-z]*|sglang-kernel|sgl-kernel)\b", re.I)
_HELP_REPLACEMENT = re.compile(r"\b[Uu]se\s+[`'\"]?(--[a-z0-9][a-z0-9{},-]*(?:=[^\s'\"`)]+| <[^>]+>)?)")


class _Unresolved:
    """Marker for a value that static analysis cannot compute."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()


class ManifestError(RuntimeError):
    """The input is not an SGLang source tree this tool understands."""


# --------------------------------------------------------------------------
# Source access
# --------------------------------------------------------------------------


class SourceTree:
    """The ``sglang`` package's Python files from a wheel, sdist or directory."""

    def __init__(self, files: dict[str, bytes], origin: str, archive_sha256: str | None, metadata: str | None):
        self.files = files  # relative path ("sglang/srt/server_args.py") -> bytes
        self.origin = origin
        self.archive_sha256 = archive_sha256
        self.metadata = metadata
        self._parsed: dict[str, ast.Module] = {}
        self.used: set[str] = set()

    @classmethod
    def open(cls, path: Path) -> SourceTree:
        path = Path(path)
        if path.is_dir():
            return cls._from_members(
                ((str(p.relative_to(path)), p.read_bytes()) for p in path.rglob("*") if p.is_file()),
                str(path),
                None,
            )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if path.suffix == ".whl" or zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                members = [(n, zf.read(n)) for n in zf.namelist() if _wanted(n)]
            return cls._from_members(members, path.name, digest)
        if path.name.endswith((".tar.gz", ".tgz")):
            members = []
            with tarfile.open(path, "r:gz") as tf:
                for m in tf.getmembers():
                    if m.isfile() and _wanted(m.name):
                        fh = tf.extractfile(m)
                        if fh is not None:
                            members.append((m.name, fh.read()))
            return cls._from_members(members, path.name, digest)
        raise ManifestError(f"{path}: not a wheel (.whl), sdist (.tar.gz) or directory")

    @classmethod
    def _from_members(cls, members, origin: str, digest: str | None) -> SourceTree:
        members = list(members)
        anchor = "sglang/srt/server_args.py"
        prefix = None
        for name, _ in members:
            if name == anchor or name.endswith("/" + anchor):
                if prefix is None or len(name) < len(prefix) + len(anchor):
                    prefix = name[: -len(anchor)]
        if prefix is None:
            raise ManifestError(f"{origin}: no {anchor} inside; is this an SGLang wheel/sdist?")
        files: dict[str, bytes] = {}
        metadata = None
        for name, data in members:
            if name.startswith(prefix) and name.endswith(".py"):
                files[name[len(prefix) :]] = data
            elif name.endswith((".dist-info/METADATA", "/PKG-INFO")) and metadata is None:
                metadata = data.decode("utf-8", "replace")
        return cls(files, origin, digest, metadata)

    def module_path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (base + ".py", base + "/__init__.py"):
            if candidate in self.files:
                return candidate
        return None

    def parse(self, module: str) -> ast.Module | None:
        if module in self._parsed:
            return self._parsed[module]
        rel = self.module_path(module)
        if rel is None:
            return None
        tree = ast.parse(self.files[rel].decode("utf-8"), filename=rel)
        self._parsed[module] = tree
        self.used.add(rel)
        return tree

    def version(self) -> str:
        # Wheel/sdist metadata first: some wheels ship a placeholder version.py.
        if self.metadata:
            m = re.search(r"^Version:\s*(\S+)", self.metadata, re.M)
            if m:
                return m.group(1)
        rel = "sglang/version.py"
        if rel in self.files:
            m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", self.files[rel].decode())
            if m and not m.group(1).startswith("0.0.0"):
                return m.group(1)
        m = re.search(r"sglang-([0-9][^-]*?)(?:-py3|-cp|\.tar)", self.origin)
        if m:
            return m.group(1)
        raise ManifestError(f"{self.origin}: cannot tell the SGLang version")

    def pinned_requirements(self) -> list[str]:
        if not self.metadata:
            return []
        out = []
        for line in self.metadata.splitlines():
            if line.startswith("Requires-Dist:"):
                req = line.split(":", 1)[1].strip()
                if _PINNED_REQUIREMENTS.match(req) and "extra ==" not in req:
                    out.append(req)
        return out


def _wanted(name: str) -> bool:
    return name.endswith(".py") and "/sglang/" in "/" + name or name.endswith(("METADATA", "PKG-INFO"))


# --------------------------------------------------------------------------
# Static resolution of names and simple expressions
# --------------------------------------------------------------------------


@dataclass
class ModuleRef:
    name: str


@dataclass
class ClassRef:
    module: str
    node: ast.ClassDef


@dataclass
class FuncRef:
    module: str
    node: ast.FunctionDef
    owner: ClassRef | None = None


@dataclass
class Scope:
    """Names visible to an expression: function locals over class body over module."""

    module: str
    local: dict[str, Any] = field(default_factory=dict)  # name -> ast node or ref
    parent: Scope | None = None


class Resolver:
    def __init__(self, tree: SourceTree):
        self.tree = tree
        self._bindings: dict[str, dict[str, Any]] = {}
        self.field_defaults: dict[str, Any] = {}  # for _declared_default("name")

    # ---- module bindings ------------------------------------------------
    def bindings(self, module: str) -> dict[str, Any]:
        if module in self._bindings:
            return self._bindings[module]
        out: dict[str, Any] = {}
        self._bindings[module] = out
        mod = self.tree.parse(module)
        if mod is None:
            return out
        self._collect(mod.body, module, out, nested=False)
        return out

    def _collect(self, body, module: str, out: dict, nested: bool) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.Try)):
                blocks = [stmt.body, stmt.orelse]
                if isinstance(stmt, ast.Try):
                    blocks += [h.body for h in stmt.handlers] + [stmt.finalbody]
                for block in blocks:
                    self._collect(block, module, out, nested=True)
                continue
            new = _statement_bindings(stmt, module)
            for name, value in new.items():
                if nested and name in out:
                    continue  # a top-level definition beats a fallback branch
                if (
                    isinstance(out.get(name), (ast.ClassDef, ast.FunctionDef))
                    and isinstance(value, ast.AST)
                    and not (isinstance(value, (ast.ClassDef, ast.FunctionDef)))
                ):
                    # `ServerArgs = msgspec.defstruct("ServerArgs", ...)` (0.5.20+) rebuilds the
                    # class at import time; its methods and fields stay those of the class body.
                    continue
                out[name] = value

    def lookup(self, name: str, scope: Scope) -> Any:
        s = scope
        while s is not None:
            if name in s.local:
                return s.local[name], s
            s = s.parent
        binding = self.bindings(scope.module).get(name)
        if binding is None:
            return None, None
        return binding, Scope(scope.module)

    def deref(self, binding: Any, scope: Scope) -> Any:
        """Turn a binding into a ModuleRef / ClassRef / FuncRef / value."""
        if isinstance(binding, tuple) and binding[0] == "import":
            _, mod, attr = binding
            if attr is None:
                return ModuleRef(mod)
            target_mod = f"{mod}.{attr}"
            if self.tree.module_path(target_mod) is not None:
                return ModuleRef(target_mod)
            inner = self.bindings(mod).get(attr)
            if inner is None:
                return UNRESOLVED
            return self.deref(inner, Scope(mod))
        if isinstance(binding, tuple) and binding[0] == "module":
            return ModuleRef(binding[1])
        if isinstance(binding, ast.ClassDef):
            return ClassRef(scope.module, binding)
        if isinstance(binding, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return FuncRef(scope.module, binding)
        if isinstance(binding, (ModuleRef, ClassRef, FuncRef)):
            return binding
        if isinstance(binding, ast.AST):
            return self.value(binding, scope)
        return UNRESOLVED

    def ref(self, node: ast.AST, scope: Scope) -> Any:
        """Resolve a Name/Attribute to a ref or value."""
        if isinstance(node, ast.Name):
            binding, where = self.lookup(node.id, scope)
            if binding is None:
                return UNRESOLVED
            return self.deref(binding, where)
        if isinstance(node, ast.Attribute):
            base = self.ref(node.value, scope)
            return self.attr(base, node.attr)
        return self.value(node, scope)

    def attr(self, base: Any, name: str) -> Any:
        if isinstance(base, ModuleRef):
            sub = f"{base.name}.{name}"
            binding = self.bindings(base.name).get(name)
            if binding is None and self.tree.module_path(sub) is not None:
                return ModuleRef(sub)
            if binding is None:
                return UNRESOLVED
            return self.deref(binding, Scope(base.name))
        if isinstance(base, ClassRef):
            cls_scope = self.class_scope(base)
            if name in cls_scope.local:
                return self.deref(cls_scope.local[name], cls_scope)
            for parent in self.class_bases(base):
                got = self.attr(parent, name)
                if got is not UNRESOLVED:
                    return got
            return UNRESOLVED
        return UNRESOLVED

    def class_scope(self, cls: ClassRef) -> Scope:
        local: dict[str, Any] = {}
        for stmt in cls.node.body:
            local.update(_statement_bindings(stmt, cls.module, class_body=True))
        return Scope(cls.module, local, Scope(cls.module))

    def class_bases(self, cls: ClassRef) -> list[ClassRef]:
        out = []
        for b in cls.node.bases:
            r = self.ref(b, Scope(cls.module))
            if isinstance(r, ClassRef):
                out.append(r)
        return out

    # ---- values ---------------------------------------------------------
    def value(self, node: ast.AST | None, scope: Scope) -> Any:
        if node is None:
            return UNRESOLVED
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    inner = self.value(elt.value, scope)
                    if not isinstance(inner, list):
                        return UNRESOLVED
                    out.extend(inner)
                else:
                    out.append(self.value(elt, scope))
            return out
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:  # {**other}
                    inner = self.value(v, scope)
                    if not isinstance(inner, dict):
                        return UNRESOLVED
                    out.update(inner)
                    continue
                key = self.value(k, scope)
                if key is UNRESOLVED or isinstance(key, (list, dict)):
                    return UNRESOLVED
                out[key] = self.value(v, scope)
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, scope), self.value(node.right, scope)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            return UNRESOLVED
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, scope)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else UNRESOLVED
        if isinstance(node, (ast.Name, ast.Attribute)):
            got = self.ref(node, scope)
            return got if not isinstance(got, (ModuleRef, ClassRef, FuncRef)) else UNRESOLVED
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        if isinstance(node, ast.JoinedStr):
            return UNRESOLVED
        return UNRESOLVED

    def call(self, node: ast.Call, scope: Scope) -> Any:
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        builtin = isinstance(func, ast.Name) and fname in {"list", "tuple", "sorted", "set", "frozenset"}
        if builtin and len(node.args) == 1:
            inner = self.value(node.args[0], scope)
            if isinstance(inner, dict):
                inner = list(inner)
            if not isinstance(inner, list):
                return UNRESOLVED
            return sorted(inner, key=str) if fname == "sorted" else list(inner)
        if isinstance(func, ast.Attribute) and fname == "keys" and not node.args:
            inner = self.value(func.value, scope)
            return list(inner) if isinstance(inner, dict) else UNRESOLVED
        if fname == "_declared_default" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            # server_args.py (0.5.20+): "return a field default" by name.
            return self.field_defaults.get(node.args[0].value, UNRESOLVED)
        if fname == "field" or (isinstance(func, ast.Attribute) and fname == "field"):
            return self.field_call_default(node, scope)
        target = self.ref(func, scope)
        if isinstance(target, FuncRef) and not node.args and not node.keywords:
            return self.function_return(target)
        if isinstance(target, ClassRef) and target.node.name in {"list", "dict"}:
            return UNRESOLVED
        return UNRESOLVED

    def field_call_default(self, node: ast.Call, scope: Scope) -> Any:
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if "default" in kw:
            return self.value(kw["default"], scope)
        factory = kw.get("default_factory")
        if isinstance(factory, ast.Name) and factory.id in {"list", "dict", "set", "tuple"}:
            return {"list": [], "dict": {}, "set": [], "tuple": []}[factory.id]
        if isinstance(factory, ast.Lambda):
            return self.value(factory.body, scope)
        return UNRESOLVED

    def function_return(self, func: FuncRef) -> Any:
        """Value of a no-argument helper: its last top-level ``return``."""
        local: dict[str, Any] = {}
        result = UNRESOLVED
        for stmt in func.node.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
                local.update(_statement_bindings(stmt, func.module))
            if isinstance(stmt, ast.Return):
                result = self.value(stmt.value, Scope(func.module, local, Scope(func.module)))
        return result

    def text(self, node: ast.AST | None, scope: Scope) -> str | None:
        """Help text: constants joined; f-string holes shown as {expr}."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                else:
                    parts.append("{" + ast.unparse(v.value) + "}")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.text(node.left, scope), self.text(node.right, scope)
            if left is not None and right is not None:
                return left + right
        value = self.value(node, scope)
        return value if isinstance(value, str) else None


def _statement_bindings(stmt: ast.stmt, module: str, class_body: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                out[target.id] = stmt.value
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        out[stmt.target.id] = stmt.value
    elif isinstance(stmt, ast.ImportFrom):
        base = _absolute_module(module, stmt.module, stmt.level, class_body)
        for alias in stmt.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = ("import", base, alias.name)
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                out[alias.asname] = ("module", alias.name)
            else:
                top = alias.name.split(".")[0]
                out[top] = ("module", top)
    elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        out[stmt.name] = stmt
    return out


def _absolute_module(current: str, target: str | None, level: int, _class_body: bool = False) -> str:
    if level == 0:
        return target or ""
    parts = current.split(".")
    base = parts[: len(parts) - level]
    return ".".join(base + ([target] if target else []))


# --------------------------------------------------------------------------
# Walking the argument registrations
# --------------------------------------------------------------------------


@dataclass
class Option:
    flags: list[str]
    dest: str
    takes_value: bool
    nargs: Any
    type: str | None
    choices: Any
    action: str
    deprecated: bool
    replacement: str | None
    default: Any
    required: bool
    help: str | None
    origin: str
    deprecated_by: str | None = None
    fatal: bool = False
    conditional: bool = False
    unresolved: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out = {
            "flags": self.flags,
            "dest": self.dest,
            "takes_value": self.takes_value,
            "nargs": self.nargs,
            "type": self.type,
            "choices": self.choices,
            "action": self.action,
            "deprecated": self.deprecated,
            "replacement": self.replacement,
            "default": self.default,
            "required": self.required,
            "help": self.help,
            "origin": self.origin,
        }
        if self.deprecated_by:
            out["deprecated_by"] = self.deprecated_by
        if self.fatal:
            out["fatal"] = True
        if self.conditional:
            out["conditional"] = True
        if self.unresolved:
            out["unresolved"] = sorted(set(self.unresolved))
        return out


class Extractor:
    def __init__(self, tree: SourceTree):
        self.tree = tree
        self.r = Resolver(tree)
        self.options: list[Option] = []
        self.layouts: set[str] = set()
        self._visiting: set[int] = set()

    # ---- entry ----------------------------------------------------------
    def run(self) -> list[Option]:
        bindings = self.r.bindings(ENTRY_MODULE)
        entry = bindings.get("prepare_server_args")
        if isinstance(entry, ast.FunctionDef):
            self.walk(FuncRef(ENTRY_MODULE, entry), parser_names=set())
        if not self.options:
            cls = bindings.get("ServerArgs")
            if isinstance(cls, ast.ClassDef):
                ref = self.r.attr(ClassRef(ENTRY_MODULE, cls), "add_cli_args")
                if isinstance(ref, FuncRef):
                    self.walk(ref, parser_names={_first_param(ref.node)})
        if not self.options:
            raise ManifestError(f"{self.tree.origin}: found no argument registrations in {ENTRY_MODULE}")
        return self.options

    # ---- function bodies ------------------------------------------------
    def walk(self, func: FuncRef, parser_names: set[str], conditional: bool = False) -> None:
        key = id(func.node)
        if key in self._visiting:
            # Already walked (recursion, or a second parser such as 0.5.6's
            # --config merger registering the same arguments again).
            return
        self._visiting.add(key)
        scope = Scope(func.module, {}, Scope(func.module))
        if func.owner is not None:
            scope.parent = self.r.class_scope(func.owner)
        self._walk_body(func.node.body, scope, set(parser_names), conditional)

    def _walk_body(self, body, scope: Scope, parsers: set[str], conditional: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call(stmt.value, scope, parsers, conditional)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                value = stmt.value
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if isinstance(value, ast.Call) and _call_name(value) in {
                    "ArgumentParser",
                    "add_argument_group",
                    "add_mutually_exclusive_group",
                }:
                    parsers.update(names)
                    continue
                if isinstance(value, ast.Call):
                    self._call(value, scope, parsers, conditional)
                for n in names:
                    scope.local[n] = value
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                scope.local.update(_statement_bindings(stmt, scope.module))
            elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                blocks = [getattr(stmt, "body", []), getattr(stmt, "orelse", [])]
                if isinstance(stmt, ast.Try):
                    blocks += [h.body for h in stmt.handlers] + [stmt.finalbody]
                for block in blocks:
                    self._walk_body(block, scope, parsers, conditional or isinstance(stmt, ast.If))

    def _call(self, call: ast.Call, scope: Scope, parsers: set[str], conditional: bool) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            if isinstance(func.value, ast.Name) and func.value.id in parsers:
                self.add_argument(call, scope, conditional)
            return
        name = _call_name(call)
        if name == "add_cli_args_from_dataclass" and len(call.args) >= 2:
            cls = self.r.ref(call.args[1], scope)
            only = None
            for kw in call.keywords:
                if kw.arg == "fields":
                    only = self.r.value(kw.value, scope)
            if isinstance(cls, ClassRef):
                self.layouts.add("dataclass-fields")
                self.dataclass_fields(cls, only if isinstance(only, list) else None, conditional)
            return
        # A helper that receives the parser: follow it (e.g. ServerArgs.add_cli_args(parser)).
        parser_positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id in parsers]
        if not parser_positions:
            return
        target = self.r.ref(func, scope)
        if isinstance(target, FuncRef):
            params = [a.arg for a in target.node.args.args]
            if params and params[0] in {"self", "cls"} and not _is_static(target.node):
                params = params[1:]
            bound = {params[i] for i in parser_positions if i < len(params)}
            owner = None
            if isinstance(func, ast.Attribute):
                owner_ref = self.r.ref(func.value, scope)
                owner = owner_ref if isinstance(owner_ref, ClassRef) else None
            self.walk(FuncRef(target.module, target.node, owner or target.owner), bound, conditional)

    # ---- parser.add_argument(...) ---------------------------------------
    def add_argument(self, call: ast.Call, scope: Scope, conditional: bool) -> None:
        self.layouts.add("add_argument")
        flags = [self.r.value(a, scope) for a in call.args]
        if not flags or any(not isinstance(f, str) for f in flags):
            raise ManifestError(f"{self._where(call, scope)}: cannot read option strings {ast.unparse(call)[:80]}")
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        unresolved: list[str] = []

        def val(key, default=None):
            if key not in kw:
                return default
            got = self.r.value(kw[key], scope)
            if got is UNRESOLVED or _contains_unresolved(got):
                unresolved.append(key)
                return None
            return got

        action_node = kw.get("action")
        action, action_ref = self._action_name(action_node, scope)
        nargs = val("nargs")
        if "nargs" not in kw and action_ref is not None:
            nargs = self._action_default(action_ref, "nargs")
        choices = val("choices")
        if isinstance(choices, (set, frozenset)):
            choices = sorted(choices, key=str)
        type_name = _type_name(kw.get("type"))
        dest = val("dest") or _default_dest(flags)
        default = val("default")
        if "default" not in kw and action_ref is not None:
            default = self._action_default(action_ref, "default")
        extra = {
            "new_flag": val("new_flag"),
            "error_message": val("error_message"),
        }
        opt = self._make_option(
            flags=flags,
            dest=dest,
            action=action,
            action_ref=action_ref,
            nargs=nargs,
            type_name=type_name,
            choices=choices,
            default=default,
            required=bool(val("required", False)),
            help_text=self.r.text(kw.get("help"), scope),
            origin=self._where(call, scope),
            conditional=conditional,
            unresolved=unresolved,
            extra=extra,
            default_given="default" in kw,
        )
        self.options.append(opt)

    def _action_name(self, node: ast.AST | None, scope: Scope) -> tuple[str, ClassRef | None]:
        if node is None:
            return "store", None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, None
        ref = self.r.ref(node, scope)
        label = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else "custom"
        return label, ref if isinstance(ref, ClassRef) else None

    def _action_default(self, cls: ClassRef, param: str) -> Any:
        """Default of ``param`` in a custom Action's __init__ (e.g. DeprecatedAction nargs=0)."""
        seen = [cls] + self.r.class_bases(cls)
        for c in seen:
            for stmt in c.node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                    args = stmt.args
                    positional = args.args
                    defaults = args.defaults
                    offset = len(positional) - len(defaults)
                    for i, a in enumerate(positional):
                        if a.arg == param and i >= offset:
                            return self.r.value(defaults[i - offset], Scope(c.module))
                    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                        if a.arg == param and d is not None:
                            return self.r.value(d, Scope(c.module))
                    return None
        return None

    def _make_option(
        self,
        *,
        flags,
        dest,
        action,
        action_ref,
        nargs,
        type_name,
        choices,
        default,
        required,
        help_text,
        origin,
        conditional,
        unresolved,
        extra,
        default_given=True,
    ) -> Option:
        if action == "BooleanOptionalAction":
            flags = flags + ["--no-" + f[2:] for f in flags if f.startswith("--")]
            takes_value = False
        elif action in _NO_VALUE_ACTIONS:
            takes_value = False
        else:
            takes_value = nargs != 0
        deprecated_by = None
        replacement = extra.get("new_flag")
        fatal = bool(extra.get("error_message"))
        if "Deprecated" in action or (action_ref is not None and _mentions_deprecated(action_ref, self.r)):
            deprecated_by = "action"
        elif help_text and re.match(r"^\W*\[?\(?\s*deprecated\b", help_text, re.I):
            deprecated_by = "help"
        if deprecated_by and not replacement and help_text:
            m = _HELP_REPLACEMENT.search(help_text)
            if m:
                replacement = m.group(1)
        if fatal and not replacement:
            m = _HELP_REPLACEMENT.search(extra["error_message"])
            replacement = m.group(1) if m else None
        if not takes_value:
            nargs = 0 if nargs in (None, 0) else nargs
        if not default_given and action == "store_true":
            default = False  # argparse's own default for store_true
        return Option(
            flags=list(flags),
            dest=dest,
            takes_value=takes_value,
            nargs=nargs,
            type=type_name,
            choices=_jsonable(choices),
            action=action,
            deprecated=deprecated_by is not None,
            replacement=replacement,
            default=_jsonable(default),
            required=required,
            help=help_text,
            origin=origin,
            deprecated_by=deprecated_by,
            fatal=fatal,
            conditional=conditional,
            unresolved=unresolved,
        )

    # ---- dataclass fields (add_cli_args_from_dataclass) -----------------
    def dataclass_fields(self, cls: ClassRef, only: list[str] | None, conditional: bool) -> None:
        fields = self.collect_fields(cls)
        for _name, (owner, stmt) in fields.items():
            default = self._field_default(owner, stmt)
            if default is not _MISSING:
                self.r.field_defaults[stmt.target.id] = default
        for name, (owner, stmt) in fields.items():
            if only is not None and name not in only:
                continue
            opt = self.field_option(owner, stmt, conditional)
            if opt is not None:
                self.options.append(opt)

    def collect_fields(self, cls: ClassRef) -> dict[str, tuple[ClassRef, ast.AnnAssign]]:
        out: dict[str, tuple[ClassRef, ast.AnnAssign]] = {}
        for base in self.r.class_bases(cls):
            out.update(self.collect_fields(base))
        for stmt in cls.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if _is_classvar(stmt.annotation):
                    continue
                out[stmt.target.id] = (cls, stmt)
        # 0.5.20+: ServerArgs' fields come from namespace classes listed in a
        # module-level ``collect_input_fields([...])`` call.
        namespaces, order = self._collected_namespaces(cls.module)
        for ns in namespaces:
            for name, entry in self.collect_fields(ns).items():
                if name in out:
                    raise ManifestError(f"field {name!r} declared twice ({ns.node.name})")
                out[name] = entry
        if order and namespaces:
            known = [n for n in order if n in out]
            rest = [n for n in out if n not in set(order)]
            out = {n: out[n] for n in known + rest}
        return out

    def _collected_namespaces(self, module: str) -> tuple[list[ClassRef], list[str] | None]:
        mod = self.tree.parse(module)
        if mod is None:
            return [], None
        for node in ast.walk(mod):
            if isinstance(node, ast.Call) and _call_name(node) == "collect_input_fields" and node.args:
                scope = Scope(module)
                arg = node.args[0]
                if isinstance(arg, ast.Name):
                    binding, where = self.r.lookup(arg.id, scope)
                    arg = binding if isinstance(binding, ast.AST) else arg
                    scope = where or scope
                elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else []
                classes = [self.r.ref(e, scope) for e in elts]
                classes = [c for c in classes if isinstance(c, ClassRef)]
                self.layouts.add("namespace-fields")
                order = None
                fn = self.r.ref(node.func, scope)
                if isinstance(fn, FuncRef):
                    got = self.r.value(ast.Name(id="POSITIONAL_FIELD_ORDER", ctx=ast.Load()), Scope(fn.module))
                    order = got if isinstance(got, list) else None
                return classes, order
        return [], None

    def _field_default(self, owner: ClassRef, stmt: ast.AnnAssign) -> Any:
        if stmt.value is None:
            return _MISSING
        scope = self.r.class_scope(owner)
        return self.r.value(stmt.value, scope)

    def field_option(self, owner: ClassRef, stmt: ast.AnnAssign, conditional: bool) -> Option | None:
        scope = self.r.class_scope(owner)
        name = stmt.target.id
        ann = stmt.annotation
        if not _is_annotated(ann):
            return None
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        raw_type, metas = elts[0], elts[1:]
        arg: dict[str, ast.AST] | None = None
        help_node = None
        for meta in metas:
            if isinstance(meta, ast.Call) and _call_name(meta) == "Arg":
                arg = {k.arg: k.value for k in meta.keywords if k.arg}
                help_node = arg.get("help")
                break
            if isinstance(meta, ast.JoinedStr) or (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                arg, help_node = {}, meta
                break
            if isinstance(meta, ast.BinOp):
                text = self.r.text(meta, scope)
                if text is not None:
                    arg, help_node = {}, meta
                    break
        if arg is None:
            return None
        unresolved: list[str] = []

        def val(key, default=None):
            if key not in arg:
                return default
            got = self.r.value(arg[key], scope)
            if got is UNRESOLVED or _contains_unresolved(got):
                unresolved.append(key)
                return None
            return got

        if val("no_cli", False):
            return None
        cli_name = val("cli_name") or "--" + name.replace("_", "-")
        flags = [cli_name] + list(val("aliases") or [])
        default = self._field_default(owner, stmt)
        has_default = default is not _MISSING
        if default is UNRESOLVED or _contains_unresolved(default):
            unresolved.append("default")
            default = None
        help_text = self.r.text(help_node, scope)
        origin = self._where(stmt, scope)
        type_parser = arg.get("type_parser")
        parser_name = _type_name(type_parser) if type_parser is not None else None
        common = {
            "flags": flags,
            "dest": name,
            "help_text": help_text,
            "origin": origin,
            "conditional": conditional,
            "unresolved": unresolved,
        }
        # Mirrors sglang/srt/arg_groups/arg_utils.py add_cli_args_from_dataclass.
        if "action" in arg:
            action, action_ref = self._action_name(arg["action"], scope)
            akw = self._action_kwargs(arg.get("action_kwargs"), scope, unresolved)
            nargs = akw.get("nargs", self._action_default(action_ref, "nargs") if action_ref else None)
            return self._make_option(
                action=action,
                action_ref=action_ref,
                nargs=nargs,
                type_name=akw.get("type"),
                choices=akw.get("choices"),
                default=akw.get("default", default if has_default else None),
                required=False,
                extra={"new_flag": akw.get("new_flag"), "error_message": akw.get("error_message")},
                **common,
            )
        inner, _optional = _unwrap_optional(raw_type)
        literal = _literal_values(inner, self.r, scope)
        if literal is not None:
            choices = val("choices") or literal
            elem = type(literal[0]).__name__ if literal else "str"
            return self._make_option(
                action="store",
                action_ref=None,
                nargs=None,
                type_name=parser_name or _scalar_type_name(elem),
                choices=choices,
                default=default if has_default else None,
                required=False,
                extra={},
                **common,
            )
        origin_name, elem_node = _generic(inner)
        if origin_name in {"list", "List"} and type_parser is None:
            elem = elem_node.id if isinstance(elem_node, ast.Name) else "str"
            return self._make_option(
                action="store",
                action_ref=None,
                nargs=val("nargs") or "+",
                type_name=_scalar_type_name(elem),
                choices=val("choices"),
                default=default if has_default else None,
                required=False,
                extra={},
                **common,
            )
        if isinstance(inner, ast.Name) and inner.id == "bool":
            return self._make_option(
                action="store_true",
                action_ref=None,
                nargs=0,
                type_name=None,
                choices=None,
                default=default if has_default else False,
                required=False,
                extra={},
                **common,
            )
        scalar = inner.id if isinstance(inner, ast.Name) else "other"
        required_meta = val("required")
        required = required_meta is True or (required_meta is None and not has_default)
        return self._make_option(
            action="store",
            action_ref=None,
            nargs=val("nargs"),
            type_name=parser_name or _scalar_type_name(scalar),
            choices=val("choices"),
            default=default if has_default else None,
            required=required,
            extra={},
            **common,
        )

    def _action_kwargs(self, node: ast.AST | None, scope: Scope, unresolved: list[str]) -> dict[str, Any]:
        """``Arg(action_kwargs={...})`` entry by entry; ``type`` is kept as a name."""
        if node is None:
            return {}
        if not isinstance(node, ast.Dict):
            unresolved.append("action_kwargs")
            return {}
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            key = self.r.value(k, scope) if k is not None else None
            if not isinstance(key, str):
                unresolved.append("action_kwargs")
                continue
            if key == "type":
                out[key] = _type_name(v)
                continue
            got = self.r.value(v, scope)
            if got is UNRESOLVED or _contains_unresolved(got):
                unresolved.append(key)
                continue
            out[key] = got
        return out

    def _where(self, node: ast.AST, scope: Scope) -> str:
        rel = self.tree.module_path(scope.module) or scope.module
        return f"{rel}:{getattr(node, 'lineno', 0)}"


_MISSING = object()


def _first_param(func: ast.FunctionDef) -> str:
    params = [a.arg for a in func.args.args]
    return params[0] if params else "parser"


def _is_static(func: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)


def _call_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def _default_dest(flags: list[str]) -> str:
    longs = [f for f in flags if f.startswith("--")]
    chosen = longs[0] if longs else flags[0]
    return chosen.lstrip("-").replace("-", "_")


def _type_name(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    if isinstance(node, ast.Lambda):
        return "lambda"
    return ast.unparse(node)[:60]


def _scalar_type_name(name: str) -> str:
    # arg_utils._infer_type_func: str/int/float map to themselves, anything else to str.
    return name if name in {"str", "int", "float"} else "str"


def _is_annotated(ann: ast.AST) -> bool:
    if not isinstance(ann, ast.Subscript):
        return False
    v = ann.value
    return (isinstance(v, ast.Name) and v.id in {"A", "Annotated"}) or (
        isinstance(v, ast.Attribute) and v.attr == "Annotated"
    )


def _is_classvar(ann: ast.AST) -> bool:
    target = ann.value if isinstance(ann, ast.Subscript) else ann
    return (isinstance(target, ast.Name) and target.id == "ClassVar") or (
        isinstance(target, ast.Attribute) and target.attr == "ClassVar"
    )


def _generic(node: ast.AST) -> tuple[str | None, ast.AST | None]:
    if isinstance(node, ast.Subscript):
        base = node.value
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        return name, inner
    return None, None


def _unwrap_optional(node: ast.AST) -> tuple[ast.AST, bool]:
    name, _ = _generic(node)
    if name == "Optional":
        return node.slice, True
    if name == "Union" and isinstance(node.slice, ast.Tuple):
        non_none = [e for e in node.slice.elts if not _is_none(e)]
        if len(non_none) == 1 and len(node.slice.elts) == 2:
            return non_none[0], True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        non_none = [p for p in parts if not _is_none(p)]
        if len(non_none) == 1:
            return non_none[0], True
    return node, False


def _is_none(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or (isinstance(node, ast.Name) and node.id == "None")


def _literal_values(node: ast.AST, r: Resolver, scope: Scope) -> list | None:
    name, _ = _generic(node)
    if name != "Literal":
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = [r.value(e, scope) for e in elts]
    return None if any(v is UNRESOLVED for v in values) else values


def _mentions_deprecated(cls: ClassRef, r: Resolver) -> bool:
    chain = [cls] + r.class_bases(cls)
    return any("Deprecated" in c.node.name for c in chain)


def _contains_unresolved(value: Any) -> bool:
    if value is UNRESOLVED:
        return True
    if isinstance(value, dict):
        return any(_contains_unresolved(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains_unresolved(v) for v in value)
    return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return None


# --------------------------------------------------------------------------
# Manifest assembly
# --------------------------------------------------------------------------


def build_manifest(path: Path) -> dict[str, Any]:
    tree = SourceTree.open(path)
    extractor = Extractor(tree)
    options = extractor.run()
    seen: dict[str, str] = {}
    for opt in options:
        for flag in opt.flags:
            if flag in seen:
                raise ManifestError(f"{flag} registered twice ({seen[flag]} and {opt.origin})")
            seen[flag] = opt.origin
    used = sorted(tree.used)
    unresolved = sorted(f"{opt.flags[0]}:{name}" for opt in options for name in opt.unresolved)
    return {
        "manifest_format": MANIFEST_FORMAT,
        "sglang_version": tree.version(),
        "generated_by": "tools/build_flag_manifest.py (static ast analysis, no sglang/torch import)",
        "source": f"{tree.origin}: " + ", ".join(used),
        "source_sha256": tree.archive_sha256,
        "source_files": {rel: hashlib.sha256(tree.files[rel]).hexdigest() for rel in used},
        "layout": sorted(extractor.layouts),
        "requires": tree.pinned_requirements(),
        "option_count": len(options),
        "unresolved": unresolved,
        "options": [opt.as_json() for opt in options],
    }


def write_manifest(manifest: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"sglang-{manifest['sglang_version']}.json"
    text = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
    if not target.exists() or target.read_text() != text:
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(text)
        os.replace(tmp, target)
    return target


def _version_key(version: str) -> Any:
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # noqa: BLE001 - unparsable versions sort last, by text
        return (1, version)


def build_history(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """Which releases know each flag, and what its deprecation said.

    Only flags that are missing from some release or change their deprecation
    are listed; check_argv uses this to explain a flag a release no longer has.
    """
    manifests = sorted(manifests, key=lambda m: _version_key(m["sglang_version"]))
    versions = [m["sglang_version"] for m in manifests]
    states: dict[str, dict[str, Any]] = {}
    for m in manifests:
        for opt in m["options"]:
            state = {
                "deprecated": bool(opt.get("deprecated")),
                "replacement": opt.get("replacement"),
                "action": opt.get("action"),
            }
            for flag in opt["flags"]:
                states.setdefault(flag, {})[m["sglang_version"]] = state
    flags: dict[str, Any] = {}
    for flag in sorted(states):
        seen = states[flag]
        present = [v for v in versions if v in seen]
        distinct = {json.dumps(seen[v], sort_keys=True) for v in present}
        if len(present) == len(versions) and len(distinct) == 1:
            continue
        changes = []
        previous = None
        for v in present:
            if seen[v] != previous:
                changes.append({"version": v, **seen[v]})
                previous = seen[v]
        entry = {"first": present[0], "last": present[-1], "changes": changes}
        span = versions[versions.index(present[0]) : versions.index(present[-1]) + 1]
        gaps = [v for v in span if v not in seen]
        if gaps:
            entry["missing_in"] = gaps
        flags[flag] = entry
    return {
        "manifest_format": MANIFEST_FORMAT,
        "generated_by": "tools/build_flag_manifest.py --history",
        "versions": versions,
        "sources": {m["sglang_version"]: m.get("source_sha256") for m in manifests},
        "flags": flags,
    }


def fetch_wheel(version: str, cache: Path) -> Path:
    """Return a local sglang==version wheel/sdist, downloading it with pip if needed."""
    folder = cache / version
    found = sorted(folder.glob("sglang-*.whl")) + sorted(folder.glob("sglang-*.tar.gz")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), f"sglang=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ManifestError(f"pip download sglang=={version} failed:\n{proc.stderr.strip()[-2000:]}")
    found = sorted(folder.glob("sglang-*.whl")) + sorted(folder.glob("sglang-*.tar.gz"))
    if not found:
        raise ManifestError(f"pip download sglang=={version} left no wheel in {folder}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="SGLang wheels (.whl), sdists (.tar.gz) or unpacked trees")
    ap.add_argument(
        "--version",
        action="append",
        default=[],
        help="SGLang version to fetch with `pip download --no-deps` (cached in --wheel-cache); repeatable",
    )
    ap.add_argument("--wheel-cache", type=Path, default=Path(os.environ.get("SGLANG_WHEEL_CACHE", DEFAULT_WHEEL_CACHE)))
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--print", action="store_true", help="print the manifest to stdout instead of writing a file")
    ap.add_argument(
        "--history",
        type=Path,
        help="also write the flag history (first/last release, deprecations) over every sglang-*.json in --out-dir",
    )
    args = ap.parse_args(argv)
    if not args.paths and not args.version and not args.history:
        ap.error("give a wheel/sdist path, --version or --history")
    try:
        sources = list(args.paths) + [fetch_wheel(v, args.wheel_cache) for v in args.version]
        for src in sources:
            manifest = build_manifest(src)
            if args.print:
                json.dump(manifest, sys.stdout, indent=1)
                sys.stdout.write("\n")
                continue
            target = write_manifest(manifest, args.out_dir)
            print(
                f"{target}: {manifest['option_count']} options from {src.name} "
                f"(layout {'+'.join(manifest['layout'])}, {len(manifest['unresolved'])} unresolved values)"
            )
        if args.history:
            found = sorted(args.out_dir.glob("sglang-*.json"))
            history = build_history([json.loads(p.read_text()) for p in found])
            args.history.parent.mkdir(parents=True, exist_ok=True)
            args.history.write_text(json.dumps(history, indent=1) + "\n")
            print(
                f"{args.history}: history of {len(history['flags'])} changing flags "
                f"over {', '.join(history['versions'])}"
            )
    except ManifestError as exc:
        print(f"build_flag_manifest: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
