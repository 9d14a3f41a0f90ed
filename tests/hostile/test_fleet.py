"""`stalewatch fleet` against a store that answers hostile documents: an in-process fake of the
query API (aiohttp) answers each of the fleet's queries as a test says, and the fleet's own
server (its page and /api/v1/fleet) is asked over HTTP, as on-call would.

The rule under test: a value the fleet cannot read is "not known", never healthy. Every hostile
form of a sample that decides a cluster's state makes that cluster `unknown`, named, with the
page and the API answering 200; an answer too large is refused with its reason, never parsed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.web.dom import parse
from watcher.fleet.prom import MAX_ANSWER_BYTES, MAX_SAMPLES, Prometheus
from watcher.fleet.queries import Filters, queries
from watcher.fleet.server import FleetSource, create_fleet_app

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = NOW.timestamp()
TIMEOUT = 2.0
NAME_OF = {expr: name for name, expr in queries(cluster_label="cluster", filters=Filters()).items()}
CRITICAL = {"type": "ControllerDown", "severity": "critical", "root": "true"}
TOFU = {"kind": "Deployment", "namespace": "flux-system", "name": "tofu-controller"}


def sample(value: object, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [T, value]}


def vector(*samples: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": list(samples)}})


def healthy(cluster: str = "a") -> dict[str, bytes]:
    """Answers of one cluster that is up, synced and clean, its last sample a second old."""
    return {
        "up": vector(sample("1", cluster=cluster)),
        "synced": vector(sample("1", cluster=cluster)),
        "last_sample": vector(sample(f"{T - 1:.3f}", cluster=cluster)),
    }


Answers = dict[str, "bytes | Callable[[], Any]"]


@dataclass
class Seen:
    status: int
    document: dict[str, Any]
    page_status: int
    page: str

    def cluster(self, name: str = "a") -> dict[str, Any]:
        [found] = [c for c in self.document["clusters"] if c["name"] == name]
        return found


@asynccontextmanager
async def store(answers: Answers) -> AsyncIterator[str]:
    """A fake query API answering each of the fleet's queries by name (an empty vector unless
    given): bytes as they are, or what an async callable returns."""

    async def query(request: web.Request) -> web.StreamResponse:
        name = NAME_OF.get(str((await request.post())["query"]), "")
        answer = answers.get(name, vector())
        if callable(answer):
            result: web.StreamResponse = await answer()
            return result
        return web.Response(body=answer, content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    async with TestServer(app) as server:
        yield str(server.make_url("")).rstrip("/")


async def ask(answers: Answers) -> Seen:
    """The fleet over a store answering `answers`: /api/v1/fleet and / as a browser gets them."""
    async with store(answers) as url, Prometheus(url, timeout=TIMEOUT) as prometheus:
        source = FleetSource(prometheus, "cluster", 120, {}, reuse=0, clock=lambda: NOW)
        async with TestServer(create_fleet_app(source)) as fleet, aiohttp.ClientSession() as session:
            async with session.get(fleet.make_url("/api/v1/fleet")) as response:
                status, body = response.status, await response.read()
            async with session.get(fleet.make_url("/")) as response:
                page_status, page = response.status, await response.text()
    return Seen(status, orjson.loads(body) if status == 200 else {}, page_status, page)


def state_in_page(page: str, cluster: str = "a") -> str:
    [row] = [r for r in parse(page).by_id("clusters").all("tr")[1:] if r.all("td")[0].text == cluster]
    return row.all("td")[1].text


def with_sample(query: str, value: object, **labels: str) -> Answers:
    return {**healthy(), query: vector(sample(value, cluster="a", **labels))}


def critical_roots(value: object) -> Answers:
    """Cluster a with one critical ControllerDown in the roots list and its count `value`."""
    return {
        **with_sample("root_counts", value, severity="critical"),
        "roots": vector(sample("3", cluster="a", **CRITICAL, **TOFU)),
    }


UNREADABLE = [
    pytest.param(with_sample("up", "NaN"), 'up "NaN", not a finite number', id="up-nan"),
    pytest.param(with_sample("up", "garbage"), 'up "garbage", not a finite number', id="up-garbage"),
    pytest.param(with_sample("up", "0.5"), 'up "0.5", not 0 or 1', id="up-half"),
    pytest.param(with_sample("synced", "NaN"), 'synced "NaN", not a finite number', id="synced-nan"),
    pytest.param(
        with_sample("synced", "garbage"), 'synced "garbage", not a finite number', id="synced-garbage"
    ),
    pytest.param(with_sample("synced", "0.5"), 'synced "0.5", not 0 or 1', id="synced-half"),
    pytest.param(
        critical_roots("+Inf"), 'root_counts critical "+Inf", not a finite number', id="critical-count-inf"
    ),
    pytest.param(
        critical_roots("NaN"), 'root_counts critical "NaN", not a finite number', id="critical-count-nan"
    ),
    pytest.param(
        critical_roots(1),
        "root_counts critical 1, not a number in the API's string form",
        id="critical-count-a-bare-json-number",
    ),
    pytest.param(
        critical_roots("0.5"),
        'root_counts critical "0.5", not a count (a whole number from 0)',
        id="critical-count-a-fraction",
    ),
    pytest.param(
        with_sample("last_sample", "NaN"), 'last_sample "NaN", not a finite number', id="last-sample-nan"
    ),
    pytest.param(
        with_sample("last_sample", "+Inf"), 'last_sample "+Inf", not a finite number', id="last-sample-inf"
    ),
    pytest.param(
        with_sample("last_sample", "1e20"),
        'last_sample "1e20", not a time between 1970 and the instant asked about',
        id="last-sample-1e20",
    ),
    pytest.param(
        with_sample("controllers_down", "NaN", **TOFU),
        'controllers_down flux-system/tofu-controller "NaN", not a finite number',
        id="controller-up-nan",
    ),
    pytest.param(
        {**healthy(), "up": vector(sample("1", cluster="a"), sample("0", cluster="a"))},
        "up 2 samples, not one sample",
        id="up-twice",
    ),
    pytest.param(
        {**healthy(), "up": vector({"metric": {"cluster": "a"}, "value": ["1"]})},
        'up ["1"], not a [time, value] pair',
        id="up-value-not-a-pair",
    ),
]


@pytest.mark.parametrize(("answers", "why"), UNREADABLE)
async def test_a_cluster_whose_deciding_sample_cannot_be_read_is_unknown_never_healthy_and_the_page_answers(
    answers: Answers, why: str
) -> None:
    seen = await ask(answers)
    assert (seen.status, seen.page_status) == (200, 200)
    cluster = seen.cluster()
    assert (cluster["state"], cluster["why"]) == ("unknown", f"its samples cannot be read: {why}")
    assert seen.document["healthy"] is False
    assert state_in_page(seen.page) == "unknown"
    assert "stalewatch fleet: 1 cluster, 1 unknown" in seen.page
    assert "Traceback" not in seen.page


@pytest.mark.parametrize(
    ("query", "value"),
    [
        pytest.param("up", "NaN", id="up"),
        pytest.param("synced", "garbage", id="synced"),
    ],
)
async def test_an_unreadable_flag_is_null_in_the_document_never_false(query: str, value: str) -> None:
    cluster = (await ask(with_sample(query, value))).cluster()
    assert cluster[query] is None
    assert set(cluster["unreadable"]) == {query}


@pytest.mark.parametrize("value", ["NaN", "+Inf", "1e20"])
async def test_an_unreadable_last_sample_is_null_and_the_page_says_it_is_not_known(value: str) -> None:
    seen = await ask(with_sample("last_sample", value))
    assert (seen.cluster()["last_sample"], seen.cluster()["age_seconds"]) == (None, None)
    [row] = parse(seen.page).by_id("clusters").all("tr")[1:]
    assert row.all("td")[3].text == "not known (unreadable)"


async def test_a_healthy_cluster_is_healthy_over_the_same_fake() -> None:
    """The fake's healthy answers are read as healthy: the cases above differ by their one sample."""
    seen = await ask(healthy())
    assert (seen.cluster()["state"], seen.document["healthy"]) == ("healthy", True)


