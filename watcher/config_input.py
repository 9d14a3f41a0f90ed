"""What the user wrote for stalewatch's settings, read safely, and every problem in it phrased
for an on-call engineer: one `config: <where>: <what is wrong>` line per problem.

The YAML file is read with the snapshot loader's limits (watcher.inputs); pydantic's and
pydantic-settings' errors become ConfigError lines naming the setting and what it accepts, never
a traceback. watcher.config layers the file, the environment and the flags into Settings, and is
where callers import ConfigError from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_settings import SettingsError

from watcher.inputs import InputError, Refused, read_path, shape_problem, yaml_documents

MAX_CONFIG_FILE_BYTES = 1024 * 1024
MAX_CONFIG_DEPTH = 20


class ConfigError(Exception):
    """A user mistake in configuration: one line per problem (`lines`); str() joins them."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def shown(value: object) -> str:
    """A user's value quoted in an error message: repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def read_config_file(path: Path) -> dict[str, Any]:
    """The YAML config file as a mapping; every way it can be unusable is one ConfigError line.
    It is read with the snapshot loader's limits (watcher.inputs): a byte cap, the YAML alias
    budget and depth limit, and a key set twice is an error rather than a silent choice."""
    try:
        data = read_path(path, limit=MAX_CONFIG_FILE_BYTES, regular_only=False)
        documents, syntax_error = yaml_documents(data)
        if syntax_error:
            raise InputError(syntax_error)
        documents = [document for document in documents if document is not None]
        if len(documents) > 1:
            raise InputError(f"holds {len(documents)} YAML documents, expected one mapping of settings")
        document = documents[0] if documents else {}
        if isinstance(document, Refused):
            raise InputError(document.problem)
        problem = shape_problem(document, budget=[len(data) + 16], max_depth=MAX_CONFIG_DEPTH)
        if problem:
            raise InputError(problem)
    except InputError as error:
        raise ConfigError(f"config: {path}: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"config: {path}: expected a mapping of settings, got {type(document).__name__}")
    _refuse_case_twins(document, where=f"config: {path}: ")
    return document


def _refuse_case_twins(document: dict[str, Any], *, where: str) -> None:
    """Settings and finding types match case-insensitively, so `ControllerDown: critical` and
    `controllerdown: info` in one file are one setting given twice: which one is meant?"""
    groups = [("", document)]
    severities = document.get("severities")
    if isinstance(severities, dict):
        groups.append(("severities.", severities))
    problems = []
    for prefix, mapping in groups:
        first: dict[str, str] = {}
        for key in map(str, mapping):
            twin = first.setdefault(key.lower(), key)
            if twin != key:
                problems.append(f"{where}{prefix}{key}: set twice (also as {twin!r}); keep one")
    if problems:
        raise ConfigError(*problems)


def format_validation_error(error: ValidationError, *, settings: type[BaseModel]) -> list[str]:
    """One `config: <setting>: <what is wrong>` line per bad setting of the `settings` model."""
    lines = []
    for detail in error.errors(include_url=False):
        loc = detail["loc"]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "config"
        if detail["type"] == "extra_forbidden":
            known = _known_settings(loc, settings)
            message = "unknown setting" + (f"; known: {', '.join(known)}" if known else "")
        else:
            message = str(detail["msg"]).removeprefix("Value error, ").replace("Field required", "required")
            if detail["type"] not in ("value_error", "missing"):
                message += f" (got {shown(detail['input'])})"
        lines.append(f"config: {where}: {message}")
    return lines


def _known_settings(loc: tuple[int | str, ...], settings: type[BaseModel]) -> list[str]:
    """The setting names valid next to an unknown key, found by walking the settings models."""
    model = settings
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        nested = [a for a in (field.annotation, *get_args(field.annotation)) if _is_model(a)] if field else []
        if not nested:
            return []
        model = nested[0]
    return list(model.model_fields)


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def settings_error_message(error: SettingsError) -> str:
    """pydantic-settings says 'error parsing value for field "x" from source "EnvSettingsSource"'."""
    match = re.search(r'field "([^"]+)"', str(error))
    return f"{match[1]}: STALEWATCH_{match[1].upper()} is not valid JSON" if match else str(error)
