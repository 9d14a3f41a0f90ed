"""Where the heartbeat reader reads each controller's /metrics: HealthModel.metrics_targets().

One named case per rule: the port (metrics_port setting, then the container port named
http-prom, then the prometheus.io/port annotation on the pod template), the Pods (the Lease's
holder alone, else every Ready Pod) and the reason a controller cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.model.builders import FLUX_NS, NOW, Obj, deployment, lease, pod
from watcher.model.engine import HealthModel
from watcher.model.ingest.projection import project
from watcher.model.rules.metrics_targets import MetricsTarget
from watcher.model.types import DEFAULT_CONTROLLERS, ControllerSpec, ModelConfig

KC = "kustomize-controller"
POD_A, POD_B = f"{KC}-7d9f-aaaaa", f"{KC}-7d9f-bbbbb"


def workload(*, ports: list[Obj] | None = None, annotations: dict[str, str] | None = None) -> Obj:
    obj = deployment(KC, replicas=2)
    template = obj["spec"]["template"]
    if ports is not None:
        template["spec"]["containers"][0]["ports"] = ports
    if annotations is not None:
        template["metadata"]["annotations"] = annotations
    return obj


def a_pod(name: str, ip: str, *, ready: bool = True) -> Obj:
    obj = pod(name, app=KC, ready=ready)
    obj["status"]["podIP"] = ip
    return obj


FLUX_PORTS = [{"name": "http", "containerPort": 9090}, {"name": "http-prom", "containerPort": 8080}]
HOLDER = lease(f"{KC}-leader-election", holder=f"{POD_B}_0c1f3a")


@dataclass
class Case:
    objects: list[Obj]
    expected: dict[str, Any]
    metrics_port: int | None = None
    pods: list[Obj] = field(default_factory=lambda: [a_pod(POD_A, "10.0.0.1"), a_pod(POD_B, "10.0.0.2")])


CASES = {
    "flux_s_http_prom_port_on_the_leader_alone": Case(
        [workload(ports=FLUX_PORTS), HOLDER],
        {
            "port": 8080,
            "port_from": "container port http-prom",
            "pods": ((POD_B, "10.0.0.2"),),
            "leader": POD_B,
        },
    ),
    "without_a_leader_every_ready_pod": Case(
        [workload(ports=FLUX_PORTS)],
        {"pods": ((POD_A, "10.0.0.1"), (POD_B, "10.0.0.2")), "leader": None, "problem": ""},
    ),
    "a_pod_that_is_not_ready_is_not_read": Case(
        [workload(ports=FLUX_PORTS)],
        {"pods": ((POD_B, "10.0.0.2"),)},
        pods=[a_pod(POD_A, "10.0.0.1", ready=False), a_pod(POD_B, "10.0.0.2")],
    ),
    "the_prometheus_port_annotation_when_no_port_is_named_http_prom": Case(
        [workload(annotations={"prometheus.io/port": "8081", "prometheus.io/scrape": "true"})],
        {"port": 8081, "port_from": "annotation prometheus.io/port"},
    ),
    "the_metrics_port_setting_wins": Case(
        [workload(ports=FLUX_PORTS)], {"port": 9797, "port_from": "metrics_port setting"}, metrics_port=9797
    ),
    "no_port_at_all_is_a_problem_not_a_guess": Case(
        [workload(ports=[{"name": "http", "containerPort": 9090}])],
        {
            "port": None,
            "problem": "no metrics port: no container port named http-prom, no "
            "prometheus.io/port annotation on its pod template, no metrics_port setting",
        },
    ),
    "no_ready_pod_is_a_problem": Case(
        [workload(ports=FLUX_PORTS)],
        {"pods": (), "problem": f"Deployment/{FLUX_NS}/{KC} has no Ready Pod"},
        pods=[a_pod(POD_A, "10.0.0.1", ready=False)],
    ),
    "a_leader_with_no_ip_yet_is_a_problem": Case(
        [workload(ports=FLUX_PORTS), HOLDER],
        {"pods": (), "problem": f"its Ready Pod {POD_B} has no IP yet"},
        pods=[a_pod(POD_A, "10.0.0.1"), a_pod(POD_B, "")],
    ),
}


def target(case: Case) -> MetricsTarget:
    specs = tuple(
        ControllerSpec(spec.name, spec.groups, metrics_port=case.metrics_port) if spec.name == KC else spec
        for spec in DEFAULT_CONTROLLERS
    )
    model = HealthModel(ModelConfig(controllers=specs))
    for obj in [*case.objects, *case.pods]:
        model.upsert(project(obj), now=NOW)
    model.evaluate(NOW)
    (found,) = [t for t in model.metrics_targets() if t.controller == KC]
    return found


@pytest.mark.parametrize("name", CASES)
def test_metrics_targets(name: str) -> None:
    found = target(CASES[name])
    assert {key: getattr(found, key) for key in CASES[name].expected} == CASES[name].expected
    assert found.workload == f"Deployment/{FLUX_NS}/{KC}"
