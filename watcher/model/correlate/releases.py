"""ReleaseReadyWorkloadFailing: a release that says Ready=True while what it installed fails.

Each failing workload or Pod links to its owner's finding and to the release that installed it
(found through store/owners.py). Under churn the same releases are built again on every pass; what a
release finding says comes from the release, the workload it installed and the first failing
object's candidate, so `ReleaseMemo` keeps it until one of those is replaced (the engine makes
a new candidate whenever it judges an object again, and the store a new release object whenever
it changes), and every pass only adds the other failing objects to a fresh copy.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from watcher.model.ingest.objects import (
    Key,
    condition,
    condition_evidence,
    describe,
    is_true,
    subject_of,
)
from watcher.model.rules.context import new_finding
from watcher.model.rules.controllers import ControllerState
from watcher.model.rules.workload_words import describe_state
from watcher.model.rules.workloads import WorkloadState, state_of
from watcher.model.store.working import Pass
from watcher.model.types import Finding, FindingType, rfc3339


@dataclass(frozen=True, slots=True)
class _Seed:
    """A release finding as its first failing object makes it, and the inputs it was made from."""

    release: Mapping[str, Any]
    installed: Key
    failing: Finding
    """The candidate (not the pass's copy) of the first failing object."""
    finding: Finding
    """With "failing" empty in its evidence: every pass lists them afresh, on a copy."""


class ReleaseMemo:
    """Release findings and failing states kept across passes while their inputs are the same objects."""

    def __init__(self) -> None:
        self._seeds: dict[Key, _Seed] = {}
        self._states: dict[Key, tuple[Finding, WorkloadState]] = {}
        """By the failing object's key (its one WorkloadUnhealthy)."""
        self._used: set[Key] = set()
        self._used_seeds: set[Key] = set()

    def state(self, run: Pass, finding_id_: str) -> WorkloadState:
        """The failing state of the object behind a finding (it exists: owners said so)."""
        candidate = run.origin[finding_id_]
        key = run.keys[finding_id_]
        self._used.add(key)
        kept = self._states.get(key)
        if kept is not None and kept[0] is candidate:
            return kept[1]
        obj = run.store.get(key)
        assert obj is not None
        state = state_of(obj)
        self._states[key] = (candidate, state)
        return state

    def seed(
        self, run: Pass, key: Key, release: Mapping[str, Any], installed: Key, failing: Finding
    ) -> Finding:
        """The release finding of the release at `key`, its "failing" list empty (see _Seed)."""
        self._used_seeds.add(key)
        candidate = run.origin[failing.id]
        kept = self._seeds.get(key)
        if (
            kept is not None
            and kept.release is release
            and kept.installed == installed
            and kept.failing is candidate
        ):
            return kept.finding
        state = self.state(run, failing.id)
        subject = subject_of(release)
        ready = condition(release, "Ready") or {}
        what = f"{describe(installed)} it installed"
        if installed != run.keys[failing.id]:
            what += f" is failing: {describe(failing.subject)}"
        message = (
            f"{describe(subject)} says Ready=True ({ready.get('message', '')}) but {what} "
            f"{describe_state(state)} since {rfc3339(failing.since)}. The release status does not reflect "
            "the running workload: fix or roll back the release (values, image, chart version)."
        )
        evidence = {
            **condition_evidence(release, "Ready"),
            "workload": f"{installed.kind}/{installed.namespace}/{installed.name}",
            "failing": [],
            "reason": failing.evidence.get("reason", ""),
            "image": failing.evidence.get("image", ""),
        }
        kind = FindingType.RELEASE_READY_WORKLOAD_FAILING
        finding = new_finding(run.config, kind, subject, message, failing.since, evidence)
        self._seeds[key] = _Seed(release, installed, candidate, finding)
        return finding

    def end_pass(self, scope: Collection[Key] | None = None) -> None:
        """Keep only what this pass used: the rest is about objects no longer failing. A pass
        over a `scope` of subjects keeps what is about subjects outside it."""
        for kept, used in ((self._states, self._used), (self._seeds, self._used_seeds)):
            for key in kept.keys() - used if scope is None else [k for k in scope if k in kept]:
                if key not in used:
                    del kept[key]
        self._used, self._used_seeds = set(), set()

    def clear(self) -> None:
        self._seeds.clear()
        self._states.clear()


def link_releases(run: Pass, own_pods: Mapping[Key, ControllerState], memo: ReleaseMemo) -> None:
    """Pod -> workload links, and ReleaseReadyWorkloadFailing for releases that say Ready=True."""
    failing = [f for f in run.found.values() if f.type is FindingType.WORKLOAD_UNHEALTHY]
    explained: set[str] = set()
    findings: dict[Key, Finding | None] = {}
    """Per release asked about in this pass: its finding, None if it says nothing wrong."""
    for finding in sorted(failing, key=lambda f: (f.subject["kind"] != "Pod", f.id)):  # Pods say most
        key = run.keys[finding.id]
        run.view.reading(key)
        owners = run.owners.of(key, run.store)
        if owners is None or key in own_pods:
            continue
        workload_key = owners.workload
        owner_finding = (
            run.primary(workload_key) if workload_key is not None and workload_key != key else None
        )
        if owner_finding is not None and owner_finding not in explained:
            explained.add(owner_finding)
            owner = run.found[owner_finding]
            owner.message += f" {describe(finding.subject)} {describe_state(memo.state(run, finding.id))}."
        link = owner_finding
        release = owners.release
        if release is None:
            rrwf = None
        elif release in findings:
            run.view.note(release)  # what it answered was read for this one too
            rrwf = findings[release]
            if rrwf is not None and rrwf.type is FindingType.RELEASE_READY_WORKLOAD_FAILING:
                _also_failing(rrwf, finding)
        else:
            rrwf = findings[release] = _release_finding(
                run, memo, release, workload_key or key, finding, own_pods
            ) or _failing_release(run, memo, release, finding, own_pods)
        if rrwf is not None:
            if owner_finding is not None:
                run.links.setdefault(owner_finding, rrwf.id)
            else:
                link = rrwf.id
        if link is not None:
            run.links[finding.id] = link
    run.view.reading(None)


_RELEASE_FAILURES = (FindingType.STALLED, FindingType.RECONCILE_FAILED)
"""A HelmRelease's own verdicts on its install or upgrade (Helm waited for the workload); not a
cached report (StatusStale) nor a wait on other objects, which say nothing about the workload."""


def _failing_release(
    run: Pass, memo: ReleaseMemo, key: Key, failing: Finding, own_pods: Mapping[Key, ControllerState]
) -> Finding | None:
    """The primary finding of a release that says it failed (Stalled after Helm's wait timed
    out, ReconcileFailed, ...), told what it installed does: one failure, one root. Helm's own
    message names only the timeout (or, past it, a client rate limiter), not the workload."""
    primary = run.primary(key) if key.kind == "HelmRelease" and key not in own_pods else None
    found = run.found[primary] if primary is not None else None
    if found is None or found.type not in _RELEASE_FAILURES:
        return None
    found.message += (
        f" What it installed fails: {describe(failing.subject)} "
        f"{describe_state(memo.state(run, failing.id))} since {rfc3339(failing.since)}."
    )
    return found


def _also_failing(rrwf: Finding, failing: Finding) -> None:
    rrwf.evidence["failing"].append(describe(failing.subject))
    if failing.since is not None and (rrwf.since is None or failing.since < rrwf.since):
        rrwf.since = failing.since


def _release_finding(
    run: Pass,
    memo: ReleaseMemo,
    key: Key,
    installed: Key,
    failing: Finding,
    own_pods: Mapping[Key, ControllerState],
) -> Finding | None:
    """ReleaseReadyWorkloadFailing for the release at `key` if it says Ready=True (and is no
    controller's own), which installed `installed`; `failing` is the first object that fails."""
    release = run.store.get(key)
    if release is None or key in own_pods or not is_true(release, "Ready"):
        return None
    copy = run.add(memo.seed(run, key, release, installed, failing), key=key)
    copy.evidence = {**copy.evidence, "failing": [describe(failing.subject)]}
    return copy
