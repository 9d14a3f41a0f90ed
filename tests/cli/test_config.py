"""Settings: durations, layering (flag > env > file > default), and the ModelConfig they build."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.cli import main
from watcher.config import (
    ConfigError,
    Settings,
    ThresholdSettings,
    build_model_config,
    load_settings,
    parse_set_options,
    setting_duration,
)
from watcher.model.ingest.objects import format_duration
from watcher.model.types import (
    DEFAULT_CONTROLLERS,
    DEFAULT_SEVERITIES,
    ControllerSpec,
    FindingType,
    Severity,
    Thresholds,
)


@pytest.fixture(autouse=True)
def _no_stalewatch_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set exactly the STALEWATCH_* variables they are about."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("STALEWATCH_"):
            monkeypatch.delenv(name)


def write_config(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "stalewatch.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("90s", 90, id="seconds"),
        pytest.param("10m", 600, id="minutes"),
        pytest.param("1h30m", 5400, id="hours-and-minutes-like-flux-intervals"),
        pytest.param("10m0s", 600, id="go-spelling-with-zero-seconds"),
        pytest.param("1.5h", 5400, id="fractional-hours"),
        pytest.param("250ms", 0.25, id="milliseconds"),
        pytest.param("0", 0, id="zero-as-string"),
        pytest.param("45", 45, id="bare-number-string-is-seconds"),
        pytest.param(30, 30, id="integer-is-seconds"),
        pytest.param(2.5, 2.5, id="float-is-seconds"),
    ],
)
def test_durations_parse_like_flux_intervals_or_seconds(value: object, seconds: float) -> None:
    assert setting_duration(value) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("10x", id="unknown-unit"),
        pytest.param("-5", id="negative-string"),
        pytest.param(-5, id="negative-number"),
        pytest.param("", id="empty"),
        pytest.param("m", id="unit-without-number"),
        pytest.param("5 m", id="space-inside"),
        pytest.param(True, id="boolean"),
    ],
)
def test_bad_durations_say_which_forms_are_accepted(value: object) -> None:
    with pytest.raises(ValueError, match=r"expected a duration such as 90s, 10m or 1h30m"):
        setting_duration(value)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        pytest.param(timedelta(0), "0s", id="zero"),
        pytest.param(timedelta(seconds=90), "1m30s", id="minute-and-seconds"),
        pytest.param(timedelta(hours=1, minutes=30), "1h30m", id="hour-and-minutes"),
        pytest.param(timedelta(days=2), "48h", id="days-as-hours-like-go"),
        pytest.param(timedelta(milliseconds=250), "250ms", id="milliseconds"),
    ],
)
def test_durations_print_in_go_spelling_and_read_back(delta: timedelta, text: str) -> None:
    assert format_duration(delta) == text
    assert setting_duration(text) == delta


def test_threshold_settings_cover_every_model_threshold_with_its_default() -> None:
    assert set(ThresholdSettings.model_fields) == {f.name for f in dataclasses.fields(Thresholds)}
    assert ThresholdSettings().to_thresholds() == Thresholds()


def test_defaults_build_the_models_default_config() -> None:
    config = build_model_config(load_settings())
    assert config.thresholds == Thresholds()
    assert dict(config.severities) == dict(DEFAULT_SEVERITIES)
    assert config.controllers == DEFAULT_CONTROLLERS


@pytest.mark.parametrize(
    ("file", "env", "flag", "expected"),
    [
        pytest.param(None, None, None, "10m", id="default"),
        pytest.param("20m", None, None, "20m", id="file-over-default"),
        pytest.param("20m", "30m", None, "30m", id="env-over-file"),
        pytest.param("20m", "30m", "40m", "40m", id="flag-over-env"),
        pytest.param(None, None, "40m", "40m", id="flag-over-default"),
        pytest.param("20m", None, "40m", "40m", id="flag-over-file"),
    ],
)
def test_settings_precedence_is_flag_then_env_then_file_then_default(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file: str | None,
    env: str | None,
    flag: str | None,
    expected: str,
) -> None:
    config_file = write_config(tmp_path, {"thresholds": {"revision_skew": file}}) if file else None
    if env:
        monkeypatch.setenv("STALEWATCH_THRESHOLDS__REVISION_SKEW", env)
    overrides = parse_set_options([f"thresholds.revision_skew={flag}"] if flag else [])
    settings = load_settings(config_file=config_file, overrides=overrides)
    assert settings.thresholds.revision_skew == setting_duration(expected)


def test_nested_settings_merge_key_by_key_across_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = write_config(tmp_path, {"thresholds": {"revision_skew": "20m"}, "log_level": "debug"})
    monkeypatch.setenv("STALEWATCH_THRESHOLDS__RETRY_LOOP", "15m")
    settings = load_settings(
        config_file=config_file, overrides=parse_set_options(["thresholds.workload_unhealthy=1m"])
    )
    assert settings.thresholds.revision_skew == timedelta(minutes=20)
    assert settings.thresholds.retry_loop == timedelta(minutes=15)
    assert settings.thresholds.workload_unhealthy == timedelta(minutes=1)
    assert settings.thresholds.generation_not_observed == Thresholds().generation_not_observed
    assert settings.log_level == "debug"


def test_every_setting_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {
        "STALEWATCH_THRESHOLDS__STUCK_RECONCILING_INTERVAL_FACTOR": "4",
        "STALEWATCH_SEVERITIES__STATUSSTALE": "Warning",
        "STALEWATCH_INCLUDE_NAMESPACES": "flux-system, apps",
        "STALEWATCH_EXCLUDE_NAMESPACES": '["kube-system"]',
        "STALEWATCH_CONTROLLERS": '[{"name": "crossplane", "groups": ["pkg.crossplane.io"]}]',
        "STALEWATCH_LISTEN": "127.0.0.1:9090",
        "STALEWATCH_KUBECONFIG": "/etc/kube/config",
        "STALEWATCH_CONTEXT": "prod",
        "STALEWATCH_LOG_LEVEL": "DEBUG",
        "STALEWATCH_LOG_FORMAT": "json",
        "STALEWATCH_OTEL_EXPORTER": "otlp",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.thresholds.stuck_reconciling_interval_factor == 4.0
    assert settings.severities[FindingType.STATUS_STALE] == Severity.WARNING
    assert settings.include_namespaces == ["flux-system", "apps"]
    assert settings.exclude_namespaces == ["kube-system"]
    assert [c.name for c in settings.controllers] == ["crossplane"]
    assert (settings.listen, settings.kubeconfig, settings.context) == (
        "127.0.0.1:9090",
        "/etc/kube/config",
        "prod",
    )
    assert (settings.log_level, settings.log_format, settings.otel_exporter) == ("debug", "json", "otlp")


def test_severity_overrides_merge_over_the_model_defaults(tmp_path: Path) -> None:
    settings = load_settings(config_file=write_config(tmp_path, {"severities": {"RevisionSkew": "critical"}}))
    severities = build_model_config(settings).severities
    assert severities[FindingType.REVISION_SKEW] == Severity.CRITICAL
    assert {t: s for t, s in severities.items() if t != FindingType.REVISION_SKEW} == {
        t: s for t, s in DEFAULT_SEVERITIES.items() if t != FindingType.REVISION_SKEW
    }


def test_extra_controllers_are_appended_and_a_built_in_name_is_replaced(tmp_path: Path) -> None:
    config_file = write_config(
        tmp_path,
        {
            "controllers": [
                {
                    "name": "tofu-controller",
                    "namespace": "tofu-system",
                    "groups": ["infra.contrib.fluxcd.io"],
                    "lease": "1953de50.contrib.fluxcd.io",
                },
                {
                    "name": "crossplane",
                    "selector": {"app.kubernetes.io/name": "crossplane"},
                    "groups": ["pkg.crossplane.io", "apiextensions.crossplane.io"],
                    "kinds": ["Provider", "Configuration"],
                    "lease_namespace": "crossplane-system",
                },
            ]
        },
    )
    controllers = build_model_config(load_settings(config_file=config_file)).controllers
    tofu = ControllerSpec(
        name="tofu-controller",
        groups=("infra.contrib.fluxcd.io",),
        namespace="tofu-system",
        lease="1953de50.contrib.fluxcd.io",
    )
    crossplane = ControllerSpec(
        name="crossplane",
        groups=("pkg.crossplane.io", "apiextensions.crossplane.io"),
        kinds=("Provider", "Configuration"),
        selector={"app.kubernetes.io/name": "crossplane"},
        lease_namespace="crossplane-system",
    )
    expected = [tofu if c.name == "tofu-controller" else c for c in DEFAULT_CONTROLLERS]
    assert controllers == (*expected, crossplane)


@pytest.mark.parametrize(
    ("include", "exclude", "namespace", "watched"),
    [
        pytest.param([], [], "apps", True, id="everything-by-default"),
        pytest.param(["flux-system"], [], "apps", False, id="not-included"),
        pytest.param(["flux-system"], [], "flux-system", True, id="included"),
        pytest.param([], ["kube-system"], "kube-system", False, id="excluded"),
        pytest.param(["apps"], ["apps"], "apps", False, id="exclude-wins-over-include"),
        pytest.param(["apps"], [], "", True, id="cluster-scoped-always-watched"),
    ],
)
def test_namespace_filter(include: list[str], exclude: list[str], namespace: str, watched: bool) -> None:
    settings = Settings(include_namespaces=include, exclude_namespaces=exclude)
    assert settings.watches_namespace(namespace) is watched


@pytest.mark.parametrize(
    ("assignments", "overrides"),
    [
        pytest.param(["listen=:9090"], {"listen": ":9090"}, id="top-level"),
        pytest.param(["thresholds.retry_loop=1h"], {"thresholds": {"retry_loop": "1h"}}, id="nested"),
        pytest.param(["include_namespaces=[a, b]"], {"include_namespaces": ["a", "b"]}, id="yaml-flow-list"),
        pytest.param(["context=a=b"], {"context": "a=b"}, id="value-may-contain-equals"),
        pytest.param(
            ["thresholds.retry_loop=1h", "thresholds.revision_skew=2m"],
            {"thresholds": {"retry_loop": "1h", "revision_skew": "2m"}},
            id="repeated-merge",
        ),
    ],
)
def test_set_options_become_nested_overrides(assignments: list[str], overrides: dict[str, Any]) -> None:
    assert parse_set_options(assignments) == overrides


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        pytest.param(
            ["listen"], "config: --set 'listen': expected KEY=VALUE, e.g. log_level=debug", id="no-equals"
        ),
        pytest.param(["=x"], "config: --set '=x': expected KEY=VALUE, e.g. log_level=debug", id="no-key"),
        pytest.param(
            ["thresholds..x=1"],
            "config: --set 'thresholds..x=1': expected KEY=VALUE, e.g. log_level=debug",
            id="empty-key-part",
        ),
        pytest.param(
            ["listen=:1", "listen.port=2"],
            "config: --set listen.port: listen is set to a value, not a group of settings",
            id="value-then-group",
        ),
        pytest.param(
            ["include_namespaces=[a"],
            "config: --set include_namespaces: not valid YAML: line 1, column 3: "
            "expected ',' or ']', but got '<stream end>'",
            id="broken-flow-list",
        ),
    ],
)
def test_bad_set_options_name_the_option(assignments: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_set_options(assignments)
    assert str(caught.value) == message


DURATION = "expected a duration such as 90s, 10m or 1h30m (units h, m, s, ms), or a number of seconds"
FINDING_TYPES = ", ".join(FindingType)
TOP_LEVEL = (
    "thresholds, severities, include_namespaces, exclude_namespaces, namespaces, controllers, "
    "conflict_watch_kinds, watch_kinds, listed_kinds_limit, listen, kubeconfig, context, log_level, "
    "log_format, otel_exporter, "
    "timeline_entries, heartbeat_interval, heartbeat_timeout, heartbeat_concurrency, heartbeat_prometheus, "
    "heartbeat_prometheus_bearer_token_file, heartbeat_prometheus_basic_auth_user, "
    "heartbeat_prometheus_basic_auth_password_file, heartbeat_prometheus_ca_file"
)
SELECTOR = (
    "expected label matchers in braces, values double-quoted and no __name__, "
    'such as {job="flux-system/kustomize-controller"}'
)
LISTEN = "expected [HOST]:PORT such as ':8080', '127.0.0.1:9090' or '[::1]:8080'"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            {"thresholds": {"revision_skew": "10x"}},
            f"config: thresholds.revision_skew: {DURATION}; got '10x'",
            id="threshold-not-a-duration",
        ),
        pytest.param(
            {"thresholds": {"retry_loop": "-5m"}},
            f"config: thresholds.retry_loop: {DURATION}; got '-5m'",
            id="threshold-negative",
        ),
        pytest.param(
            {"thresholds": {"stuck_reconciling_interval_factor": 0}},
            "config: thresholds.stuck_reconciling_interval_factor: Input should be greater than 0 (got 0)",
            id="factor-not-positive",
        ),
        pytest.param(
            {"thresholds": {"stuck_reconciling_interval_factor": "thrice"}},
            "config: thresholds.stuck_reconciling_interval_factor: Input should be a valid number, "
            "unable to parse string as a number (got 'thrice')",
            id="factor-not-a-number",
        ),
        pytest.param(
            {"thresholds": {"policy_denied_count": 1}},
            "config: thresholds.policy_denied_count: Input should be greater than or equal to 2 (got 1)",
            id="count-of-one-recurs-by-no-measure",
        ),
        pytest.param(
            {"thresholds": {"policy_denied_count": 10_001}},
            "config: thresholds.policy_denied_count: Input should be less than or equal to 10000 (got 10001)",
            id="count-past-its-bound",
        ),
        pytest.param(
            {"thresholds": {"policy_denied_count": 2.5}},
            "config: thresholds.policy_denied_count: Input should be a valid integer, got a number with a "
            "fractional part (got 2.5)",
            id="count-not-whole",
        ),
        pytest.param(
            {"thresholds": {"revison_skew": "5m"}},
            "config: thresholds.revison_skew: unknown setting; known: "
            + ", ".join(f.name for f in dataclasses.fields(Thresholds)),
            id="unknown-threshold",
        ),
        pytest.param(
            {"thresholds": ["5m"]},
            "config: thresholds: Input should be a valid dictionary or instance of ThresholdSettings "
            "(got ['5m'])",
            id="thresholds-not-a-mapping",
        ),
        pytest.param(
            {"severities": {"ControllerBroken": "critical"}},
            f"config: severities: unknown finding type 'ControllerBroken'; known: {FINDING_TYPES}",
            id="severity-for-unknown-finding-type",
        ),
        pytest.param(
            {"severities": {"StatusStale": "page"}},
            "config: severities.StatusStale: Input should be 'critical', 'warning' or 'info' (got 'page')",
            id="unknown-severity",
        ),
        pytest.param(
            {"include_namespaces": ["flux_system"]},
            "config: include_namespaces: 'flux_system' is not a namespace name "
            "(lowercase letters, digits and '-', 1-63)",
            id="bad-namespace-name",
        ),
        pytest.param(
            {"exclude_namespaces": {"kube-system": True}},
            "config: exclude_namespaces: Input should be a valid list (got {'kube-system': True})",
            id="namespaces-not-a-list",
        ),
        pytest.param(
            {"controllers": [{"name": "crossplane"}]},
            "config: controllers[0].groups: required",
            id="controller-without-groups",
        ),
        pytest.param(
            {"controllers": [{"name": "crossplane", "groups": []}]},
            "config: controllers[0].groups: List should have at least 1 item after validation, not 0 "
            "(got [])",
            id="controller-with-empty-groups",
        ),
        pytest.param(
            {"controllers": [{"name": "x", "groups": ["a"], "leases": "y"}]},
            "config: controllers[0].leases: unknown setting; known: "
            "name, namespace, selector, groups, kinds, lease, lease_namespace, metrics_port, "
            "heartbeat_selector",
            id="unknown-controller-field",
        ),
        pytest.param(
            {"controllers": [{"name": "x", "groups": ["a"], "selector": {"app": 1}}]},
            "config: controllers[0].selector.app: Input should be a valid string (got 1)",
            id="selector-value-not-a-string",
        ),
        pytest.param(
            {"controllers": {"name": "x"}},
            "config: controllers: Input should be a valid list (got {'name': 'x'})",
            id="controllers-not-a-list",
        ),
        pytest.param(
            {"listen": "8080"},
            f"config: listen: {LISTEN}; got '8080'",
            id="listen-without-colon",
        ),
        pytest.param(
            {"listen": ":70000"},
            f"config: listen: {LISTEN}; got ':70000'",
            id="listen-port-out-of-range",
        ),
        pytest.param(
            {"kubeconfig": ["a", "b"]},
            "config: kubeconfig: Input should be a valid string (got ['a', 'b'])",
            id="kubeconfig-not-a-path",
        ),
        pytest.param(
            {"log_level": "verbose"},
            "config: log_level: Input should be 'debug', 'info', 'warning' or 'error' (got 'verbose')",
            id="unknown-log-level",
        ),
        pytest.param(
            {"log_format": "logfmt"},
            "config: log_format: Input should be 'json' or 'text' (got 'logfmt')",
            id="unknown-log-format",
        ),
        pytest.param(
            {"otel_exporter": "jaeger"},
            "config: otel_exporter: Input should be 'none', 'console' or 'otlp' (got 'jaeger')",
            id="unknown-otel-exporter",
        ),
        pytest.param(
            {"timeline_entries": 5},
            "config: timeline_entries: Input should be greater than or equal to 100 (got 5)",
            id="timeline-entries-below-the-bound",
        ),
        pytest.param(
            {"timeline_entries": 200000},
            "config: timeline_entries: Input should be less than or equal to 100000 (got 200000)",
            id="timeline-entries-past-the-bound",
        ),
        pytest.param(
            {"conflict_watch_kinds": ["Widget.example.com", "ConfigMap"]},
            "config: conflict_watch_kinds: 'ConfigMap' is not a custom kind: expected Kind.group,"
            " e.g. Widget.example.com",
            id="conflict-watch-kind-without-its-group",
        ),
        pytest.param(
            {"conflict_watch_kinds": ["Ingress.networking.k8s.io"]},
            "config: conflict_watch_kinds: 'Ingress.networking.k8s.io' is a built-in kind: only"
            " custom kinds (served by a CRD) can be added",
            id="conflict-watch-kind-built-in",
        ),
        pytest.param(
            {"controllers": [{"name": "x", "groups": ["a"], "metrics_port": 70000}]},
            "config: controllers[0].metrics_port: Input should be less than 65536 (got 70000)",
            id="metrics-port-out-of-range",
        ),
        pytest.param(
            {"heartbeat_interval": "2m"},
            "config: heartbeat_interval: must be shorter than thresholds.heartbeat_stale_after (1m30s),"
            " or 0s (never read)",
            id="heartbeat-reads-further-apart-than-a-heartbeat-stays-fresh",
        ),
        pytest.param(
            {"heartbeat_timeout": "30s"},
            "config: heartbeat_timeout: must be longer than 0s and shorter than heartbeat_interval",
            id="heartbeat-timeout-past-the-interval",
        ),
        pytest.param(
            {"heartbeat_interval": "0s", "heartbeat_timeout": "0s"},
            "config: heartbeat_timeout: must be longer than 0s and shorter than heartbeat_interval",
            id="heartbeat-timeout-zero",
        ),
        pytest.param(
            {"heartbeat_concurrency": 0},
            "config: heartbeat_concurrency: Input should be greater than or equal to 1 (got 0)",
            id="heartbeat-concurrency-zero",
        ),
        pytest.param(
            {"heartbeat_prometheus": "prometheus:9090"},
            "config: heartbeat_prometheus: expected an http:// or https:// URL; got 'prometheus:9090'",
            id="heartbeat-prometheus-not-a-url",
        ),
        pytest.param(
            {"heartbeat_prometheus": "https://admin:secret@prometheus:9090"},
            "config: heartbeat_prometheus: no credentials in the URL (it is logged): "
            "heartbeat_prometheus_basic_auth_user",
            id="heartbeat-prometheus-with-credentials-in-the-url",
        ),
        pytest.param(
            {"controllers": [{"name": "x", "groups": ["a"], "heartbeat_selector": 'job="x"'}]},
            f"config: controllers[0].heartbeat_selector: {SELECTOR}; got 'job=\"x\"'",
            id="heartbeat-selector-without-braces",
        ),
        pytest.param(
            {"controllers": [{"name": "x", "groups": ["a"], "heartbeat_selector": '{__name__="up"}'}]},
            f"config: controllers[0].heartbeat_selector: {SELECTOR}; got '{{__name__=\"up\"}}'",
            id="heartbeat-selector-choosing-metric-names",
        ),
        pytest.param(
            {"listen_address": ":8080"},
            f"config: listen_address: unknown setting; known: {TOP_LEVEL}",
            id="unknown-setting",
        ),
        pytest.param(
            {"log_level": "loud", "log_format": "xml"},
            "config: log_level: Input should be 'debug', 'info', 'warning' or 'error' (got 'loud')\n"
            "config: log_format: Input should be 'json' or 'text' (got 'xml')",
            id="one-line-per-bad-setting",
        ),
    ],
)
def test_every_invalid_setting_exits_2_with_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], message: str
) -> None:
    code = main(["config", "show", "--config", str(write_config(tmp_path, config))])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (2, "", message + "\n")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda d: d / "missing.yaml", "config: {path}: no such file or directory", id="missing-file"
        ),
        pytest.param(
            lambda d: d, "config: {path}: is a directory, not a regular file; not read", id="directory"
        ),
        pytest.param(
            lambda d: _file(d, "thresholds: [unclosed\n"),
            "config: {path}: not valid YAML: line 2, column 1: did not find expected ',' or ']'",
            id="not-yaml",
        ),
        pytest.param(
            lambda d: _file(d, "- listen: ':8080'\n"),
            "config: {path}: expected a mapping of settings, got list",
            id="not-a-mapping",
        ),
        pytest.param(
            lambda d: _file(d, "# " + "x" * (1024 * 1024)),
            "config: {path}: file is 1048578 bytes, larger than the 1 MiB limit",
            id="too-big",
        ),
    ],
)
def test_an_unusable_config_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    path = make(tmp_path)
    code = main(["config", "show", "--config", str(path)])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (2, "", message.format(path=path) + "\n")


def _file(directory: Path, text: str) -> Path:
    path = directory / "stalewatch.yaml"
    path.write_text(text)
    return path


def test_an_environment_variable_that_is_not_json_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STALEWATCH_CONTROLLERS", "[{name: crossplane")
    code = main(["config", "show"])
    assert (code, capsys.readouterr().err) == (
        2,
        "config: controllers: STALEWATCH_CONTROLLERS is not valid JSON\n",
    )


def test_an_invalid_environment_value_is_named_like_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STALEWATCH_THRESHOLDS__REVISION_SKEW", "later")
    code = main(["config", "show"])
    assert (code, capsys.readouterr().err) == (
        2,
        f"config: thresholds.revision_skew: {DURATION}; got 'later'\n",
    )


def test_a_broken_namespace_list_in_the_environment_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STALEWATCH_INCLUDE_NAMESPACES", "[flux-system, apps")
    code = main(["config", "show"])
    assert (code, capsys.readouterr().err) == (
        2,
        "config: include_namespaces: not a valid list: line 1, column 19: "
        "expected ',' or ']', but got '<stream end>'\n",
    )


def test_a_malformed_set_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["config", "show", "--set", "log_level"])
    assert (code, capsys.readouterr().err) == (
        2,
        "config: --set 'log_level': expected KEY=VALUE, e.g. log_level=debug\n",
    )


def test_config_show_prints_the_effective_configuration_as_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--set", "thresholds.revision_skew=90s"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["thresholds"]["revision_skew"] == "1m30s"
    assert shown["thresholds"]["stuck_reconciling_min"] == "10m"
    assert shown["severities"] == {str(t): str(s) for t, s in DEFAULT_SEVERITIES.items()}
    assert [c["name"] for c in shown["controllers"]] == [c.name for c in DEFAULT_CONTROLLERS]
    assert (shown["listen"], shown["log_level"], shown["log_format"], shown["otel_exporter"]) == (
        ":8080",
        "info",
        "json",
        "none",
    )


def test_config_show_output_fed_back_as_the_config_file_reproduces_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(
        [
            "config",
            "show",
            "--set",
            "thresholds.retry_loop=1h30m",
            "--set",
            "controllers=[{name: tofu-controller, namespace: tofu, groups: [infra.contrib.fluxcd.io]}]",
            "--set",
            "exclude_namespaces=kube-system,kube-public",
        ]
    )
    first = capsys.readouterr().out
    saved = tmp_path / "effective.yaml"
    saved.write_text(first)
    assert main(["config", "show", "--config", str(saved)]) == 0
    assert capsys.readouterr().out == first


def test_config_show_applies_flag_over_env_over_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = write_config(tmp_path, {"log_level": "debug", "log_format": "json", "listen": ":9000"})
    monkeypatch.setenv("STALEWATCH_LOG_LEVEL", "warning")
    monkeypatch.setenv("STALEWATCH_LOG_FORMAT", "text")
    main(["config", "show", "--config", str(config_file), "--set", "log_level=error"])
    shown = yaml.safe_load(capsys.readouterr().out)
    assert (shown["log_level"], shown["log_format"], shown["listen"]) == ("error", "text", ":9000")
