"""The Helm chart's generated files (charts/stalewatch/), each from the declaration the program
itself uses, so the chart cannot drift from it: values.schema.json from the settings
(watcher/config.py), the PrometheusRule's rules from watcher/export/alerts.py, the dashboards
from watcher/export/dashboards.py, and the size presets from the benchmark's measurements.
charts/generate.py writes them (and deploy/, rendered from the chart)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import yaml

from watcher.config import Settings
from watcher.export import alerts, dashboards

CHART_OWNED_SETTINGS = ("listen", "kubeconfig", "context")
"""Settings the chart decides, not its values: the port (`port`, which the probes and Service
use too) and the in-cluster credentials."""

GO_DURATION = r"^([0-9]+(\.[0-9]+)?|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$"
"""A duration as the settings read it: seconds, or Go's spelling (watcher/config.py setting_duration)."""

MIB = 2**20
MEMORY_STEP = 64 * MIB
CPU_STEP = 0.1


def _duration(description: str | None) -> dict[str, Any]:
    """Go's spelling ("90s", "1h30m") or a number of seconds, as setting_duration accepts."""
    schema: dict[str, Any] = {
        "type": ["string", "number"],
        "pattern": GO_DURATION,
        "minimum": 0,
        "description": "a duration such as 90s, 10m or 1h30m, or a number of seconds",
    }
    if description:
        schema["description"] = f"{description} ({schema['description']})"
    return schema


def _clean(node: Any) -> Any:
    """Pydantic's schema as Helm's validator should read it: durations as _duration, no titles,
    references to the root's $defs."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "duration":
        return _duration(node.get("description"))
    cleaned = {key: _clean(value) for key, value in node.items() if key not in ("title", "default")}
    if cleaned.get("format") == "path":
        del cleaned["format"]
    return cleaned


def settings_schema() -> dict[str, Any]:
    """The settings' JSON schema, their defaults as stalewatch prints them (`config show`)."""
    schema = Settings.model_json_schema()
    defaults = Settings.model_construct().model_dump(mode="json")  # no environment read
    fields = schema["properties"].items()
    properties = {name: _clean(field) for name, field in fields if name not in CHART_OWNED_SETTINGS}
    for name, field in properties.items():
        field["default"] = defaults[name]
    definitions = _clean(schema["$defs"])
    for name, field in definitions["ThresholdSettings"]["properties"].items():
        field["default"] = defaults["thresholds"][name]
    return {
        "type": "object",
        "description": "stalewatch's settings (docs/configuration.md); listen is the chart's `port`",
        "additionalProperties": False,
        "properties": properties,
        "$defs": definitions,
    }


def _object(properties: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": dict(properties), **extra}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_BOOL = {"type": "boolean"}
_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ANY_OBJECT = {"type": "object"}
_LIST = {"type": "array"}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_MONITOR = _object({"enabled": _BOOL, "labels": _MAP, "interval": _STRING, "scrapeTimeout": _STRING})
_READ_RULE = _object(
    {
        "apiGroups": _STRINGS,
        "resources": {"type": "array", "items": {"type": "string", "not": {"enum": ["secrets", "*"]}}},
        "resourceNames": _STRINGS,
        "verbs": {"type": "array", "items": {"enum": ["get", "list", "watch"]}},
    },
    required=["apiGroups", "resources", "verbs"],
    description="a read-only rule: get, list and watch only, never Secrets",
)


def values_schema(sizes: Mapping[str, Any]) -> str:
    """values.schema.json: the chart's own values, and `settings` from watcher/config.py."""
    settings = settings_schema()
    definitions = settings.pop("$defs")
    chart = _object(
        {
            "global": _ANY_OBJECT,
            "image": _object({"repository": _STRING, "tag": _STRING, "pullPolicy": _STRING}),
            "imagePullSecrets": _LIST,
            "settings": settings,
            "port": _PORT,
            "size": {"enum": sorted(sizes), "description": "a resource preset (files/sizes.yaml)"},
            "resources": _ANY_OBJECT,
            "serviceAccount": _object({"create": _BOOL, "name": _STRING, "annotations": _MAP}),
            "rbac": _object({"create": _BOOL, "extraRules": {"type": "array", "items": _READ_RULE}}),
            "podAnnotations": _MAP,
            "podLabels": _MAP,
            "nodeSelector": _MAP,
            "tolerations": _LIST,
            "affinity": _ANY_OBJECT,
            "priorityClassName": _STRING,
            "env": _LIST,
            "extraVolumes": _LIST,
            "extraVolumeMounts": _LIST,
            "service": _object({"annotations": _MAP}),
            "serviceMonitor": _MONITOR,
            "podMonitor": _MONITOR,
            "prometheusRule": _object({"enabled": _BOOL, "labels": _MAP}),
            "dashboards": _object(
                {"enabled": _BOOL, "labels": _MAP, "annotations": _MAP, "namespace": _STRING}
            ),
            "networkPolicy": _object(
                {
                    "enabled": _BOOL,
                    "apiServer": _object({"cidrs": _STRINGS, "ports": {"type": "array", "items": _PORT}}),
                    "dns": _object({"namespaceSelector": _ANY_OBJECT, "podSelector": _ANY_OBJECT}),
                    "controllerNamespaces": _STRINGS,
                    "controllerMetricsPort": _PORT,
                    "metricsFrom": _LIST,
                    "extraEgress": _LIST,
                }
            ),
        },
        **{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": definitions},
    )
    return json.dumps(chart, indent=2, ensure_ascii=False) + "\n"


def size_preset(rss_bytes: float, cpu_cores: float) -> dict[str, Any]:
    """Requests from one benchmark measurement under churn: memory rounded up to 64 MiB, limited
    at twice that (an incident's burst of findings, the allocator's slack); CPU twice the
    measured, rounded up to 100m (the initial sync and an incident's evaluations). No CPU limit:
    throttling would delay the findings, which is the one thing that must not wait."""
    memory = math.ceil(rss_bytes / MEMORY_STEP) * MEMORY_STEP // MIB
    cpu = math.ceil(round(2 * cpu_cores / CPU_STEP, 6)) * CPU_STEP
    return {
        "requests": {"cpu": f"{round(cpu * 1000)}m", "memory": f"{memory}Mi"},
        "limits": {"memory": f"{2 * memory}Mi"},
    }


def sizes_file(measured: Mapping[str, tuple[str, float, float]]) -> str:
    """files/sizes.yaml: per size, its preset and the measurement it comes from."""
    lines = ["# Generated by charts/generate.py from bench/results/ (BENCHMARKS.md). Do not edit."]
    presets = {}
    for size, (source, rss, cpu) in measured.items():
        lines.append(f"# {size}: {source}, {rss / MIB:.0f} MiB and {cpu:.3f} cores under churn")
        presets[size] = size_preset(rss, cpu)
    return "\n".join(lines) + "\n" + yaml.safe_dump(presets, sort_keys=False)


def prometheus_rule_spec() -> str:
    """The PrometheusRule's spec: the rule groups of alerts/, from the same declaration."""
    return alerts.dump_yaml({"groups": alerts.rule_groups()})


def dashboard_files() -> dict[str, str]:
    """files/dashboards/<stem>.json, the same JSON as dashboards/."""
    return {f"{stem}.json": dashboards.render(stem) for stem in dashboards.DASHBOARDS}
