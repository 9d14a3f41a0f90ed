"""The objects the lab writes: the fake node, the Flux Deployments, kwok's configuration.

The Deployments look like a real `flux install` (names, labels, container `manager`, image
`ghcr.io/fluxcd/<name>:<version>`, leader election on), because stalewatch finds controllers and
their pods by exactly those fields. The processes behind them run on the host (see lab.py); kwok
only plays the kubelet that reports the pods' status.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "flux-system"
WATCH_SELECTOR = "!sharding.fluxcd.io/key"
"""Every lab controller is a sharded install's main one: it leaves objects with a shard key out."""


def lease_name(controller: str) -> str:
    """The Lease a Flux controller started with --watch-label-selector takes: fluxcd/pkg's
    leaderelection.GenerateID, `<name>-leader-election-` + the first 8 hex of the selector's SHA-256."""
    return f"{controller}-leader-election-{hashlib.sha256(WATCH_SELECTOR.encode()).hexdigest()[:8]}"


NODE = "lab-node-0"
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")
# break_pod() puts this label (value: the waiting reason) and annotation (the message) on a pod;
# the fault Stage below then reports its container as waiting with that reason, as a kubelet does.
FAULT_LABEL = "lab.stalewatch.io/fault"
FAULT_MESSAGE = "lab.stalewatch.io/fault-message"
# Selects the nodes this kwok plays the kubelet for.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def node() -> dict[str, Any]:
    """One fake node. kwok's Stages make it Ready; every lab pod is bound to it by nodeName,
    since no scheduler runs."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
    }


def _args(name: str) -> list[str]:
    """The container args of a real Flux install (informational: the host process gets its own)."""
    args = [
        "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
        "--watch-all-namespaces=true",
        "--log-level=info",
        "--log-encoding=json",
        "--enable-leader-election",
        f"--watch-label-selector={WATCH_SELECTOR}",
    ]
    if name == "source-controller":
        args += [
            "--storage-path=/data",
            "--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.",
        ]
    return args


def deployment(name: str, version: str) -> dict[str, Any]:
    """The Deployment of one Flux controller, as `flux install` writes it (trimmed of what a fake
    kubelet ignores: volumes, resources, security context)."""
    labels = {
        "app.kubernetes.io/component": name,
        "app.kubernetes.io/instance": NAMESPACE,
        "app.kubernetes.io/part-of": "flux",
        "control-plane": "controller",
    }
    ports = [{"containerPort": 8080, "name": "http-prom", "protocol": "TCP"}]
    ports.append({"containerPort": 9440, "name": "healthz", "protocol": "TCP"})
    if name == "source-controller":
        ports.append({"containerPort": 9090, "name": "http", "protocol": "TCP"})
    container = {
        "name": "manager",
        "image": f"ghcr.io/fluxcd/{name}:{version}",
        "imagePullPolicy": "IfNotPresent",
        "args": _args(name),
        "env": [
            {"name": "RUNTIME_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
        ],
        "ports": ports,
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "healthz"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"prometheus.io/port": "8080", "prometheus.io/scrape": "true"},
                },
                "spec": {
                    "nodeName": NODE,
                    "serviceAccountName": name,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                },
            },
        },
    }


def service_account(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


# A container that died and cannot come back: restarted once, now waiting with the fault's reason
# (ImagePullBackOff by default), Ready=False. `running: null` removes the running state: kwok
# applies the template as a strategic merge patch, which would otherwise keep both states.
_FAULT_STAGE_TEMPLATE = """\
{{ $now := Now }}
{{ $reason := index .metadata.labels "%(label)s" }}
{{ $message := index .metadata.annotations "%(message)s" }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: {{ printf "containers with unready status: [%%s]" (index .spec.containers 0).name | Quote }}
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: {{ printf "containers with unready status: [%%s]" (index .spec.containers 0).name | Quote }}
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 1
  lastState:
    terminated:
      exitCode: 137
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  state:
    running: null
    waiting:
      reason: {{ $reason | Quote }}
      message: {{ $message | Quote }}
{{ end }}
"""


def fault_stage() -> dict[str, Any]:
    """kwok Stage: a Running, Ready pod carrying FAULT_LABEL becomes not ready, its container
    waiting with the label's reason. (kwok's Stage events have a fixed message, so the lab writes
    the kubelet's events itself: see kubelet_events.)"""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "lab-pod-container-fault"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": f'.metadata.labels["{FAULT_LABEL}"]', "operator": "Exists"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "In",
                        "values": ["True"],
                    },
                ]
            },
            "weight": 10000,
            "next": {
                "statusTemplate": _FAULT_STAGE_TEMPLATE % {"label": FAULT_LABEL, "message": FAULT_MESSAGE}
            },
        },
    }


