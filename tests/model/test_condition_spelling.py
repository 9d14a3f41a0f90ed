"""One spelling of a condition in every message: StuckReconciling, RevisionSkew, ReconcileFailed
and StatusStale quote a condition the same way, through ingest/objects.py's said()."""

from __future__ import annotations

import pytest

from watcher.model.ingest.objects import Condition, said, said_why


@pytest.mark.parametrize(
    ("cond", "message", "spelled"),
    [
        pytest.param(None, True, "no Ready condition", id="absent"),
        pytest.param(
            {
                "type": "Ready",
                "status": "False",
                "reason": "BuildFailed",
                "message": "kustomize build failed.",
            },
            True,
            "Ready=False (BuildFailed: kustomize build failed)",
            id="reason-and-message-without-its-full-stop",
        ),
        pytest.param(
            {
                "type": "Ready",
                "status": "False",
                "reason": "BuildFailed",
                "message": "kustomize build failed",
            },
            False,
            "Ready=False (BuildFailed)",
            id="a-cached-report-says-the-reason-alone",
        ),
        pytest.param(
            {"type": "Ready", "status": "Unknown", "message": "reconciliation in progress"},
            True,
            "Ready=Unknown (reconciliation in progress)",
            id="message-without-reason",
        ),
        pytest.param(
            {"type": "Ready", "status": "True"}, True, "Ready=True", id="neither-reason-nor-message"
        ),
        pytest.param(
            {
                "type": "Ready",
                "status": "False",
                "reason": "GitOperationFailed",
                # as source-controller v1.9.6 wrote it for a repository that answers 404 (the lab)
                "message": "failed to checkout and determine revision: unable to clone "
                "'http://127.0.0.1:34957/nonexistent': repository not found: 404 page not found\n",
            },
            True,
            "Ready=False (GitOperationFailed: failed to checkout and determine revision: unable to clone "
            "'http://127.0.0.1:34957/nonexistent': repository not found: 404 page not found)",
            id="the-trailing-newline-of-a-clone-error-is-dropped",
        ),
    ],
)
def test_a_condition_is_spelled_once_for_every_message(
    cond: Condition | None, message: bool, spelled: str
) -> None:
    assert said(cond, "Ready", message=message) == spelled


def test_the_reason_part_alone_is_what_said_puts_after_the_status() -> None:
    cond: Condition = {
        "type": "Ready",
        "status": "False",
        "reason": "ArtifactFailed",
        "message": "no artifact. ",
    }
    assert said(cond, "Ready") == "Ready=False" + said_why(cond)
    assert said_why({"type": "Ready", "status": "False"}) == ""
