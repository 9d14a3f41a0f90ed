"""The report's tables for the old-versus-new comparison (bench/compare.py) and the maximum-size
cluster (bench/envelope.py); bench/report.py places them. Every number comes from a results file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.compare import TARGETS
from bench.incidents import TITLES
from bench.workload import GITOPS_KINDS

COMPARED: dict[str, tuple[str, str, str]] = {
    "events_per_s": (
        "pipeline as its watcher evaluates (old: per 50 ms of work, new: paced)",
        ",.0f",
        " ev/s",
    ),
    "each_events_per_s": ("pipeline, an evaluation after every event", ",.0f", " ev/s"),
    "ingest_events_per_s": ("ingest, one evaluation at the end", ",.0f", " ev/s"),
    "churn_event_us_mean": ("churn event with the cluster loaded, mean", ",.0f", " µs"),
    "churn_event_us_p99": ("churn event with the cluster loaded, p99", ",.0f", " µs"),
    "incident_first_evaluate_ms": ("incident: first evaluation", ",.1f", " ms"),
    "incident_event_ms_mean": ("incident: churn event, mean", ",.2f", " ms"),
    "rss_bytes_per_object": ("RSS per object held after the replay", ",.0f", " B"),
}
"""Per compared target: its label, number format and unit (every one of compare.TARGETS)."""
assert set(COMPARED) == set(TARGETS)


def _fmt(value: Any, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def noise(compared: dict[str, Any], key: str) -> float:
    """The larger of the two trees' own spreads over their rounds, for this target."""
    return max(compared[side].get(f"{key}_spread", 0.0) for side in ("old", "new"))


def regressions(results: Sequence[dict[str, Any]]) -> list[tuple[int, str, float, float]]:
    """(size, target, change, noise) wherever the new code is worse by more than the noise."""
    out = []
    for result in results:
        compared = result.get("compare")
        for key, change in (compared or {}).get("change", {}).items():
            if change < -noise(compared, key):
                out.append((result["size"], key, change, noise(compared, key)))
    return out


