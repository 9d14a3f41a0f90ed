"""A small client of the Prometheus HTTP query API (`POST /api/v1/query`, instant queries), the
API that Prometheus, Thanos Query, Mimir, Cortex and VictoriaMetrics all serve.

Every failure comes back as an Answer with `error` set, naming what went wrong (unreachable,
timed out, an HTTP status, Prometheus' own errorType and error), never as an exception: the fleet
shows a store that cannot answer as such, panel by panel. `warnings` (Thanos' partial responses,
for one) are kept, because an answer with them may be missing clusters.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import aiohttp
import orjson

from watcher.fleet.queries import Answer
from watcher.fleet.samples import as_json

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""An answer larger than this is refused: the queries are bounded, so it means a query is not."""
MAX_SAMPLES = 50_000
"""Samples in one answer; more are refused. The largest answer asked for is the matrix's cells,
queries.MAX_ROWS objects in each cluster: this is 300 objects in over 160 clusters."""
VALUES_PER_SAMPLE = 24
"""JSON values one sample may spend (a sample with 19 labels). Parsed, each value costs about
100 bytes, whatever its size in the answer (tiny samples are the costliest per byte), so the
values are counted in the raw answer before it is parsed, and an answer with more than
MAX_SAMPLES samples' worth is refused unparsed: at most some 120 MB per answer."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """How to authenticate to the store. Secrets are files, read on every query so a rotated
    token is picked up; their content never reaches a log or the page."""

    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    ca_file: Path | None = None

    def check(self) -> list[str]:
        """What cannot be read now, one line per file (the CLI exits 2 with them)."""
        problems = []
        for what, path in (
            ("--bearer-token-file", self.bearer_token_file),
            ("--basic-auth-password-file", self.basic_auth_password_file),
            ("--ca-file", self.ca_file),
        ):
            if path is not None:
                try:
                    path.read_bytes()
                except OSError as error:
                    problems.append(f"{what} {path}: cannot be read: {error.strerror or error}")
        if (self.basic_auth_user is None) != (self.basic_auth_password_file is None):
            problems.append("--basic-auth-user and --basic-auth-password-file go together")
        if self.bearer_token_file is not None and self.basic_auth_user is not None:
            problems.append("use either a bearer token or basic auth, not both")
        if self.ca_file is not None and not problems:
            try:
                ssl.create_default_context(cafile=str(self.ca_file))
            except ssl.SSLError as error:
                problems.append(f"--ca-file {self.ca_file}: not a PEM certificate bundle: {error.reason}")
        return problems

    def headers(self) -> dict[str, str]:
        if self.bearer_token_file is not None:
            return {"Authorization": "Bearer " + self.bearer_token_file.read_text().strip()}
        if self.basic_auth_user is not None and self.basic_auth_password_file is not None:
            password = self.basic_auth_password_file.read_text().rstrip("\n")
            pair = base64.b64encode(f"{self.basic_auth_user}:{password}".encode()).decode()
            return {"Authorization": "Basic " + pair}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        return None if self.ca_file is None else ssl.create_default_context(cafile=str(self.ca_file))


class Prometheus:
    """Instant queries against `url` (the API's base, e.g. http://thanos-query:9090), each within
    `timeout` seconds: told to Prometheus too, so it stops evaluating when we stop waiting."""

    def __init__(self, url: str, *, timeout: float, credentials: Credentials | None = None) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        self.credentials = credentials or Credentials()
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Prometheus:
        connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context() or True, limit=8)
        self._session = aiohttp.ClientSession(connector=connector)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def query(self, expr: str, *, at: datetime) -> Answer:
        """The instant vector of `expr` at `at`."""
        assert self._session is not None, "use `async with Prometheus(...)`"
        # the timeout in plain seconds: the query API reads "0.25" but refuses "0.25s"
        form = {"query": expr, "time": f"{at.timestamp():.3f}", "timeout": f"{self.timeout:.3f}"}
        try:
            headers = self.credentials.headers()
        except OSError as error:
            return Answer(error=f"cannot read the credentials: {error.strerror or error}")
        try:
            async with self._session.post(
                f"{self.url}/api/v1/query",
                data=form,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                allow_redirects=False,
            ) as response:
                status, body = response.status, bytearray()  # parsed in place: no copy
                async for chunk in response.content.iter_chunked(1 << 16):
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        break
        except TimeoutError:
            return Answer(error=f"no answer within {self.timeout:g}s")
        except (aiohttp.ClientError, OSError) as error:
            return Answer(error=f"unreachable: {_one_line(str(error) or type(error).__name__)}")
        if len(body) > MAX_ANSWER_BYTES:
            return Answer(error=f"answer larger than {MAX_ANSWER_BYTES // 2**20} MiB")
        return parse_answer(status, body)


def parse_answer(status: int, body: bytes | bytearray) -> Answer:
    """The API's envelope (`{"status", "data": {"resultType", "result"}, "errorType", "error",
    "warnings"}`) read strictly: anything else is an error naming what came back. Each sample
    must be an object with a `metric` of string labels; its value is read by samples.py, which
    says which cluster's field it cannot read, so a sample is never dropped here."""
    # each JSON value but a container's first follows a comma: these bound what parsing builds
    values = body.count(b",") + body.count(b"{") + body.count(b"[")
    if values > MAX_SAMPLES * VALUES_PER_SAMPLE:
        return Answer(error=f"answer refused: {values} JSON values, more than {MAX_SAMPLES} samples may hold")
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        envelope = None
    if not isinstance(envelope, dict):
        return Answer(
            error=f"HTTP {status}, not a query API answer: {_one_line(body[:200].decode(errors='replace'))}"
        )
    warnings = tuple(_one_line(str(w)) for w in envelope.get("warnings") or ())
    if envelope.get("status") != "success":
        kind, text = envelope.get("errorType") or f"HTTP {status}", envelope.get("error") or "no error given"
        return Answer(error=f"{_one_line(str(kind))}: {_one_line(str(text))}", warnings=warnings)
    data = envelope.get("data")
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "vector"
        or not isinstance(data.get("result"), list)
    ):
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        return Answer(error=f"expected an instant vector, got {_one_line(str(got))}", warnings=warnings)
    result = data["result"]
    if len(result) > MAX_SAMPLES:
        return Answer(
            error=f"answer refused: {len(result)} samples, more than {MAX_SAMPLES}", warnings=warnings
        )
    for index, sample in enumerate(result):
        if not _labelled(sample):
            error = f"result[{index}] is not a sample with string labels: {_one_line(as_json(sample))}"
            return Answer(error=error, warnings=warnings)
    return Answer(result=tuple(result), warnings=warnings)


def _labelled(sample: object) -> bool:
    """An object whose `metric` maps label names to string values: a sample some cluster owns."""
    if not isinstance(sample, dict):
        return False
    metric = sample.get("metric")
    return isinstance(metric, dict) and all(isinstance(value, str) for value in metric.values())


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
