"""ConflictingWriters among the managers real objects carry, and policy compliance whose counts
cannot be read: each answer is asserted where an on-call engineer reads it.

Compliance: a Gatekeeper constraint whose `status.totalViolations`, or a wgpolicyk8s.io report
whose `summary.fail`, is a string, a boolean, a number past int64 or below zero (and lists nothing)
is not judged, with why, in `analyze`'s text and JSON, on the page and in the metrics: never
"no violations", never absent.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.model.builders import MIN, Obj, run
from tests.model.test_compliance import NOW_AUDIT, two_stacks
from tests.model.test_writers import (
    ADDED,
    MESH,
    OPERATOR,
    beside,
    entry,
    erasing_puts,
    labels,
    writers_findings,
)
from tests.web.cluster import cluster
from watcher.export import compliance
from watcher.export.metrics import build_registry
from watcher.model.cluster.compliance import Unread
from watcher.model.ingest.objects import Key

GATEKEEPER = "constraints.gatekeeper.sh"
POLICY_REPORT = "wgpolicyk8s.io"


def constraint(total: Any) -> Obj:
    """Audited, listing nothing, its total `total` (as a YAML or JSON writer could put it)."""
    return {
        "apiVersion": f"{GATEKEEPER}/v1beta1",
        "kind": "K8sRequiredLabels",
        "metadata": {"name": "must-have-owner"},
        "spec": {},
        "status": {"auditTimestamp": NOW_AUDIT, "totalViolations": total, "violations": []},
    }


def report(summary: Any) -> Obj:
    """A Kyverno report listing no result, its summary `summary`."""
    return {
        "apiVersion": f"{POLICY_REPORT}/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {"name": "uid-web", "namespace": "team-a"},
        "summary": summary,
    }


CONSTRAINT = Key(GATEKEEPER, "K8sRequiredLabels", "", "must-have-owner")
REPORT = Key(POLICY_REPORT, "PolicyReport", "team-a", "uid-web")
UNREADABLE = [
    pytest.param(
        constraint("12"), CONSTRAINT, "status.totalViolations is not an integer ('12')", id="total a string"
    ),
    pytest.param(
        constraint(True), CONSTRAINT, "status.totalViolations is not an integer ('true')", id="total a bool"
    ),
    pytest.param(
        constraint(1e308), CONSTRAINT, "status.totalViolations is out of range ('1e+308')", id="total 1e308"
    ),
    pytest.param(constraint(-3), CONSTRAINT, "status.totalViolations is negative (-3)", id="total negative"),
    pytest.param(
        report({"fail": "3"}), REPORT, "summary.fail is not an integer ('3')", id="summary.fail a string"
    ),
    pytest.param(
        report({"fail": False}), REPORT, "summary.fail is not an integer ('false')", id="summary.fail a bool"
    ),
    pytest.param(
        report({"fail": 1e308}), REPORT, "summary.fail is out of range ('1e+308')", id="summary.fail 1e308"
    ),
    pytest.param(report({"fail": -1}), REPORT, "summary.fail is negative (-1)", id="summary.fail negative"),
    pytest.param(report("3 fail"), REPORT, "summary is not an object ('3 fail')", id="summary a string"),
]


@pytest.mark.parametrize(("unreadable", "key", "reason"), UNREADABLE)
def test_a_policy_object_whose_counts_cannot_be_read_is_not_judged_with_why_never_no_violations(
    unreadable: Obj, key: Key, reason: str
) -> None:
    evaluation = run(two_stacks(), unreadable)
    found = evaluation.compliance
    assert found is not None
    assert found.unread == (Unread(key, reason),)
    assert found.violations == ()

    text = compliance.text_lines(found)
    described = "K8sRequiredLabels must-have-owner" if key == CONSTRAINT else "PolicyReport team-a/uid-web"
    assert f"  not judged: {described}: its counts cannot be read ({reason})" in text
    assert not any("no violations" in line for line in text)

    document = compliance.document(found)
    named = "/".join(filter(None, (key.kind, key.namespace, key.name)))
    assert document["unreadable"] == [{"object": named, "reason": reason}]
    assert all(c["total"] is None for c in document["constraints"])

    labels_ = {"group": key.group, "kind": key.kind, "namespace": key.namespace, "name": key.name}
    registry = build_registry(lambda: evaluation)
    assert registry.get_sample_value("stalewatch_policy_objects_not_judged", labels_) == 1

    page = cluster(two_stacks(), unreadable).page()
    summary = page.by_id("stacks-summary").text
    assert f"Policy violations not judged: the counts of {described} ({reason}) cannot be read." in summary


def test_an_unreadable_total_still_counts_what_the_constraint_lists_as_at_least() -> None:
    listed = constraint("many")
    listed["status"]["violations"] = [
        {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "team-a", "name": "web"}
    ]
    found = run(two_stacks(), listed).compliance
    assert found is not None
    [row] = found.violations
    assert row.count == 1
    text = compliance.text_lines(found)
    assert any("at least 1 violation" in line for line in text)
    assert any("not judged: K8sRequiredLabels must-have-owner" in line for line in text)


def test_many_unreadable_reports_are_counted_on_the_page_and_named_up_to_a_few() -> None:
    reports = []
    for n in range(40):
        bad = report({"fail": "x"})
        bad["metadata"]["name"] = f"uid-{n:02}"
        reports.append(bad)
    summary = cluster(two_stacks(), reports).page().by_id("stacks-summary").text
    assert "PolicyReport team-a/uid-07 (summary.fail is not an integer ('x'))" in summary
    assert "uid-08" not in summary
    assert "and 32 more cannot be read" in summary


# -- ConflictingWriters among many managers ------------------------------------------------------


def test_a_fight_is_named_among_thirty_managers_each_owning_the_most_paths_they_may() -> None:
    """The most entries a projection keeps (32) and the most paths per set (256): the two that
    fight are named, none of the thirty others."""
    crowd = [
        entry(f"annotator-{n}", {"f:metadata": {"f:annotations": {f"f:a{n}-{i}": {} for i in range(300)}}})
        for n in range(30)
    ]
    (found,) = writers_findings(beside(erasing_puts(3), crowd))
    assert found.evidence["writers"] == [MESH, OPERATOR]
    assert found.evidence["fields"] == list(ADDED)
    assert "annotator" not in found.message


def test_a_bystander_named_to_forge_a_line_is_neither_named_nor_in_the_way() -> None:
    forger = entry("kubectl-label\nWARNING forged", labels("team"), ago=5 * MIN)
    (found,) = writers_findings(beside(erasing_puts(3), [forger]))
    assert found.evidence["managers"] == [MESH, OPERATOR]
    assert "forged" not in found.message
