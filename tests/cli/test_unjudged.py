"""Never "all healthy" while an object read was not judged: a custom resource that reports no
status, whose kind no rule reads, is counted by kind in the text report, the JSON summary, the
page's summary and /metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.export.report import render_json, render_text
from watcher.model.engine import evaluate
from watcher.model.ingest.projection import project
from watcher.model.types import ModelConfig

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def widget(name: str, *, status: dict[str, Any] | None) -> dict[str, Any]:
    """A custom resource; with a status it says something, without one nothing."""
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"size": 1},
    }
    if status is not None:
        obj["status"] = status
    return obj


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "apps"}}


READY = {
    "conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-11-30T10:00:00Z"}
    ]
}


def report(objects: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    evaluation = evaluate([project(o) for o in objects], now=NOW, config=ModelConfig())
    text = render_text(evaluation, objects=len(objects))
    return text, orjson.loads(render_json(evaluation, objects=len(objects)))


@settings(max_examples=60, deadline=None)
@given(
    silent=st.integers(min_value=0, max_value=4),
    ready=st.integers(min_value=0, max_value=4),
    plain=st.integers(min_value=0, max_value=4),
)
def test_all_healthy_is_never_said_while_an_object_was_not_judged(
    silent: int, ready: int, plain: int
) -> None:
    objects = [
        *(widget(f"silent-{n}", status=None) for n in range(silent)),
        *(widget(f"ready-{n}", status=READY) for n in range(ready)),
        *(config_map(f"plain-{n}") for n in range(plain)),
    ]
    text, document = report(objects)

    if silent:
        assert "all healthy" not in text
        assert f"{silent} object{'s' if silent > 1 else ''} of 1 kind not judged" in text
        assert document["summary"]["unjudged"] == {"Widget.example.com": silent}
    else:
        assert document["summary"]["unjudged"] == {}
        assert "not judged" not in text
        if objects:
            many = f"{len(objects)} object{'s' if len(objects) > 1 else ''}"
            assert text.startswith(f"No findings: {many} evaluated, all healthy.")


def test_the_summary_counts_the_judged_and_names_the_kinds_not_judged() -> None:
    text, _ = report([widget("silent", status=None), widget("ready", status=READY), config_map("plain")])

    assert text == (
        "No findings on 2 judged objects; 1 object of 1 kind not judged (no status to read): "
        "Widget.example.com (1).\n"
    )
