"""Each relist and each evaluation pass of `stalewatch run` is a span, with the counts on-call
would look for, captured by the SDK's in-memory exporter against the real API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.controlplane.harness import ControlPlane
from tests.kube.support import poll, running, settings_for
from tests.kubeclient import Kube

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """OpenTelemetry allows one global provider per process; this module installs it once."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    exporter.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_relists_and_evaluations_are_traced_with_kind_and_counts(
    spans: InMemorySpanExporter, control_plane: ControlPlane, kube: Kube, namespace: str
) -> None:
    await kube.create(
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": namespace},
            "spec": {
                "interval": "10m",
                "path": "./apps",
                "sourceRef": {"kind": "GitRepository", "name": "flux"},
            },
        }
    )
    spans.clear()
    async with running(settings_for(control_plane.kubeconfig)):
        # the first evaluation may run before every kind is listed: wait for one that saw the
        # Kustomization, after the relists the assertions below read
        await poll(
            lambda: _listed(spans) and _judged_gitops(spans), within=30, what="a synced evaluation span"
        )

    relists = {
        s.attributes["k8s.kind"]: s.attributes for s in named(spans, "stalewatch.relist") if s.attributes
    }
    assert relists["Kustomization"]["k8s.group"] == "kustomize.toolkit.fluxcd.io"
    assert relists["Kustomization"]["stalewatch.reason"] == "initial"
    assert int(str(relists["Kustomization"]["stalewatch.objects"])) >= 1
    assert {"Pod", "Deployment", "Lease"} <= set(relists)

    evaluation = named(spans, "stalewatch.evaluate")[-1].attributes
    assert evaluation is not None
    assert int(str(evaluation["stalewatch.gitops_objects"])) >= 1
    assert {"stalewatch.findings", "stalewatch.roots", "stalewatch.findings_changed"} <= set(evaluation)


def _listed(exporter: InMemorySpanExporter) -> bool:
    kinds = {str(s.attributes.get("k8s.kind")) for s in named(exporter, "stalewatch.relist") if s.attributes}
    return {"Kustomization", "Pod", "Deployment", "Lease"} <= kinds


def _judged_gitops(exporter: InMemorySpanExporter) -> bool:
    return any(
        s.attributes and int(str(s.attributes.get("stalewatch.gitops_objects", 0))) >= 1
        for s in named(exporter, "stalewatch.evaluate")
    )
