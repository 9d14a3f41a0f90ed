"""The heartbeat rules read the same of an object as stalewatch keeps it (projected: the schema
keeps only declared fields) as of the object the API server sends: every case of
test_heartbeat_rules again, on the projection. A field the rules read and the schema drops
(spec.timeout, a HelmRepository's spec.type) would make a false NotReconciling in `run`."""

from __future__ import annotations

import pytest

from tests.model.test_heartbeat_rules import DUE_WINDOWS, NOT_RECONCILING, NOW
from watcher.model.ingest.projection import project
from watcher.model.rules.heartbeat_rules import DEFAULT_HEARTBEAT_THRESHOLDS, due_window, not_reconciling


@pytest.mark.parametrize("case", DUE_WINDOWS)
def test_a_projected_object_has_the_due_window_of_the_object(case: str) -> None:
    obj, window = DUE_WINDOWS[case]
    assert due_window(project(obj), DEFAULT_HEARTBEAT_THRESHOLDS) == window


@pytest.mark.parametrize("case", NOT_RECONCILING)
def test_a_projected_object_has_the_not_reconciling_verdict_of_the_object(case: str) -> None:
    obj, beat, controller, liveness, outcome, reason = NOT_RECONCILING[case]
    verdict = not_reconciling(project(obj), beat=beat, controller=controller, liveness=liveness, now=NOW)
    assert (verdict.outcome, verdict.reason) == (outcome, reason), verdict.message