def kwok_config(path: Path) -> Path:
    """kwok's own configuration plus the fault Stage. Standalone kwok takes its parallelism from
    here; kwok's stock node/pod Stages come as separate --config files from the build cache."""
    configuration = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "podPlayStageParallelism": 4,
            "nodePlayStageParallelism": 2,
            "nodeLeaseParallelism": 2,
            "nodeLeaseDurationSeconds": 40,
            "podsOnNodeSyncParallelism": 2,
        },
    }
    path.write_text(yaml.safe_dump_all([configuration, fault_stage()], sort_keys=False))
    return path


def fault_message(reason: str, image: str, pod: str) -> str:
    """What the kubelet says for the usual waiting reasons."""
    if reason == "ImagePullBackOff":
        return f'Back-off pulling image "{image}"'
    if reason == "ErrImagePull":
        return f'failed to pull and unpack image "{image}": not found'
    if reason == "CrashLoopBackOff":
        return f"back-off 5m0s restarting failed container=manager pod={pod}_{NAMESPACE}"
    return reason


def kubelet_events(pod: dict[str, Any], reason: str, message: str, now: str) -> list[dict[str, Any]]:
    """The events a kubelet records for a container stuck waiting: `BackOff` with the message,
    then `Failed` with `Error: <reason>`."""
    meta = pod["metadata"]
    involved = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
        "fieldPath": "spec.containers{manager}",
    }
    recorded = [("Normal", "BackOff", message), ("Warning", "Failed", f"Error: {reason}")]
    return [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"]},
            "involvedObject": involved,
            "type": kind,
            "reason": why,
            "message": text,
            "source": {"component": "kubelet", "host": NODE},
            "reportingComponent": "kubelet",
            "reportingInstance": NODE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        for kind, why, text in recorded
    ]


def git_repository(url: str, name: str = "lab") -> dict[str, Any]:
    """A GitRepository following main of `url` (`lab`: the lab's Git server's repository)."""
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"url": url, "interval": "1m", "ref": {"branch": "main"}},
    }


def kustomization(name: str = "apps", *, path: str = "./apps", source: str = "lab") -> dict[str, Any]:
    """A Kustomization applying `path` of GitRepository `source`, pruned (`apps`: ./apps of `lab`)."""
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "interval": "1m",
            "path": path,
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": source},
        },
    }


CHART = "./charts/app"
CHART_FILES = {
    "charts/app/Chart.yaml": yaml.safe_dump({"apiVersion": "v2", "name": "app", "version": "1.0.0"}),
    # One Deployment on the lab's node; values.fault puts its Pods into ImagePullBackOff (the
    # fault Stage), as a wrong image tag does in a cluster.
    "charts/app/templates/deployment.yaml": f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{{{ .Release.Name }}}}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {{{{ .Release.Name }}}}
  template:
    metadata:
      labels:
        app: {{{{ .Release.Name }}}}
        {{{{- if .Values.fault }}}}
        {FAULT_LABEL}: ImagePullBackOff
        {{{{- end }}}}
      annotations:
        {FAULT_MESSAGE}: 'Back-off pulling image "{{{{ .Values.image }}}}"'
    spec:
      nodeName: {NODE}
      containers:
      - name: app
        image: {{{{ .Values.image }}}}
""",
}


def helm_release(name: str, *, wait: bool, fault: bool = True) -> dict[str, Any]:
    """A HelmRelease of the lab's chart (from GitRepository `lab`) into `default`; `wait: False`
    disables Helm's wait for the workload, as many charts' users do; `fault` breaks its Pods."""
    spec: dict[str, Any] = {
        "interval": "1m",
        "timeout": "2m",
        "targetNamespace": "default",
        "chart": {
            "spec": {
                "chart": CHART,
                "interval": "1m",
                "sourceRef": {"kind": "GitRepository", "name": "lab"},
            }
        },
        "values": {"fault": fault, "image": f"registry.lab.test/{name}:1.0.0"},
    }
    if not wait:
        spec["install"] = {"disableWait": True}
        spec["upgrade"] = {"disableWait": True}
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
