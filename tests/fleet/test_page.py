"""The fleet page on its structure: every value from the store stays text, and what is shown
first says whether the store could be asked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.fleet.test_model import REV_A, critical_root, fleet, reporting, revision, s
from tests.web.dom import Node, parse
from tests.web.incident import HOSTILE
from watcher.fleet.page import HEADERS, render_fleet
from watcher.fleet.queries import Answer, Filters, queries


def page(answers: dict[str, Answer], **kwargs: Any) -> Node:
    return parse(render_fleet(fleet(answers, **kwargs)).decode())


def hostile_answers() -> dict[str, Answer]:
    """Every label the page shows set to markup: cluster, object, revision, reason."""
    where = {"kind": HOSTILE, "namespace": HOSTILE, "name": HOSTILE}
    cell = {
        **revision(HOSTILE, HOSTILE, REV_A),
        "metric": {**revision(HOSTILE, HOSTILE, REV_A)["metric"], **where},
    }
    return {
        **reporting(HOSTILE),
        "roots": Answer((critical_root(HOSTILE, **where),)),
        "down_reasons": Answer((s(1, cluster=HOSTILE, namespace=HOSTILE, name=HOSTILE, reason=HOSTILE),)),
        "controllers_down": Answer((s(0, cluster=HOSTILE, **where),)),
        "matrix": Answer((cell,)),
    }


def test_every_value_from_the_store_is_shown_as_its_own_text_and_adds_no_element() -> None:
    doc = page(hostile_answers(), urls={HOSTILE: "https://x.example/?a=1&b=2"})
    assert doc.all("script") == []
    assert doc.all("img") == []
    clusters = doc.by_id("clusters")
    assert clusters.all("tr")[1].all("td")[0].text == HOSTILE
    assert clusters.all("a")[0].attrs["href"] == "https://x.example/?a=1&b=2"
    root = doc.by_id("roots").one("h3").text
    assert f"ControllerDown {HOSTILE} {HOSTILE}/{HOSTILE}, {HOSTILE}" in root
    [row] = doc.by_id("versions").all("tr")[1:]
    assert [td.text for td in row.all("td")][:3] == [HOSTILE] * 3


def test_a_hostile_filter_is_text_in_the_form_and_the_links() -> None:
    hostile = replace(fleet(reporting("a")), filters=Filters(name=HOSTILE))
    doc = parse(render_fleet(hostile).decode())
    assert doc.all("script") == []
    [name] = [i for i in doc.all("input") if i.attrs["name"] == "name"]
    assert name.attrs["value"] == HOSTILE


@pytest.mark.parametrize(
    ("answers", "banner", "css"),
    [
        pytest.param(
            reporting("a"),
            "Live: the store at http://prometheus:9090 answered every query.",
            "live",
            id="live",
        ),
        pytest.param(
            {"roots": Answer(warnings=("partial response",))},
            "PARTIAL: the store at http://prometheus:9090 warned: partial response.",
            "stale",
            id="partial",
        ),
        pytest.param(
            dict.fromkeys(
                queries(cluster_label="cluster", filters=Filters()), Answer(error="unreachable: refused")
            ),
            "NOT KNOWN: the store at http://prometheus:9090 did not answer: blast_radius: unreachable:",
            "failed",
            id="down",
        ),
    ],
)
def test_the_first_thing_on_the_page_says_whether_the_store_answered(
    answers: dict[str, Answer], banner: str, css: str
) -> None:
    first = page(answers).all("p", "banner")[0]
    assert first.text.startswith(banner)
    assert css in first.classes


def test_a_store_that_is_down_shows_nothing_healthy() -> None:
    down = dict.fromkeys(
        queries(cluster_label="cluster", filters=Filters()), Answer(error="unreachable: refused")
    )
    doc = page(down)
    assert doc.all("p", "healthy") == []
    assert doc.by_id("clusters").one("p").text == "No cluster is known: nothing here is healthy."


def test_the_page_allows_its_own_stylesheet_and_form_and_nothing_else() -> None:
    policy = HEADERS["Content-Security-Policy"]
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    assert "form-action 'self'" in policy
    assert "script-src" not in policy
