"""`GET /api/v1/timeline` on its own: newest first, `since`/`subject`/`limit` filters, a 400 naming
the parameter for anything it cannot read, the summary saying what was dropped, and the same
protective headers as every endpoint. Served for real (aiohttp's test server on a local port)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.registry import CollectorRegistry

from watcher.model.types import Subject, rfc3339
from watcher.model.views.timeline import Change, Entry, Timeline
from watcher.telemetry import Telemetry
from watcher.web.server import create_app
from watcher.web.timeline import MAX_LIMIT, TIMELINE


def now() -> datetime:
    """The server reads `?since=15m` back from its own clock: entries are placed from the test's."""
    return datetime.now(UTC).replace(microsecond=0)


def entry(
    at: datetime, minutes_ago: int, kind: str, name: str, change: Change = Change.READY_CHANGED
) -> Entry:
    subject = Subject(apiVersion="v1", kind=kind, namespace="flux-system", name=name)
    return Entry(
        at - timedelta(minutes=minutes_ago), change, subject, None, "True", "False", f"{name} flipped"
    )


def five_changes(at: datetime) -> Timeline:
    """Oldest first, as the live model adds them: apps-0 an hour before `at` ... the Deployment at it."""
    timeline = Timeline(limit=100)
    timeline.extend(entry(at, 60 - 15 * i, "Kustomization", f"apps-{i}") for i in range(4))
    timeline.extend([entry(at, 0, "Deployment", "tofu-controller", Change.IMAGE_CHANGED)])
    return timeline


@dataclass
class Served:
    client: TestClient
    at: datetime
    """When the newest entry happened (the test's now)."""

    def times(self) -> dict[str, str]:
        """What the queries' {placeholders} stand for."""
        half_an_hour_ago = self.at - timedelta(minutes=30)
        plus_two = half_an_hour_ago.astimezone(timezone(timedelta(hours=2))).isoformat()
        return {
            "half_an_hour_ago": rfc3339(half_an_hour_ago) or "",
            "plus_two": plus_two,
            "plus_two_encoded": plus_two.replace("+", "%2B"),
        }


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    app = create_app(telemetry=Telemetry(), source=lambda: None, registry=CollectorRegistry())
    at = now()
    app[TIMELINE] = five_changes(at)
    async with TestClient(TestServer(app)) as client:
        yield Served(client, at)


async def get(client: TestClient, query: str) -> tuple[int, Any, dict[str, str]]:
    response = await client.get("/api/v1/timeline" + query)
    body = await response.read()
    return response.status, orjson.loads(body), dict(response.headers)


def names(document: Any) -> list[str]:
    return [e["subject"]["name"] for e in document["entries"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("", ["tofu-controller", "apps-3", "apps-2", "apps-1", "apps-0"], id="all, newest first"),
        pytest.param("?since=20m", ["tofu-controller", "apps-3"], id="since a duration back from now"),
        pytest.param(
            "?since=1h30m", ["tofu-controller", "apps-3", "apps-2", "apps-1", "apps-0"], id="since 1h30m"
        ),
        pytest.param(
            "?since={half_an_hour_ago}",
            ["tofu-controller", "apps-3", "apps-2"],
            id="since a time",
        ),
        pytest.param(
            "?since={plus_two_encoded}",
            ["tofu-controller", "apps-3", "apps-2"],
            id="since a time with an offset",
        ),
        pytest.param(
            "?since={plus_two}",
            ["tofu-controller", "apps-3", "apps-2"],
            id="since a time whose offset's + the query string made a space",
        ),
        pytest.param("?subject=Kustomization/flux-system/apps-1", ["apps-1"], id="one subject"),
        pytest.param(
            "?subject=Kustomization/", ["apps-3", "apps-2", "apps-1", "apps-0"], id="a subject prefix"
        ),
        pytest.param("?subject=Terraform/", [], id="a subject with no changes"),
        pytest.param("?limit=2", ["tofu-controller", "apps-3"], id="limit keeps the newest"),
        pytest.param("?since=50m&subject=Kustomization/&limit=1", ["apps-3"], id="filters together"),
    ],
)
async def test_filters_answer_newest_first(served: Served, query: str, expected: list[str]) -> None:
    status, document, headers = await get(served.client, query.format_map(served.times()))
    assert status == 200
    assert names(document) == expected
    assert headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        pytest.param("?since=yesterday", "since", id="since neither a time nor a duration"),
        pytest.param("?since=-5m", "since", id="since a negative duration"),
        pytest.param("?since=900", "since", id="since a bare number"),
        pytest.param("?since=2026-12-01", "since", id="since a date without a time"),
        pytest.param("?since=2026-12-01T09:00:00", "since", id="since a time without a zone"),
        pytest.param("?limit=0", "limit", id="limit zero"),
        pytest.param(f"?limit={MAX_LIMIT + 1}", "limit", id="limit past the bound"),
        pytest.param("?limit=ten", "limit", id="limit not a number"),
        pytest.param("?limit=1&limit=2", "limit", id="limit given twice"),
        pytest.param("?subject=Kustomization%20x", "subject", id="subject with a space"),
        pytest.param("?subjct=Deployment/", "subjct", id="an unknown parameter (a typo)"),
    ],
)
async def test_a_bad_parameter_is_a_400_naming_it_in_one_line(
    served: Served, query: str, parameter: str
) -> None:
    status, document, headers = await get(served.client, query)
    assert status == 400
    assert list(document) == ["error"]
    assert document["error"].startswith(f"{parameter}: ")
    assert "\n" not in document["error"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in headers["Content-Security-Policy"]


async def test_an_entry_carries_its_whole_shape_and_the_headers_every_endpoint_has(
    served: Served,
) -> None:
    status, document, headers = await get(served.client, "?limit=1")
    assert status == 200
    assert document["entries"] == [
        {
            "time": rfc3339(served.at),
            "type": "image_changed",
            "subject": {
                "apiVersion": "v1",
                "kind": "Deployment",
                "namespace": "flux-system",
                "name": "tofu-controller",
            },
            "controller": None,
            "before": "True",
            "after": "False",
            "message": "tofu-controller flipped",
            "details": {},
        }
    ]
    assert headers["Cache-Control"] == "no-store"
    assert headers["Server"] == "stalewatch"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]


async def test_the_summary_says_what_was_dropped_and_whether_the_answer_is_complete() -> None:
    timeline, at = Timeline(limit=3), now()
    timeline.extend(entry(at, 60 - 15 * i, "Kustomization", f"apps-{i}") for i in range(5))
    app = create_app(telemetry=Telemetry(), source=lambda: None, registry=CollectorRegistry())
    app[TIMELINE] = timeline
    async with TestClient(TestServer(app)) as client:
        _, everything, _ = await get(client, "")
        _, recent, _ = await get(client, "?since=10m")
    assert names(everything) == ["apps-4", "apps-3", "apps-2"]
    summary = everything["summary"]
    assert {k: summary[k] for k in ("returned", "kept", "limit", "dropped", "complete")} == {
        "returned": 3,
        "kept": 3,
        "limit": 3,
        "dropped": 2,
        "complete": False,
    }
    assert summary["oldest"] == rfc3339(at - timedelta(minutes=30))
    assert recent["summary"]["complete"] is True  # nothing it was asked for was dropped
