"""PolicyDenied across the graph: the stacks a denial stops and the policies that deny it.

A PolicyDenied finding (rules/denials.py judges one object) enters with its trying object's key;
a correlation pass hands in its working set (store/working.py's Pass). What leaves: one finding
per trying object (`merge`), its stacks named and counted as affected (`link_stacks`), what it
causes above the object linked as its symptoms, and the policy objects it can see, each with the
stack that installed it (`link_policies`): the team to ask for an exception.
"""

from __future__ import annotations

from collections.abc import Callable

from watcher.model.ingest.objects import Key, describe, subject_of
from watcher.model.store.graph import installer_or_owner, release_of
from watcher.model.store.working import Pass
from watcher.model.types import Finding, FindingType, Subject

PolicyObjects = Callable[[str, str, str], list[Key]]
"""(engine, policy, namespace) -> the objects that policy may be (compliance.Compliance.policy_objects)."""
MAX_STACKS = 8
"""How far up `link_stacks` follows installers (a Kustomization tree is rarely deeper than 3)."""


def merge(kept: Finding, other: Finding) -> None:
    """Two candidates about one trying object (Events with other reasons, or an Event beside a
    Flux object's condition): one finding, with every policy, every denial counted, the earliest
    start. `kept` is a correlation pass's working copy: its evidence is replaced, not mutated.
    An Event's evidence has count and last, a condition's every (its retry interval)."""
    ours, theirs = kept.evidence, other.evidence
    merged = {**theirs, **ours}
    merged["policies"] = list(dict.fromkeys([*ours["policies"], *theirs["policies"]]))
    merged["denials"] = list(dict.fromkeys([*ours["denials"], *theirs["denials"]]))
    merged["controller"] = ours["controller"] or theirs["controller"]
    if "count" in ours and "count" in theirs:
        merged["count"] = ours["count"] + theirs["count"]
        merged["last"] = max(ours["last"], theirs["last"])
    kept.evidence = merged
    if other.since is not None and (kept.since is None or other.since < kept.since):
        kept.since = other.since


def link_stacks(run: Pass) -> None:
    """Each PolicyDenied names the stacks above its trying object: the release or Kustomization
    that installed it (graph.release_of) or its owning workload's, then the one that installed
    that, up to MAX_STACKS; a trying Kustomization or HelmRelease is itself the first. They are
    affected by it, and what it causes on the way up (CAUSED) is its symptom."""
    for finding in run.each(FindingType.POLICY_DENIED):
        key: Key | None = run.keys[finding.id]
        stacks: list[Subject] = []
        seen: set[Key] = set()
        while key is not None and key not in seen and len(stacks) < MAX_STACKS:
            seen.add(key)
            obj = run.store.get(key)
            if obj is None:
                break
            if key.kind in ("Kustomization", "HelmRelease"):
                stacks.append(subject_of(obj))
            _explain(run, key, finding)
            key = installer_or_owner(run.store, obj)
        if not stacks:
            continue
        named = [f"{s['kind']}/{s['namespace']}/{s['name']}" for s in stacks]
        finding.evidence = {**finding.evidence, "stacks": named}
        finding.message += f" Stacks affected: {', '.join(describe(s) for s in stacks)}."
        run.extra[finding.id].extend(s for s in stacks if s != finding.subject)


CAUSED: frozenset[FindingType] = frozenset(
    {FindingType.WORKLOAD_UNHEALTHY, FindingType.RELEASE_READY_WORKLOAD_FAILING}
)
"""What a denied write causes above the trying object: a Deployment whose ReplicaSet may not
create Pods has none available, and the HelmRelease that installed it says Ready over it."""


def _explain(run: Pass, key: Key, denied: Finding) -> None:
    """The primary finding on `key` (an owner or installer of the trying object) is a symptom of
    the denial when it is of a type the denial causes."""
    primary = run.primary(key)
    if primary is not None and primary != denied.id and run.found[primary].type in CAUSED:
        run.links[primary] = denied.id


def link_policies(run: Pass, policies: PolicyObjects) -> None:
    """Each PolicyDenied names the policy objects it can see (a Gatekeeper constraint, a Kyverno
    ClusterPolicy or Policy) and the stack that installed each (graph.release_of): the team to
    ask for an exception. Read through the pass's view, so a change to one correlates again."""
    for finding in run.each(FindingType.POLICY_DENIED):
        namespace = run.keys[finding.id].namespace
        named: list[str] = []
        installers: list[str] = []
        for policy in finding.evidence["policies"]:
            for key in policies(finding.evidence["engine"], policy, namespace):
                obj = run.store.get(key)
                if obj is None:
                    continue
                stack = release_of(run.store, obj)
                named.append(describe(key))
                installers.append(describe(stack) if stack is not None else "")
        if not named:
            continue
        finding.evidence = {**finding.evidence, "policy_objects": named, "policy_installed_by": installers}
        said = [
            f"{what} (installed by {who})" if who else f"{what} (installed by no stack stalewatch knows)"
            for what, who in zip(named, installers, strict=True)
        ]
        finding.message += f" Denied by {', '.join(said)}."
