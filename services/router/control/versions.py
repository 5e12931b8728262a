"""The versioned documents of the policy store: a policy (`config/policies/<name>.yaml`) or the tenants
document (`config/tenants.yaml`). Parsing, validation, content hashes, version ids and diffs. Pure.

A document is validated completely before it can be stored: YAML syntax, every key and value (the
dataclasses of `policy.py` and `tenants.py`), and for a policy the custom blocklist automaton is
built once. Errors are `ConfigError`s reading `<source>: <key.path>: <problem>`, where `source` is the
file for a file import and `policy/<name>` or `tenants` for the admin API.

Example::

    doc = parse_document("policy", Path("config/policies/default.yaml").read_text(), "policy/default")
    doc.version         # "2026-12-01.1" (the document's own `version` field is its id)
    diff(doc_a, doc_b)  # [Change("categories.hate.block", "changed", "0.9", "0.8"), ...]
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping

import yaml

from services.common.config import ConfigError, load_dataclass
from services.router.policy import CompiledPolicy, PolicyDocument, compile_policy
from services.router.tenants import TenantDirectory, TenantsFile, build_directory

Kind = Literal["policy", "tenants"]
KINDS: tuple[Kind, ...] = ("policy", "tenants")
TENANTS_NAME = "tenants"
#: Version ids: what a policy's `version` field may contain (they appear in responses and URLs).
#: `<tenant>:<id>` marks a tenant's own version (admin_auth.version_owner); tenant ids may hold '_'.
VERSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+_-]{0,63}$")
#: libyaml's parser when PyYAML has it: 5x faster on a large blocklist, and parsing holds the GIL the
#: request path also needs.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ParsedDocument:
    """A validated document: its identity, its text as given, and its canonical form."""

    kind: Kind
    name: str
    version: str
    content: str
    canonical: Mapping[str, Any]
    content_hash: str
    #: A policy's compiled form (its automaton built once, at validation); None for tenants.
    compiled: CompiledPolicy | None = None


@dataclass(frozen=True)
class Change:
    """One key that differs between two versions. Values are JSON ("" when absent)."""

    path: str
    op: Literal["added", "removed", "changed"]
    before: str
    after: str


def parse_yaml_text(text: str, source: str) -> Any:
    """Parse YAML; a syntax error becomes a ConfigError naming the line."""
    try:
        return yaml.load(text, Loader=_LOADER) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "syntax"
        raise ConfigError(source, where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


def parse_document(kind: Kind, text: str, source: str, *, name: str = "") -> ParsedDocument:
    """Validate `text` as a document of `kind`. For a policy, `name` (when given) must equal its `name`."""
    data = parse_yaml_text(text, source)
    if kind == "policy":
        policy = compile_policy_text(data, source, name)
        written = policy.written or policy.document  # as written: a migration must not change a stored version's hash
        return dataclasses.replace(_parsed(kind, policy.name, policy.version, text, written, source), compiled=policy)
    tenants = load_dataclass(TenantsFile, data, source)
    build_directory(tenants, source, None)
    version = tenants.version or f"sha-{_digest(_canonical(tenants, drop='version'))[:12]}"
    return _parsed(kind, TENANTS_NAME, version, text, dataclasses.replace(tenants, version=version), source)


def compile_policy_text(data: Any, source: str, name: str = "") -> CompiledPolicy:
    """Validate and compile parsed policy data (builds its blocklist automaton)."""
    document = load_dataclass(PolicyDocument, data, source)
    if name and document.name != name:
        raise ConfigError(source, "name", f"must equal {name!r}, got {document.name!r}")
    return compile_policy(document)


def compile_stored_policy(text: str, source: str) -> CompiledPolicy:
    """Compile a stored policy version (validated when it was put) for the request path."""
    return compile_policy_text(parse_yaml_text(text, source), source)


def tenants_directory(text: str, source: str, known_policies: set[str]) -> TenantDirectory:
    """Build the tenant directory of a stored tenants version; every named policy must be known."""
    parsed = load_dataclass(TenantsFile, parse_yaml_text(text, source), source)
    return build_directory(parsed, source, known_policies)


def _parsed(kind: Kind, name: str, version: str, text: str, value: Any, source: str) -> ParsedDocument:
    if not VERSION_ID.match(version):
        raise ConfigError(source, "version", f"must be 1-64 letters, digits or '._:+_-' starting with a letter or "
                                             f"digit, got {version!r}")
    canonical = _canonical(value)
    return ParsedDocument(kind, name, version, text, canonical, _digest(canonical))


#: Keys added after versions were first stored, left out of the canonical form while empty: a version
#: written before the key existed keeps its digest, so its config file still imports as the same version.
_OMITTED_WHEN_EMPTY = ("subcategories",)


def _canonical(value: Any, drop: str = "") -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(value), sort_keys=True, default=str))
    plain.pop(drop, None)
    for key in _OMITTED_WHEN_EMPTY:
        if key in plain and not plain[key]:
            del plain[key]
    return plain


def _digest(canonical: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted.path: leaf} of nested mappings; lists are leaves."""
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key in sorted(value):
            flat.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def diff(before: ParsedDocument, after: ParsedDocument) -> list[Change]:
    """Every key path whose value differs between two documents, sorted by path."""
    old, new = flatten(before.canonical), flatten(after.canonical)
    changes = []
    for path in sorted(set(old) | set(new)):
        if path not in new:
            changes.append(Change(path, "removed", _json(old[path]), ""))
        elif path not in old:
            changes.append(Change(path, "added", "", _json(new[path])))
        elif old[path] != new[path]:
            changes.append(Change(path, "changed", _json(old[path]), _json(new[path])))
    return changes


def unified_diff(before: ParsedDocument, after: ParsedDocument) -> str:
    """A unified diff of the two documents' texts."""
    lines = difflib.unified_diff(before.content.splitlines(keepends=True), after.content.splitlines(keepends=True),
                                 f"{before.name}@{before.version}", f"{after.name}@{after.version}")
    return "".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
