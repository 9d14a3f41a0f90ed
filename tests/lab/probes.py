"""What a test reads from `stalewatch run` against the lab, as on-call's tools read it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from tests.lab.manifests import NAMESPACE


def findings(stalewatch: str) -> dict[str, Any]:
    """stalewatch's /api/v1/findings, as on-call's tools read it."""
    with urllib.request.urlopen(f"{stalewatch}/api/v1/findings", timeout=5) as response:
        document: dict[str, Any] = json.load(response)
    return document


def judged_current(stalewatch: str, kind: str, name: str) -> bool:
    """Whether stalewatch's /metrics says this GitOps object is Current (kstatus), as a dashboard
    reads it: it has seen the object as the controller last wrote it."""
    with urllib.request.urlopen(f"{stalewatch}/metrics", timeout=5) as response:
        exposition = response.read().decode()
    series = (
        f'stalewatch_object_status{{kind="{kind}",name="{name}",namespace="{NAMESPACE}",status="Current"}}'
    )
    return any(line.startswith(series) and line.split()[-1] == "1.0" for line in exposition.splitlines())


def reported(stalewatch: str, finding_id: str) -> dict[str, dict[str, Any]] | None:
    """stalewatch's findings by id, once `finding_id` is among them."""
    found = {f["id"]: f for f in findings(stalewatch)["findings"]}
    return found if finding_id in found else None
