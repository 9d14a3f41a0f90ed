"""Slim, validated projections of API objects: the only shape the model ever reads.

Both `stalewatch analyze` (files) and the live watcher call `project()` on every object
before it reaches the model, so the rules can trust types and never see a Secret's data,
a managedFields blob or a 50 KiB condition message. The live watcher keeps only these
projections, which is why they are small: a typical Pod is under 1 KiB as JSON (about
2.2 KiB as Python objects). A Pod keeps no spec (its images are in containerStatuses),
container states keep no times, managedFields shrink to who wrote when and the paths of the
fields each owns (not for Pods and Events; the model keeps the paths only for objects whose
writers fight, rules/writers.py), and an empty string is left out (it reads the same as absent).

The fields and their bounds are declared in schema.py; checks.py compiles each schema node
into a check, and this module runs a kind's checks over an object, section by section. Per field
the schema says what happens when the value is wrong:
  * strict fields (kind, apiVersion, metadata.name/namespace/generation,
    status.observedGeneration, the status.conditions list itself, and anything beyond a
    sane size) raise MalformedObject: the object cannot be judged correctly without them;
  * in every other field a wrong value is REJECTED: the field is dropped, the rest of the
    object kept, and the projection says so under `rejected` (a list of {field, reason,
    value}; a types.RejectReason each), which the model reports. Wrong is a value of another
    type than the field's (a string where an object belongs, a label whose value is a number,
    a whole `status` that is a list), a timestamp that is no RFC3339 time or no moment in
    years 1-9999 once in UTC, an integer past int64 or a number where a count belongs, a
    number of seconds past a century. When the wrong field is one its entry cannot do without
    (a condition's type or status), the entry goes with it, under the field's name. Nothing
    downstream ever meets such a value, so no rule has to guard its arithmetic, and no field
    stalewatch reads is ever left out without saying so.
What is left out quietly is what reads the same as absent: null, "", an empty entry, an entry
without a field it needs (a condition with no status: nothing to read), and fields not read.
Unknown fields are ignored. Long messages are truncated to MESSAGE_LIMIT characters.
events.k8s.io/v1 Events are projected under their core/v1 field names.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.checks import MAX_REJECTED, Check, Malformed, Partial, Rejected, compiled
from watcher.model.ingest.schema import EVENTS_V1_RENAMES, kind_schema
from watcher.model.ingest.schema_nodes import MESSAGE_LIMIT as MESSAGE_LIMIT
from watcher.model.types import RejectReason

REJECTED = "rejected"
"""The projection's key for its rejected fields (no Kubernetes object has one at top level)."""


class MalformedObject(ValueError):
    """The object cannot be used; the message is one line naming the object and the field."""


def project(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only what the model reads, validated; raise MalformedObject when unusable."""
    if not isinstance(obj, Mapping):
        raise MalformedObject("object is not a mapping")
    kind, api_version, metadata = obj.get("kind"), obj.get("apiVersion"), obj.get("metadata")
    if not isinstance(kind, str) or not kind:
        raise MalformedObject("object has no kind")
    if not isinstance(api_version, str) or not api_version:
        raise MalformedObject(f"{kind}: object has no apiVersion")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise MalformedObject(f"{kind}: object has no metadata.name")
    try:
        return _project(obj, kind, api_version, metadata)
    except Malformed as error:
        namespace = metadata.get("namespace")
        where = f"{kind} {namespace}/{metadata['name']}" if namespace else f"{kind} {metadata['name']}"
        raise MalformedObject(f"{where}: {error.where()} {error.problem}") from None


def project_or_problem(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """(the projection, "") or (None, why the model cannot use the object), never an exception:
    for the watcher and `stalewatch analyze`, which set the object aside and go on."""
    try:
        return project(obj), ""
    except MalformedObject as error:
        return None, str(error)
    except Exception as error:  # the model tripped on odd input: a bug, but the rest must go on
        return None, f"could not be projected ({type(error).__name__}: {error}); this is a stalewatch bug"


def _project(
    obj: Mapping[str, Any], kind: str, api_version: str, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    schema = kind_schema(api_version.rpartition("/")[0], kind)
    rejected: list[dict[str, str]] = []
    meta = _section(compiled(schema.metadata), metadata, "metadata", rejected)
    out: dict[str, Any] = {"apiVersion": sys.intern(api_version), "kind": sys.intern(kind), "metadata": meta}
    for name, fields in schema.sections.items():
        if not fields.fields:  # nothing read (a ConfigMap's spec): nothing to say of it
            continue
        if name:
            section = _section(compiled(fields), obj.get(name), name, rejected)
            if section:
                out[name] = section
        else:  # fields at the top level: an Event's, under their core/v1 names
            top = {EVENTS_V1_RENAMES.get(k, k): v for k, v in obj.items()}
            out.update(_section(compiled(fields), top, "", rejected))
    if rejected:
        out[REJECTED] = rejected
    return out


def _section(check: Check, value: Any, name: str, rejected: list[dict[str, str]]) -> dict[str, Any]:
    """A top-level section: absent or not an object means empty (strictness is per field).

    Read once: every wrong value in it comes back in one Partial with what was kept."""
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        if name:  # a `status` that is a string or a list: nothing in it can be read
            rejected.append(_mark(name, Rejected(RejectReason.WRONG_TYPE, value, "is not an object")))
        return {}
    try:
        section: dict[str, Any] = check(value)
        return section
    except Partial as partial:
        if len(partial.rejected) > MAX_REJECTED:
            too_many = Malformed(f"has more than {MAX_REJECTED} wrong values")
            too_many.path.append(name)
            raise too_many from None
        for error in partial.rejected:
            rejected.append(_mark(f"{name}.{error.where()}" if name else error.where(), error))
        kept: dict[str, Any] = partial.kept or {}
        return kept
    except Malformed as error:
        if name:
            error.path.append(name)
        raise


def _mark(field: str, error: Rejected) -> dict[str, str]:
    return {"field": field, "reason": str(error.reason), "value": error.value, "problem": error.problem}