async def test_an_unreadable_blast_radius_is_null_and_shown_as_not_known_never_as_none_affected() -> None:
    blast = {"root_kind": "Deployment", "root_namespace": "flux-system", "root_name": "tofu-controller"}
    seen = await ask(
        {
            **healthy(),
            "roots": vector(sample("3", cluster="a", **CRITICAL, **TOFU)),
            "blast_radius": vector(sample("NaN", cluster="a", **blast)),
        }
    )
    [group] = seen.document["roots"]
    assert group["clusters"][0]["blast_radius"] is None
    assert parse(seen.page).by_id("roots").one("h3").text.endswith("a (objects affected: not known)")


def tiny_samples(count: int) -> bytes:
    """An answer of `count` samples as small as the API can write them."""
    one = b'{"metric":{},"value":[1,"1"]}'
    head = b'{"status":"success","data":{"resultType":"vector","result":['
    return head + b",".join([one] * count) + b"]}}"


HUGE_TINY = (62 * 2**20) // len(b'{"metric":{},"value":[1,"1"]},')
"""Samples in a 62 MiB answer of tiny ones: under the byte cap, 2 million samples."""


async def test_a_huge_answer_of_tiny_samples_is_refused_by_its_sample_count_naming_why() -> None:
    body = tiny_samples(HUGE_TINY)
    assert len(body) < MAX_ANSWER_BYTES
    seen = await ask({**healthy(), "roots": body})
    assert seen.document["errors"]["roots"].startswith("answer refused: ")
    assert seen.document["errors"]["roots"].endswith(f"JSON values, more than {MAX_SAMPLES} samples may hold")
    assert seen.document["healthy"] is False
    assert "NOT KNOWN" in seen.page


