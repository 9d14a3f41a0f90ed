"""ObjectFailing, told who applied it: the Kustomization or HelmRelease that installed the object;
or, for an object its owner made (a CronJob's Job), under the owner's own ObjectFailing.

The failing object stays the root (it is where the fix goes); what applied it is in its blast
radius, and the message says whether that applier can see the failure at all: a Kustomization
with neither `spec.wait` nor `spec.healthChecks` says Ready=True whatever the objects it applied
do, and Helm's wait only looks at workloads, Services, PVCs (and Jobs when asked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watcher.model.ingest.objects import Key, condition, controller_owner, describe, dig, subject_of
from watcher.model.store.graph import release_of
from watcher.model.store.working import Pass
from watcher.model.types import FindingType


def link_appliers(run: Pass) -> None:
    for finding in run.each(FindingType.OBJECT_FAILING):
        obj = run.store.get(run.keys[finding.id])
        owner = _failing_owner(run, obj) if obj is not None else None
        if owner is not None:  # a CronJob's failed Job: the CronJob is the root, and its stack's
            run.links[finding.id] = owner
            continue
        applier = release_of(run.store, obj) if obj is not None else None
        installer = run.store.get(applier) if applier is not None else None
        if applier is None or installer is None:
            continue
        run.extra[finding.id].append(subject_of(installer))
        finding.message += f" {_blind_spot(applier, installer)}"
        applied_by = f"{applier.kind}/{applier.namespace}/{applier.name}"
        finding.evidence = {**finding.evidence, "applied_by": applied_by}


def _blind_spot(applier: Key, obj: Mapping[str, Any]) -> str:
    ready = condition(obj, "Ready")
    says = f"says Ready={ready['status']}" if ready is not None else "has no Ready condition"
    what = f"{describe(applier)} applied it and {says}"
    if ready is None or ready["status"] != "True":
        return f"{what}."
    if (
        applier.kind == "Kustomization"
        and dig(obj, "spec", "wait") is not True
        and not dig(obj, "spec", "healthChecks")
    ):
        return (
            f"{what}: it has no health checks, so Flux does not see this (`spec.wait: true` or "
            "`spec.healthChecks` would make it)."
        )
    return f"{what}: its health checks do not look at this kind."


def _failing_owner(run: Pass, obj: Mapping[str, Any]) -> str | None:
    """The primary ObjectFailing of the object's controller owner (ownerReferences), if it has one."""
    owner = controller_owner(obj)
    primary = run.primary(owner) if owner is not None and run.store.get(owner) is not None else None
    return primary if primary is not None and run.found[primary].type is FindingType.OBJECT_FAILING else None