def compare_table(results: Sequence[dict[str, Any]]) -> list[str]:
    compared = [r for r in results if r.get("compare")]
    if not compared:
        return []
    first = compared[0]["compare"]
    out = [
        "### Old and new code on the same recording, in the same run",
        "",
        f"Old: `{first['old']['commit'][:7]}`; new: `{first['new']['commit'][:12]}`. Each tree's own "
        f"bench/pipeline.py on one core, the trees alternating, {first['rounds']} rounds each; the "
        "median of the rounds. Change: positive when the new code is better. Noise: the larger "
        "spread (max - min over median) of either tree's own rounds.",
        "",
        "| objects | target | old | new | change | noise |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for result in compared:
        c = result["compare"]
        for key, (label, spec, unit) in COMPARED.items():
            change = c["change"].get(key)
            out.append(
                f"| {result['size']:,} | {label} | {_fmt(c['old'].get(key), spec, unit)} | "
                f"{_fmt(c['new'].get(key), spec, unit)} | {_fmt(change, '+.1%')} | "
                f"{_fmt(noise(c, key), '.1%')} |"
            )
    return [*out, ""]


def envelope_targets(
    envelope: dict[str, Any] | None,
) -> list[tuple[str, str, float | None, bool | None, str]]:
    """The maximum-size cluster's targets: (name, wanted, measured, met, format)."""
    if not envelope:
        return []
    live, pipe, served = envelope.get("live", {}), envelope.get("pipeline", {}), envelope.get("served", {})
    held = served or live
    rss = max(
        held.get("rss_bytes_scraped", held.get("rss_bytes", 0)), held.get("churn", {}).get("rss_bytes", 0)
    )
    rss = rss / 2**20 or None
    rate = pipe.get("stalewatch_events_per_s")
    p99 = live.get("detection", {}).get("p99_seconds")
    served_p99 = served.get("detection", {}).get("p99_seconds")
    made = envelope.get("stream", {})
    name = f"{made.get('pods', 0) / 1000:,.0f}k Pods + {made.get('gitops', 0) / 1000:,.0f}k GitOps (stream)"
    return [
        (f"{name}: RSS holding them ({'stalewatch run' if served else 'in process'}), MiB", "<= 1,024", rss,
         None if rss is None else rss <= 1024, ",.0f"),
        (f"{name}: pipeline as the watcher runs it", ">= 30,000 events/s", rate,
         None if rate is None else rate >= 30_000, ",.0f"),
        (f"{name}: detection p99, line arrived -> evaluation names it (in process)", "<= 1 s",
         p99, None if p99 is None else p99 <= 1, ".2f"),
        (f"{name}: detection p99, line written -> /api/v1/findings names it (stalewatch run)", "<= 1 s",
         served_p99, None if served_p99 is None else served_p99 <= 1, ".2f"),
        *incident_targets(name, envelope.get("incidents", {}).get("source-controller")),
    ]  # fmt: skip


def incident_targets(
    name: str, incident: dict[str, Any] | None
) -> list[tuple[str, str, float | None, bool | None, str]]:
    """The issue's three targets with source-controller down: at most a second each."""
    if not incident:
        return []
    first = incident["pipeline"].get("first_evaluate_ms")
    served = incident["served"]
    measured = [
        ("first evaluation after it went down (in process)", None if first is None else first / 1000),
        ("detection p99, line written -> /api/v1/findings names it (stalewatch run)",
         served["detection"].get("p99_seconds")),
        ("/api/v1/findings p99 (stalewatch run)", served["pages"]["findings"].get("p99_seconds")),
    ]  # fmt: skip
    return [
        (
            f"{name}, source-controller down: {what}",
            "<= 1 s",
            value,
            None if value is None else value <= 1,
            ".2f",
        )
        for what, value in measured
    ]


def envelope_table(envelope: dict[str, Any] | None) -> list[str]:
    if not envelope:
        return []
    stream, pipe, live = envelope["stream"], envelope["pipeline"], envelope["live"]
    churn, detection = live["churn"], live["detection"]
    objects = stream["objects"]
    gitops = sum(objects.get(k, 0) for k in GITOPS_KINDS)
    pods, others = objects.get("Pod", 0), sum(objects.values()) - objects.get("Pod", 0) - gitops

    def rate(key: str) -> str:
        return _fmt(pipe.get(key), ",.0f", " ev/s")

    def mib(value: float) -> str:
        return _fmt(value / 2**20, ",.0f", " MiB")

    sampled = pipe.get("churn_events", 0)
    churn_event = f"{_fmt(pipe.get('churn_event_us_mean'), ',.0f')} / "
    churn_event += _fmt(pipe.get("churn_event_us_p99"), ",.0f", " µs")
    incident = f"{_fmt(pipe.get('incident_findings'), ',.0f')} / "
    incident += f"{_fmt(pipe.get('incident_first_evaluate_ms'), ',.0f', ' ms')} / "
    incident += _fmt(pipe.get("incident_event_ms_mean"), ",.1f", " ms")
    per_object = live["rss_bytes_above_imports"] / live["objects"]
    seconds, seen, load = churn["seconds"], detection["seen"], envelope.get("load_average", ())
    quantiles = " / ".join(_fmt(detection.get(f"{q}_seconds"), ".3f", " s") for q in ("p50", "p99", "max"))
    rows = [
        ("Pods / GitOps objects / others in the stream", f"{pods:,} / {gitops:,} / {others:,}"),
        ("of the Pods, failing from the start", f"{stream['failing_pods']:,}"),
        ("events (ADDED, then churn as MODIFIED)", f"{stream['lines']:,}"),
        ("pipeline, passes paced as the watcher paces them (one core)", rate("stalewatch_events_per_s")),
        ("pipeline, an evaluation after every event", "not run at this size"),
        ("ingest, one evaluation at the end", rate("stalewatch_ingest_events_per_s")),
        (f"churn event with the cluster loaded, mean / p99 (first {sampled:,})", churn_event),
        ("incident (every controller down): findings / first evaluation / churn event", incident),
        ("RSS synced: reflectors + live model, stalewatch's imports loaded", mib(live["rss_bytes"])),
        ("of it, the process after imports alone", mib(live["rss_bytes_imports"])),
        ("of it, the churn lines the benchmark holds to play them", mib(live["tail_bytes_held"])),
        ("RSS above imports per object held", _fmt(per_object, ",.0f", " B")),
        ("replay into the reflectors and live model, CPU seconds", _fmt(live["replay_cpu_seconds"], ".1f")),
        ("findings once synced", f"{live['findings']:,}"),
        ("churn played in real time: events/s, seconds", f"{churn['events_per_s']:,.0f} / {seconds:.0f}"),
        ("evaluations during the churn / CPU (in process, no HTTP)",
         f"{churn['evaluations']:,} / {churn['cpu_cores']:.2f} cores"),
        ("CPU seconds per evaluation during the churn (events included)",
         _fmt(churn["cpu_seconds"] / max(1, churn["evaluations"]), ".3f")),
        ("RSS at the end of the churn", mib(churn["rss_bytes"])),
        ("detection probes (a healthy Pod broken) / seen", f"{detection['probes']:,} / {seen:,}"),
        ("detection p50 / p99 / max, line arrived -> evaluation names it", quantiles),
        ("load average (1, 5, 15 min) at the end", ", ".join(f"{v:.1f}" for v in load)),
    ]  # fmt: skip
    out = [
        f"### Maximum-size cluster: {stream['pods']:,} Pods and {gitops:,} GitOps objects (synthetic)",
        "",
        "| | |",
        "| --- | ---: |",
        *(f"| {label} | {value} |" for label, value in rows),
        "",
        *served_table(envelope.get("served")),
        *incident_table(envelope.get("incidents")),
        *calibration_table(envelope.get("calibration")),
    ]
    return out


def served_table(served: dict[str, Any] | None) -> list[str]:
    """The same stream served to a real `stalewatch run` (bench/served.py)."""
    if not served:
        return []
    churn, detection, scrape = served["churn"], served["detection"], served["first_scrape"]
    load = served.get("load_average", ())
    quantiles = " / ".join(_fmt(detection.get(f"{q}_seconds"), ".3f", " s") for q in ("p50", "p99", "max"))
    rows = [
        ("start to /readyz", _fmt(served["sync_seconds"], ".1f", " s")),
        ("objects held", f"{served['objects_held']:,}"),
        ("RSS synced", _fmt(served["rss_bytes_synced"] / 2**20, ",.0f", " MiB")),
        ("RSS after the first /metrics scrape", _fmt(served["rss_bytes_scraped"] / 2**20, ",.0f", " MiB")),
        ("first /metrics scrape: body, time", f"{scrape['bytes']:,} B, {scrape['seconds']:.2f} s"),
        ("under the churn, scraped every 15 s: CPU", _fmt(churn["cpu_cores"], ".2f", " cores")),
        ("RSS at the end of the churn", _fmt(churn["rss_bytes"] / 2**20, ",.0f", " MiB")),
        ("detection probes / seen", f"{detection['probes']:,} / {detection['seen']:,}"),
        ("detection p50 / p99 / max, line written -> /api/v1/findings names it", quantiles),
        ("load average (1, 5, 15 min) at the end", ", ".join(f"{v:.1f}" for v in load)),
    ]  # fmt: skip
    return [
        "The same stream served to a real `stalewatch run` (bench/served.py answers its list and watch):",
        "",
        "| | |",
        "| --- | ---: |",
        *(f"| {label} | {value} |" for label, value in rows),
        "",
    ]


def incident_table(incidents: dict[str, Any] | None) -> list[str]:
    """The same stream during each incident of bench/incidents.py, in process and served."""
    if not incidents:
        return []
    columns = [
        (title, incidents[scenario]["pipeline"], incidents[scenario]["served"])
        for scenario, title in TITLES.items()
        if scenario in incidents
    ]

    def quantiles(timed: dict[str, Any], *names: str) -> str:
        return " / ".join(_fmt(timed.get(f"{q}_seconds"), ".3f", " s") for q in names)

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(pipe, served) for _, pipe, served in columns) + " |"

    def page(name: str) -> Any:
        return lambda p, s: f"{quantiles(s['pages'][name], 'p50', 'p99')}, {s['pages'][name]['bytes']:,} B"

    fetches = columns[0][2]["pages"]["fetches"]
    rows = [
        row("controllers down", lambda p, s: ", ".join(p["down"])),
        row("in process, one core: findings, healthy -> during the incident",
            lambda p, s: f"{p['findings_healthy']:,} -> {p['findings']:,}"),
        row("first evaluation after they went down",
            lambda p, s: _fmt(p["first_evaluate_ms"], ",.0f", " ms")),
        row("churn event (upsert + evaluate), mean / p99, of the first N still written",
            lambda p, s: f"{_fmt(p['event_ms_mean'], ',.1f')} / {_fmt(p['event_ms_p99'], ',.1f', ' ms')} "
            f"(N = {p['churn_events']:,})"),
        row("stalewatch run: outage written -> Leases ran out",
            lambda p, s: _fmt(s["outage"]["leases_expired_after_seconds"], ".1f", " s")),
        row("Leases ran out -> /api/v1/findings names every one ControllerDown",
            lambda p, s: _fmt(s["outage"]["served_after_expiry_seconds"], ".2f", " s")),
        row("findings served during the churn", lambda p, s: f"{s['pages']['findings_served']:,}"),
        row("detection probes (a healthy Pod broken) / seen",
            lambda p, s: f"{s['detection']['probes']:,} / {s['detection']['seen']:,}"),
        row("detection p50 / p99 / max, line written -> /api/v1/findings names it",
            lambda p, s: quantiles(s["detection"], "p50", "p99", "max")),
        row(f"/api/v1/findings p50 / p99 ({fetches} fetches through the churn), body", page("findings")),
        row(f"/ (the page) p50 / p99 ({fetches} fetches through the churn), body", page("page")),
        row("under the churn, scraped every 15 s and polled by the probes: CPU",
            lambda p, s: _fmt(s["churn"]["cpu_cores"], ".2f", " cores")),
        row("RSS synced / at the end of the churn",
            lambda p, s: f"{s['rss_bytes_synced'] / 2**20:,.0f} / {s['churn']['rss_bytes'] / 2**20:,.0f} "
            "MiB"),
        row("load average (1, 5, 15 min) at the end",
            lambda p, s: ", ".join(f"{v:.1f}" for v in s.get("load_average", ()))),
    ]  # fmt: skip
    return [
        "### Maximum-size cluster during an incident",
        "",
        "The same stream, its controllers failing as a real outage writes it (bench/incidents.py: "
        "their Pods crash-looping, no available replica, their Leases left to run out, their own "
        "status writes gone from the churn); in process on one core (CPU time), and served to a "
        "fresh `stalewatch run` once it names every one of them ControllerDown:",
        "",
        "| | " + " | ".join(title for title, _, _ in columns) + " |",
        "| --- |" + " ---: |" * len(columns),
        *rows,
        "",
    ]


def calibration_table(calibration: dict[str, dict[str, list[int]]] | None) -> list[str]:
    """Mean bytes per event of each type and kind: the synthetic stream beside the real recording."""
    if not calibration:
        return []
    real, synthetic = calibration["real"], calibration["synthetic"]
    out = [
        "Mean bytes per event, the synthetic stream against the real recording it took the API "
        "server's additions from:",
        "",
        "| event | real recording | synthetic |",
        "| --- | ---: | ---: |",
    ]
    for name in sorted(real.keys() & synthetic.keys()):
        (rn, rb), (sn, sb) = real[name], synthetic[name]
        out.append(f"| {name} | {rb / rn:,.0f} B ({rn:,}) | {sb / sn:,.0f} B ({sn:,}) |")
    return [*out, ""]