def test_refusing_a_huge_answer_of_tiny_samples_takes_little_memory() -> None:
    """Parsed, this answer takes about 1.4 GB; refused unparsed, it fits in 400 MB of address
    space with the interpreter and the answer itself."""
    script = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (400 * 2**20, 400 * 2**20))
        from tests.hostile.test_fleet import HUGE_TINY, tiny_samples
        from watcher.fleet.prom import parse_answer
        print(parse_answer(200, bytearray(tiny_samples(HUGE_TINY))).error)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("answer refused: ")


async def test_an_answer_with_more_samples_than_the_bound_is_refused_naming_the_count() -> None:
    body = vector(*(sample("1", cluster=f"c{i}") for i in range(MAX_SAMPLES + 1)))
    seen = await ask({**healthy(), "root_counts": body})
    error = f"answer refused: {MAX_SAMPLES + 1} samples, more than {MAX_SAMPLES}"
    assert seen.document["errors"]["root_counts"] == error
    assert (seen.cluster()["state"], seen.cluster()["why"]) == (
        "unknown",
        f"its root causes could not be read ({error})",
    )


async def test_an_answer_larger_than_the_byte_cap_is_refused_naming_the_cap() -> None:
    seen = await ask({**healthy(), "matrix_rows": b" " * (MAX_ANSWER_BYTES + 1)})
    assert seen.document["errors"]["matrix_rows"] == f"answer larger than {MAX_ANSWER_BYTES // 2**20} MiB"


WRONG_TYPES = [
    pytest.param(
        vector("a"), 'result[0] is not a sample with string labels: "a"', id="a-string-for-a-sample"
    ),
    pytest.param(
        vector({"metric": {"cluster": 5}, "value": [1, "1"]}),
        'result[0] is not a sample with string labels: {"metric":{"cluster":5},"value":[1,"1"]}',
        id="a-number-for-a-label",
    ),
    pytest.param(
        vector({"value": [1, "1"]}),
        'result[0] is not a sample with string labels: {"value":[1,"1"]}',
        id="no-labels",
    ),
    pytest.param(
        orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}),
        "expected an instant vector, got vector",
        id="result-not-a-list",
    ),
    pytest.param(b'{"status":"success","data":NaN}', "HTTP 200, not a query API answer: ", id="json-nan"),
]


@pytest.mark.parametrize(("body", "error"), WRONG_TYPES)
async def test_an_up_answer_of_the_wrong_shape_is_an_error_and_every_cluster_unknown(
    body: bytes, error: str
) -> None:
    seen = await ask({**healthy(), "up": body, "roots": vector(sample("3", cluster="a", **CRITICAL, **TOFU))})
    assert seen.document["errors"]["up"].startswith(error)
    assert seen.cluster()["state"] == "unknown"
    assert seen.page_status == 200
    assert "NOT KNOWN" in seen.page


async def test_a_store_slower_than_the_timeout_on_one_query_leaves_its_clusters_unknown() -> None:
    async def never() -> web.Response:
        """Waits until the client hangs up (the test server then cancels it)."""
        await asyncio.Event().wait()
        return web.Response(body=vector(), content_type="application/json")

    seen = await ask({**healthy(), "synced": never})
    assert seen.document["errors"] == {"synced": f"no answer within {TIMEOUT:g}s"}
    assert (seen.cluster()["state"], seen.cluster()["why"]) == (
        "unknown",
        f"whether it is synced is not known (no answer within {TIMEOUT:g}s)",
    )
