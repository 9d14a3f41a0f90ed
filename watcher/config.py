"""stalewatch's settings: one typed object built from flags, environment, a YAML file and defaults.

Precedence, highest first:

1. command-line flags (`--set KEY=VALUE`, and any flag a subcommand maps onto a setting);
2. environment variables: `STALEWATCH_<SETTING>`, nested settings joined with `__`
   (`STALEWATCH_THRESHOLDS__REVISION_SKEW=5m`); lists and mappings as JSON
   (`STALEWATCH_CONTROLLERS='[{"name": "my-operator", "groups": ["example.com"]}]'`),
   namespace lists also comma-separated (`STALEWATCH_INCLUDE_NAMESPACES=flux-system,apps`);
3. the YAML file given with `--config FILE`;
4. the defaults below (thresholds and severities default to the model's own defaults).

Nested settings merge key by key across layers: an environment variable for one threshold does
not reset the thresholds set in the file. A bad value anywhere is a `ConfigError` whose message
names the setting and what it accepts, one line per bad setting, because an on-call engineer
reading a start-up failure needs the fix, not a pydantic traceback.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from watcher.config_input import ConfigError as ConfigError  # callers catch it from watcher.config
from watcher.config_input import format_validation_error, read_config_file, settings_error_message, shown
from watcher.inputs import yaml_problem
from watcher.model.ingest.objects import duration_seconds, format_duration
from watcher.model.types import (
    DEFAULT_CONTROLLERS,
    DEFAULT_SEVERITIES,
    ControllerSpec,
    FindingType,
    ModelConfig,
    Severity,
    Thresholds,
)
from watcher.telemetry import Scope

ENV_PREFIX = "STALEWATCH_"
TOOLING_VARIABLES = frozenset(
    {
        "STALEWATCH_CACHE",
        "STALEWATCH_CONTROLPLANE_BIN",
        "STALEWATCH_KEEP_CONTROLPLANE",
        "STALEWATCH_KEEP_LAB",
        "STALEWATCH_LAB_BIN",
        "STALEWATCH_UPDATE_GOLDEN",
    }
)
"""The project's test and bench tooling's own STALEWATCH_* variables: not settings, yet no typo
either, so never warned about (tests/cli checks that the tooling uses no other)."""
MAX_DURATION = timedelta(microseconds=(2**63 - 1) // 1000)
"""Go's time.Duration is int64 nanoseconds: Flux accepts no interval longer, nor does stalewatch."""
MAX_FACTOR = 1000.0
"""A Reconciling=True that outlasts a thousand intervals is stuck by any measure."""
MAX_COUNT = 10_000
"""A denial seen ten thousand times recurs by any measure."""
MAX_NAMESPACES = 100
"""Namespace mode keeps a list + watch per kind per namespace (some 30 each): past this many
namespaces, cluster mode's one per kind is the sane choice."""

_DURATION_HINT = "expected a duration such as 90s, 10m or 1h30m (units h, m, s, ms), or a number of seconds"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_KIND = re.compile(
    r"(?P<kind>[A-Z][A-Za-z0-9]{0,62})\.(?P<group>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+)"
)
_BUILT_IN_GROUP = ".k8s.io"
_ANY_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A kind of any group: Kind.group, or a core kind bare (Service)."""
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"([^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"\{{{_MATCHER}(,{_MATCHER})*,?\s*\}}")
"""A PromQL series selector of label matchers only (`{job="flux-system/kustomize-controller"}`),
double-quoted values; the metric names are the heartbeat reader's to choose."""
_LISTEN = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]\s]*):(?P<port>\d{1,5})")


def setting_duration(value: object) -> timedelta:
    """A setting's duration: Go's spelling, as Flux writes its intervals ("90s", "10m", "1h30m",
    read by the model's duration_seconds), or plain seconds; at most Go's longest (MAX_DURATION),
    so every threshold fits any time the model compares."""
    number = float(value) if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value) else value
    seconds: float | None = None
    if isinstance(number, timedelta):
        seconds = number.total_seconds()
    elif isinstance(number, int | float) and not isinstance(number, bool):
        seconds = float(number) if isinstance(number, float) or abs(number) < 2**64 else math.inf
    elif isinstance(value, str):
        seconds = duration_seconds(value.strip())
    if seconds is None:
        raise ValueError(f"{_DURATION_HINT}; got {shown(value)}")
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{_DURATION_HINT}, not negative; got {shown(value)}")
    if seconds > MAX_DURATION.total_seconds():
        longest = format_duration(timedelta(seconds=MAX_DURATION // timedelta(seconds=1)))
        raise ValueError(f"at most {longest}, the longest Go duration; got {shown(value)}")
    return timedelta(seconds=seconds)


Duration = Annotated[timedelta, BeforeValidator(setting_duration), PlainSerializer(format_duration)]


def _split_list(value: object) -> object:
    """Namespace lists: a YAML/JSON list, or a comma-separated string (handy in env and --set)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as error:
                raise ValueError(f"not a valid list: {yaml_problem(error)}") from None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def _check_namespaces(names: list[str]) -> list[str]:
    for name in names:
        if not _NAMESPACE.fullmatch(name):
            raise ValueError(f"{name!r} is not a namespace name (lowercase letters, digits and '-', 1-63)")
    return names


def _check_kinds(names: list[str]) -> list[str]:
    for name in names:
        match = _KIND.fullmatch(name)
        if match is None or len(match["group"]) > 253:
            raise ValueError(f"{name!r} is not a custom kind: expected Kind.group, e.g. Widget.example.com")
        if match["group"].endswith(_BUILT_IN_GROUP):
            raise ValueError(f"{name!r} is a built-in kind: only custom kinds (served by a CRD) can be added")
    return names


Namespaces = Annotated[list[str], NoDecode, BeforeValidator(_split_list)]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["json", "text"]
OtelExporter = Literal["none", "console", "otlp"]


class _ThresholdSettingsBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_thresholds(self) -> Thresholds:
        return Thresholds(**{name: getattr(self, name) for name in type(self).model_fields})


def _threshold_field(annotation: Any, default: Any) -> tuple[Any, Any]:
    """Durations as Duration; factors positive, finite and at most MAX_FACTOR; counts from 2 (one
    occurrence recurs by no measure) to MAX_COUNT."""
    if annotation is timedelta:
        return Duration, default
    if annotation is int:
        return int, Field(default=default, ge=2, le=MAX_COUNT)
    if annotation is float:
        return float, Field(default=default, gt=0, le=MAX_FACTOR, allow_inf_nan=False)
    return annotation, default


_THRESHOLD_FIELDS: dict[str, Any] = {
    f.name: _threshold_field(get_type_hints(Thresholds)[f.name], f.default)
    for f in dataclasses.fields(Thresholds)
}
ThresholdSettings = create_model(
    "ThresholdSettings",
    __base__=_ThresholdSettingsBase,
    __doc__="Every field of the model's Thresholds, generated from it so none is ever missed.",
    **_THRESHOLD_FIELDS,
)
if TYPE_CHECKING:
    _Thresholds = _ThresholdSettingsBase
else:
    _Thresholds = ThresholdSettings


class ControllerSetting(BaseModel):
    """One extra controller workload; mirrors the model's ControllerSpec."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    namespace: str | None = None
    selector: dict[str, str] | None = None
    groups: list[str] = Field(min_length=1)
    kinds: list[str] = []
    lease: str | None = None
    lease_namespace: str | None = None
    metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    heartbeat_selector: str | None = Field(default=None, max_length=4096)
    """With heartbeat_prometheus: the series of this controller, instead of its Pods' by name."""

    @field_validator("heartbeat_selector")
    @classmethod
    def _heartbeat_selector(cls, value: str | None) -> str | None:
        if value is not None and (not _SELECTOR.fullmatch(value) or "__name__" in value):
            raise ValueError(
                "expected label matchers in braces, values double-quoted and no __name__, such as "
                f'{{job="flux-system/kustomize-controller"}}; got {shown(value)}'
            )
        return value

    def to_spec(self) -> ControllerSpec:
        return ControllerSpec(
            name=self.name,
            groups=tuple(self.groups),
            kinds=tuple(self.kinds),
            namespace=self.namespace,
            selector=dict(self.selector) if self.selector is not None else None,
            lease=self.lease,
            lease_namespace=self.lease_namespace,
            metrics_port=self.metrics_port,
        )


class Settings(BaseSettings):
    """Everything stalewatch can be told; see the module docstring for where values come from."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    thresholds: _Thresholds = Field(default_factory=ThresholdSettings)
    severities: dict[FindingType, Severity] = dict(DEFAULT_SEVERITIES)
    include_namespaces: Namespaces = []
    exclude_namespaces: Namespaces = []
    namespaces: Namespaces = []
    """Namespace-scoped mode (tenants): list and watch namespaced kinds in these namespaces only,
    one list + watch per namespace (`/apis/G/V/namespaces/NS/...`), so a Role per namespace
    suffices. Empty: cluster mode, one cluster-wide list + watch per kind, narrowed by
    include_namespaces/exclude_namespaces (which namespace mode replaces)."""
    controllers: list[ControllerSetting] = []
    conflict_watch_kinds: Namespaces = []
    """Custom kinds (Kind.group) watched for ConflictingWriters besides the kinds stalewatch
    watches anyway (those a configured controller reconciles), e.g. a shared CR two teams write."""
    watch_kinds: Namespaces = []
    """Kinds (Kind.group; a core kind bare) watched and judged although no inventory lists them:
    what HelmReleases install (Helm keeps its manifest in Secrets, which stalewatch never reads)."""
    listed_kinds_limit: int = Field(default=50, ge=0, le=1000)
    """How many kinds at most are watched because an inventory lists them (one watch each)."""
    listen: str = ":8080"
    kubeconfig: str | None = None
    context: str | None = None
    log_level: LogLevel = "info"
    log_format: LogFormat = "json"  # what `run` writes: one object per line for log pipelines
    otel_exporter: OtelExporter = "none"
    timeline_entries: int = Field(default=2000, ge=100, le=100_000)
    """How many changes `run` keeps for /api/v1/timeline and the page (oldest dropped first)."""
    heartbeat_interval: Duration = timedelta(seconds=30)
    """How often `run` reads each tracked controller's /metrics (kube/heartbeats.py); 0s: never,
    and no heartbeat is judged (the page says nothing of one)."""
    heartbeat_timeout: Duration = timedelta(seconds=10)
    """How long one read of a controller's /metrics may take before it is unknown."""
    heartbeat_concurrency: int = Field(default=4, ge=1, le=64)
    """How many controllers' /metrics are read at once."""
    heartbeat_prometheus: str | None = None
    """A Prometheus-compatible query API's base URL (`run --prometheus`): heartbeats are read
    through it (kube/heartbeat_prometheus.py) instead of from the controllers' Pods."""
    heartbeat_prometheus_bearer_token_file: Path | None = None
    heartbeat_prometheus_basic_auth_user: str | None = None
    heartbeat_prometheus_basic_auth_password_file: Path | None = None
    heartbeat_prometheus_ca_file: Path | None = None
    """Its credentials, as `stalewatch fleet` takes them (files read on every query; app.py)."""

    @field_validator("heartbeat_prometheus")
    @classmethod
    def _heartbeat_prometheus(cls, value: str | None) -> str | None:
        parts = urlsplit(value or "")
        if value is not None and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise ValueError(f"expected an http:// or https:// URL; got {shown(value)}")
        if "@" in parts.netloc:
            raise ValueError("no credentials in the URL (it is logged): heartbeat_prometheus_basic_auth_user")
        return value

    def heartbeat_selectors(self) -> dict[str, str]:
        """Per controller name, its heartbeat_selector (a configured entry replaces a built-in)."""
        return {c.name: c.heartbeat_selector for c in self.controllers if c.heartbeat_selector}

    @field_validator("heartbeat_interval")
    @classmethod
    def _heartbeat_interval(cls, value: timedelta, info: ValidationInfo) -> timedelta:
        """A heartbeat whose last read is older than stale_after is unknown: reads further apart
        would make every heartbeat unknown between two of them."""
        thresholds = info.data.get("thresholds")
        stale_after = thresholds.to_thresholds().heartbeat_stale_after if thresholds else None
        if value and stale_after is not None and value >= stale_after:
            limit = format_duration(stale_after)
            raise ValueError(
                f"must be shorter than thresholds.heartbeat_stale_after ({limit}), or 0s (never read)"
            )
        return value

    @field_validator("heartbeat_timeout")
    @classmethod
    def _heartbeat_timeout(cls, value: timedelta, info: ValidationInfo) -> timedelta:
        """One read per controller per interval: a read may not outlast the interval."""
        interval = info.data.get("heartbeat_interval")
        if not value or (interval and value >= interval):
            raise ValueError("must be longer than 0s and shorter than heartbeat_interval")
        return value

    @field_validator("severities", mode="before")
    @classmethod
    def _severity_overrides(cls, value: object) -> object:
        """Overrides merge over the model's defaults; finding types match case-insensitively
        because environment variable names arrive lower-cased."""
        if not isinstance(value, Mapping):
            return value
        by_name = {str(t).lower(): t for t in FindingType}
        merged: dict[FindingType, object] = dict(DEFAULT_SEVERITIES)
        for key, severity in value.items():
            finding_type = by_name.get(str(key).lower())
            if finding_type is None:
                raise ValueError(f"unknown finding type {key!r}; known: {', '.join(FindingType)}")
            merged[finding_type] = severity.lower() if isinstance(severity, str) else severity
        return merged

    @field_validator("include_namespaces", "exclude_namespaces")
    @classmethod
    def _namespace_names(cls, value: list[str]) -> list[str]:
        return _check_namespaces(value)

    @field_validator("namespaces")
    @classmethod
    def _scope(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Namespace mode watches only these: the cluster mode's filters would only contradict
        it (an include outside them cannot be read, an exclude among them is a typo of one)."""
        _check_namespaces(value)
        if len(set(value)) > MAX_NAMESPACES:
            raise ValueError(
                f"at most {MAX_NAMESPACES} namespaces (each costs a watch per kind); got {len(set(value))}: "
                "watch more with cluster mode and include_namespaces"
            )
        if value and (info.data.get("include_namespaces") or info.data.get("exclude_namespaces")):
            raise ValueError(
                "namespaces replaces include_namespaces and exclude_namespaces: "
                "list only the namespaces to watch"
            )
        return list(dict.fromkeys(value))

    @field_validator("watch_kinds")
    @classmethod
    def _watch_kinds(cls, value: list[str]) -> list[str]:
        """Custom or built-in kinds (a core kind bare: `Service`); one stalewatch cannot watch is
        named in a warning at start (kube/cluster.py), like a kind no CRD serves."""
        for name in value:
            if _ANY_KIND.fullmatch(name) is None:
                raise ValueError(
                    f"{name!r} is not a kind: expected Kind.group (Job.batch) or a core Kind (Service)"
                )
        return value

    @field_validator("conflict_watch_kinds")
    @classmethod
    def _kind_names(cls, value: list[str]) -> list[str]:
        return _check_kinds(value)

    def watched_kinds(self) -> tuple[tuple[str, str], ...]:
        """(group, kind) of each conflict_watch_kinds and watch_kinds entry."""
        names = [*self.conflict_watch_kinds, *self.watch_kinds]
        return tuple((group, kind) for kind, _, group in (name.partition(".") for name in names))

    @field_validator("log_level", "log_format", "otel_exporter", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("listen")
    @classmethod
    def _listen_address(cls, value: str) -> str:
        match = _LISTEN.fullmatch(value)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise ValueError(
                f"expected [HOST]:PORT such as ':8080', '127.0.0.1:9090' or '[::1]:8080'; got {value!r}"
            )
        return value

    def scope(self) -> Scope:
        """Where the watcher looks, as its outputs say it (telemetry.Scope)."""
        return Scope(tuple(self.namespaces), tuple(self.include_namespaces), tuple(self.exclude_namespaces))

    def watches_namespace(self, namespace: str) -> bool:
        """Cluster-scoped objects (namespace "") are always in; otherwise namespaces (namespace
        mode), else include, then exclude."""
        if not namespace:
            return True
        if self.namespaces:
            return namespace in self.namespaces
        if self.include_namespaces and namespace not in self.include_namespaces:
            return False
        return namespace not in self.exclude_namespaces


def unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """A warning for every STALEWATCH_* variable that names no setting: pydantic-settings would
    ignore `STALEWATCH_LOG_LEVLE=debug` without a word, and the typo would cost an incident."""
    known = {name.upper() for name in Settings.model_fields}
    return [
        f"warning: environment variable {name} is not a setting and is ignored; "
        f"settings: {', '.join(ENV_PREFIX + k for k in sorted(known))}"
        for name in sorted(environ)
        if name.upper().startswith(ENV_PREFIX)
        and name[len(ENV_PREFIX) :].upper().split("__")[0] not in known
        and name.upper() not in TOOLING_VARIABLES
    ]


def effective_controllers(settings: Settings) -> tuple[ControllerSpec, ...]:
    """The built-in controllers plus the configured ones; a configured controller with a built-in
    name replaces it (e.g. to pin tofu-controller's namespace or lease), so the result is stable
    when fed back in."""
    extra = {c.name: c.to_spec() for c in settings.controllers}
    built_in = tuple(extra.pop(spec.name, spec) for spec in DEFAULT_CONTROLLERS)
    return built_in + tuple(extra.values())


def build_model_config(settings: Settings) -> ModelConfig:
    return ModelConfig(
        thresholds=settings.thresholds.to_thresholds(),
        severities=dict(settings.severities),
        controllers=effective_controllers(settings),
        namespaces=tuple(settings.namespaces),
    )


def effective_config(settings: Settings) -> dict[str, Any]:
    """What `stalewatch config show` prints: plain data that, saved as a file, reproduces itself."""
    data = settings.model_dump(mode="json")
    selectors = settings.heartbeat_selectors()
    data["controllers"] = [
        {
            key: value
            for key, value in {**_spec_dict(spec), "heartbeat_selector": selectors.get(spec.name)}.items()
            if value not in (None, [])
        }
        for spec in effective_controllers(settings)
    ]
    return data


def _spec_dict(spec: ControllerSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "namespace": spec.namespace,
        "selector": dict(spec.selector) if spec.selector is not None else None,
        "groups": list(spec.groups),
        "kinds": list(spec.kinds),
        "lease": spec.lease,
        "lease_namespace": spec.lease_namespace,
        "metrics_port": spec.metrics_port,
    }


def load_settings(
    *, config_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Flags (`overrides`, nested dicts) over environment over `config_file` over defaults."""
    file_values = read_config_file(Path(config_file)) if config_file is not None else {}

    class _Layered(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=file_values)

    try:
        return _Layered(**dict(overrides or {}))
    except ValidationError as error:
        raise ConfigError(*format_validation_error(error, settings=Settings)) from None
    except SettingsError as error:
        raise ConfigError(f"config: {settings_error_message(error)}") from None


def parse_set_options(assignments: Sequence[str]) -> dict[str, Any]:
    """`--set thresholds.revision_skew=5m` options as nested overrides. Values stay strings (the
    settings parse them) except `[...]`/`{...}`, read as YAML flow collections for list settings."""
    overrides: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
            raise ConfigError(f"config: --set {assignment!r}: expected KEY=VALUE, e.g. log_level=debug")
        value: Any = raw
        if raw.strip()[:1] in ("[", "{"):
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError as error:
                raise ConfigError(f"config: --set {key}: not valid YAML: {yaml_problem(error)}") from None
        *parents, leaf = key.strip().split(".")
        node = overrides
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"config: --set {key}: {part} is set to a value, not a group of settings")
            node = child
        node[leaf] = value
    return overrides
