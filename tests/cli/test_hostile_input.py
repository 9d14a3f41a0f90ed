"""What a hostile cluster, snapshot, config or shell can hand `stalewatch`: every case is answered
with the documented lines on stderr, the right exit code and never a traceback; what the cluster
wrote reaches the terminal escaped. Process-level cases (closed stdin, /dev/zero, a FIFO, files
another user cannot read) run as a separate process: the installed `stalewatch`, or a child
that drops to user nobody."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from watcher.cli import main
from watcher.config import TOOLING_VARIABLES, unknown_environment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = "2026-11-30T12:00:00Z"
STALEWATCH = str(Path(sys.executable).with_name("stalewatch"))
CONTROL = "\x00\x07\x08\x0b\x0c\r\x1b\x7f\x85\x9b\u2028\u2029"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("STALEWATCH_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("NO_COLOR", raising=False)


def stalewatch(*args: str, stdin: Any = subprocess.DEVNULL) -> tuple[int, str, str]:
    """The installed command as its own process: (exit code, stdout, stderr)."""
    command = [STALEWATCH, *args]
    environment = {k: v for k, v in os.environ.items() if not k.upper().startswith("STALEWATCH_")}
    result = subprocess.run(
        command, stdin=stdin, capture_output=True, text=True, timeout=60, check=False, env=environment
    )
    return result.returncode, result.stdout, result.stderr


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


NOBODY = 65534


def as_nobody(*args: str) -> tuple[int, str, str]:
    """The CLI run as user nobody, in a forked child: (exit code, stdout, stderr).

    The suite runs as root, which reads everything. The child drops to nobody and calls `main`
    already imported, rather than exec'ing the venv's script, which nobody may not be able to
    reach (a clone under a 0700 directory such as mktemp's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            code = 70
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - flushed below, fd kept
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                code = main(list(args))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()


def assert_no_traceback(*streams: str) -> None:
    for stream in streams:
        assert "Traceback" not in stream
        assert "internal error" not in stream


def kustomization(name: str = "apps", **condition: str) -> dict[str, Any]:
    conditions = [
        {"type": "Ready", "status": "False", "reason": "Failed", "message": "failed",
         "lastTransitionTime": "2026-11-30T10:00:00Z"},
        {"type": "Stalled", "status": "True", "reason": "Failed", "message": "failed",
         "lastTransitionTime": "2026-11-30T10:00:00Z"},
    ]  # fmt: skip
    for entry in conditions:
        entry.update(condition)
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"observedGeneration": 1, "conditions": conditions},
    }


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, allow_unicode=True))
    return path


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory user nobody may enter (pytest's tmp_path is root's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="stalewatch-hostile-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


# --- the terminal shows what the cluster wrote, escaped --------------------------------------


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        pytest.param(CONTROL, r"\x00\x07\x08\x0b\x0c\r\x1b\x7f\x85\x9b\u2028\u2029", id="c0-c1-controls"),
        pytest.param(BIDI, "".join(f"\\u{ord(c):04x}" for c in BIDI), id="bidi-controls"),
        pytest.param("\x1b]0;pwned\x07\x1b[2J", r"\x1b]0;pwned\x07\x1b[2J", id="retitle-and-clear"),
    ],
)
def test_control_characters_in_a_condition_reach_the_report_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, escaped: str
) -> None:
    snapshot = write(tmp_path / "k.yaml", kustomization(reason=f"Bad{text}", message=f"said {text} end"))
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    assert (code, err) == (0, "")
    assert f"Bad{escaped}: said {escaped} end" in out
    assert not set(out) & set(CONTROL + BIDI)


def test_a_newline_in_a_message_cannot_forge_a_report_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = "ok\nCRITICAL ControllerDown: Deployment flux-system/fake\n\n0 root causes\r\nWARNING x"
    snapshot = write(tmp_path / "k.yaml", kustomization(message=forged))
    code, out, _ = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    unindented = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert unindented == [
        "WARNING Stalled: Kustomization flux-system/apps",
        "1 root cause (1 warning), 0 symptoms; 1 object evaluated.",
    ]
    assert "        CRITICAL ControllerDown: Deployment flux-system/fake" in out.splitlines()
    assert code == 0


def test_a_newline_in_an_object_name_stays_on_its_header_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = write(tmp_path / "k.json", orjson.dumps(kustomization(name="a\nCRITICAL b")).decode())
    _, out, _ = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    assert out.splitlines()[0] == r"WARNING Stalled: Kustomization flux-system/a\nCRITICAL b"


def test_an_object_named_in_a_load_error_is_escaped_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = kustomization(name="x\x1b[2J\nCRITICAL y")
    bad["status"]["conditions"] = "Ready"
    snapshot = write(tmp_path / "k.json", orjson.dumps(bad).decode())
    code, _, err = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    assert code == 2
    assert err == (
        rf"stalewatch: {snapshot}: Kustomization flux-system/x\x1b[2J\nCRITICAL y: "
        "status.conditions is not a list\n"
    )


def test_a_file_name_in_a_load_error_is_escaped_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "snap" / "\x1b]0;owned\x07.yaml", "kind: [unclosed\n")
    write(tmp_path / "snap" / "good.yaml", kustomization())
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(tmp_path / "snap"))
    assert code == 2
    assert err == (
        rf"stalewatch: {tmp_path}/snap/\x1b]0;owned\x07.yaml: not valid YAML: line 2, column 1: "
        "did not find expected ',' or ']'\n"
    )
    assert out.startswith("WARNING Stalled: Kustomization flux-system/apps\n")


def test_a_config_key_with_escapes_is_escaped_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "c.yaml", 'thresholds:\n  "skew\\e[2J\\nconfig: ok": 5m\n')
    code, out, err = in_process(capsys, "config", "show", "--config", str(config))
    assert (code, out) == (2, "")
    assert err.startswith(r"config: thresholds.skew\x1b[2J\nconfig: ok: unknown setting; known: ")
    assert err.count("\n") == 1


def test_a_usage_error_is_one_printable_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = in_process(capsys, "analyze", "-o", "\x1b[2Jtext", "snap/")
    assert (code, out) == (2, "")
    assert err == (
        "stalewatch analyze: error: argument -o/--output: invalid choice: '\\x1b[2Jtext' "
        "(choose from 'text', 'json') (see stalewatch analyze --help)\n"
    )


def test_the_text_log_format_escapes_what_it_is_given() -> None:
    import logging

    from watcher.logs import TextFormatter, fields

    record = logging.LogRecord("stalewatch.kube", logging.WARNING, __file__, 1, "kind \x1b[2Jgone", (), None)
    record.__dict__.update(fields(kind="Kust\u202eomization", message="a\nCRITICAL b"))
    line = TextFormatter().format(record)
    assert line.endswith(r'WARNING kind \x1b[2Jgone kind=Kust\u202eomization message="a\nCRITICAL b"')
    assert "\n" not in line


# --- flags and settings out of range ----------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        pytest.param(
            "thresholds.revision_skew=9999999999999h",
            "config: thresholds.revision_skew: at most 2562047h47m16s, the longest Go duration; "
            "got '9999999999999h'",
            id="duration-past-go-max",
        ),
        pytest.param(
            "thresholds.retry_loop=" + "9" * 400,
            "config: thresholds.retry_loop: at most 2562047h47m16s, the longest Go duration; "
            "got '" + "9" * 58 + "…",
            id="duration-of-400-digits",
        ),
        pytest.param(
            "thresholds.stuck_reconciling_interval_factor=1e300",
            "config: thresholds.stuck_reconciling_interval_factor: Input should be less than or equal "
            "to 1000 (got '1e300')",
            id="factor-1e300",
        ),
        pytest.param(
            "thresholds.stuck_reconciling_interval_factor=nan",
            "config: thresholds.stuck_reconciling_interval_factor: Input should be a finite number "
            "(got 'nan')",
            id="factor-nan",
        ),
        pytest.param(
            "thresholds.stuck_reconciling_interval_factor=inf",
            "config: thresholds.stuck_reconciling_interval_factor: Input should be a finite number "
            "(got 'inf')",
            id="factor-inf",
        ),
        pytest.param(
            "thresholds.stuck_reconciling_interval_factor=-3",
            "config: thresholds.stuck_reconciling_interval_factor: Input should be greater than 0 (got '-3')",
            id="factor-negative",
        ),
    ],
)
def test_a_setting_out_of_range_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], assignment: str, message: str
) -> None:
    example = str(EXAMPLES / "reconciling-left-true")
    code, out, err = in_process(capsys, "analyze", "--now", NOW, "--set", assignment, example)
    assert (code, out) == (2, "")
    assert err.splitlines() == [message]


@pytest.mark.parametrize(
    "now",
    [
        pytest.param("9999-12-31T23:59:59-14:00", id="past-year-9999-in-utc"),
        pytest.param("0001-01-01T00:00:00+14:00", id="before-year-1-in-utc"),
        pytest.param("9000-01-01T00:00:00Z", id="from-year-9000"),
        pytest.param("1969-12-31T23:59:59Z", id="before-1970"),
    ],
)
def test_now_out_of_range_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], now: str) -> None:
    code, out, err = in_process(capsys, "analyze", "--now", now, str(EXAMPLES / "healthy"))
    assert (code, out) == (2, "")
    assert err == (
        f"stalewatch analyze: error: argument --now: {now!r} is out of range: expected a time from "
        "1970-01-01T00:00:00Z up to 9000-01-01T00:00:00Z (see stalewatch analyze --help)\n"
    )


def test_the_latest_now_accepted_still_renders_every_report(capsys: pytest.CaptureFixture[str]) -> None:
    for output in ("text", "json"):
        code, _, err = in_process(
            capsys, "analyze", "-o", output, "--now", "8999-12-31T00:00:00-14:00", str(EXAMPLES / "healthy")
        )
        assert (code, err) == (1, "")  # nine thousand years without a renewed Lease: controllers down


def test_an_unknown_stalewatch_variable_is_a_warning_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STALEWATCH_LOG_LEVLE", "debug")
    monkeypatch.setenv("STALEWATCH_LOG_LEVEL", "warning")
    code, out, err = in_process(capsys, "config", "show")
    assert code == 0
    assert "log_level: warning" in out.splitlines()
    assert err.splitlines() == [
        "stalewatch: warning: environment variable STALEWATCH_LOG_LEVLE is not a setting and is ignored; "
        "settings: STALEWATCH_CONFLICT_WATCH_KINDS, STALEWATCH_CONTEXT, STALEWATCH_CONTROLLERS, "
        "STALEWATCH_EXCLUDE_NAMESPACES, STALEWATCH_HEARTBEAT_CONCURRENCY, STALEWATCH_HEARTBEAT_INTERVAL, "
        "STALEWATCH_HEARTBEAT_PROMETHEUS, STALEWATCH_HEARTBEAT_PROMETHEUS_BASIC_AUTH_PASSWORD_FILE, "
        "STALEWATCH_HEARTBEAT_PROMETHEUS_BASIC_AUTH_USER, STALEWATCH_HEARTBEAT_PROMETHEUS_BEARER_TOKEN_FILE, "
        "STALEWATCH_HEARTBEAT_PROMETHEUS_CA_FILE, "
        "STALEWATCH_HEARTBEAT_TIMEOUT, STALEWATCH_INCLUDE_NAMESPACES, STALEWATCH_KUBECONFIG, "
        "STALEWATCH_LISTED_KINDS_LIMIT, "
        "STALEWATCH_LISTEN, STALEWATCH_LOG_FORMAT, "
        "STALEWATCH_LOG_LEVEL, STALEWATCH_NAMESPACES, STALEWATCH_OTEL_EXPORTER, STALEWATCH_SEVERITIES, "
        "STALEWATCH_THRESHOLDS, "
        "STALEWATCH_TIMELINE_ENTRIES, STALEWATCH_WATCH_KINDS"
    ]


def test_the_tooling_variables_are_exactly_those_the_tooling_reads() -> None:
    root = Path(__file__).resolve().parents[2]
    used = {
        name
        for folder in ("tests", "bench", "scripts")
        for file in (root / folder).rglob("*")
        if file.suffix in (".py", ".sh") and file.is_file()
        for name in re.findall(r"STALEWATCH_[A-Z_]*[A-Z]", file.read_text())
    }
    not_settings = {name for name in used if unknown_environment({name: ""})} | TOOLING_VARIABLES
    assert not_settings - TOOLING_VARIABLES == {"STALEWATCH_LOG_LEVLE"}  # this file's typo, on purpose
    assert used >= TOOLING_VARIABLES


# --- the config file gets the snapshot loader's limits ---------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            ALIAS_BOMB,
            "expands to more values than the file has bytes (YAML aliases?); refusing it",
            id="alias-bomb",
        ),
        pytest.param(
            "severities:\n  ControllerDown: critical\n  controllerdown: info\n",
            "severities.controllerdown: set twice (also as 'ControllerDown'); keep one",
            id="case-twin-finding-types",
        ),
        pytest.param(
            "log_level: debug\nLOG_LEVEL: error\n",
            "LOG_LEVEL: set twice (also as 'log_level'); keep one",
            id="case-twin-settings",
        ),
        pytest.param(
            "log_level: debug\nlistern: ':80'\nlog_level: error\n",
            "not valid YAML: line 3, column 1: key 'log_level' is set twice",
            id="the-same-key-twice",
        ),
        pytest.param(
            "log_level: !!python/name:os.system debug\n",
            "not valid YAML: line 1, column 12: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/name:os.system'",
            id="unknown-tag",
        ),
        pytest.param(
            "log_level: debug\n---\nlog_level: info\n",
            "holds 2 YAML documents, expected one mapping of settings",
            id="two-documents",
        ),
        pytest.param(
            "controllers: " + "[" * 30 + "]" * 30 + "\n",
            "nested more than 20 levels deep; refusing it",
            id="nested-absurdly",
        ),
    ],
)
def test_a_hostile_config_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    config = write(tmp_path / "stalewatch.yaml", text)
    code, out, err = in_process(capsys, "config", "show", "--config", str(config))
    assert (code, out) == (2, "")
    assert err == f"config: {config}: {message}\n"


def test_config_from_dev_zero_stops_at_the_cap() -> None:
    code, out, err = stalewatch("config", "show", "--config", "/dev/zero")
    assert (code, out) == (2, "")
    assert err == "config: /dev/zero: input is larger than the 1 MiB limit\n"


# --- snapshots: bounded, never skipped in silence --------------------------------------------


def test_analyze_dev_zero_stops_at_the_cap() -> None:
    code, out, err = stalewatch("analyze", "--now", NOW, "/dev/zero")
    assert code == 2
    assert err == "stalewatch: /dev/zero: input is larger than the 256 MiB limit\n"
    assert_no_traceback(out, err)


def test_analyze_with_stdin_closed_says_so() -> None:
    process = subprocess.run(
        [STALEWATCH, "analyze", "--now", NOW, "-"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(0),  # `stalewatch analyze - <&-`
        env={k: v for k, v in os.environ.items() if not k.upper().startswith("STALEWATCH_")},
    )
    assert (process.returncode, process.stderr) == (2, "stalewatch: -: standard input is closed\n")


@pytest.mark.parametrize(
    "stdin",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\n  \n", id="blank"),
        pytest.param(b"---\n", id="no-document"),
    ],
)
def test_analyze_with_empty_stdin_is_exit_2(stdin: bytes) -> None:
    result = subprocess.run(
        [STALEWATCH, "analyze", "--now", NOW, "-"], input=stdin, capture_output=True, timeout=60, check=False
    )
    assert (result.returncode, result.stderr) == (2, b"stalewatch: -: is empty: no objects in it\n")


def test_an_empty_file_is_exit_2_and_the_rest_is_evaluated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = write(tmp_path / "empty.json", "")
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(empty), str(EXAMPLES / "healthy"))
    assert code == 2
    assert err == f"stalewatch: {empty}: is empty: no objects in it\n"
    assert out.startswith("No findings in the 28 objects evaluated.\n")


def test_a_directory_of_empty_lists_has_no_objects_and_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "snap" / "terraforms.yaml", kubectl_list())  # `kubectl get` of a kind with none
    write(tmp_path / "snap" / "helmreleases.json", orjson.dumps(kubectl_list()).decode())
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(tmp_path / "snap"))
    assert (code, out) == (
        2,
        "No objects were evaluated.\n1 load error (see stderr): what they name was not evaluated.\n",
    )
    assert err == f"stalewatch: {tmp_path}/snap: no objects in it; nothing was evaluated\n"


def test_a_fifo_in_a_snapshot_directory_is_reported_not_opened(shared_dir: Path) -> None:
    shutil.copy(EXAMPLES / "healthy" / "gitops.yaml", shared_dir / "gitops.yaml")
    os.mkfifo(shared_dir / "a.yaml")  # nobody ever writes to it: opening it to read would block
    code, out, err = stalewatch("analyze", "--now", NOW, str(shared_dir))
    assert code == 2
    assert err == f"stalewatch: {shared_dir}/a.yaml: is a FIFO, not a regular file; not read\n"
    assert out.startswith("No findings on 8 judged objects; 4 objects of 1 kind listed by Kustomizations")


def test_a_device_in_a_snapshot_directory_is_reported_not_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "snap" / "good.yaml", kustomization())
    (tmp_path / "snap" / "zero.yaml").symlink_to("/dev/zero")
    code, _, err = in_process(capsys, "analyze", "--now", NOW, str(tmp_path / "snap"))
    assert code == 2
    assert (
        err == f"stalewatch: {tmp_path}/snap/zero.yaml: is a character device, not a regular file; not read\n"
    )


def test_an_unreadable_subdirectory_is_reported_not_skipped(shared_dir: Path) -> None:
    shutil.copy(EXAMPLES / "healthy" / "gitops.yaml", shared_dir / "gitops.yaml")
    (shared_dir / "locked").mkdir(mode=0o700)
    write(shared_dir / "locked" / "stalled.yaml", kustomization())
    code, out, err = as_nobody("analyze", "--now", NOW, str(shared_dir))
    assert code == 2
    assert err == f"stalewatch: {shared_dir}/locked: cannot read directory: Permission denied\n"
    assert "all healthy" not in out


def test_an_unreadable_file_is_reported_not_skipped(shared_dir: Path) -> None:
    shutil.copy(EXAMPLES / "healthy" / "gitops.yaml", shared_dir / "gitops.yaml")
    write(shared_dir / "stalled.yaml", kustomization()).chmod(0o600)
    code, _, err = as_nobody("analyze", "--now", NOW, str(shared_dir))
    assert code == 2
    assert err == f"stalewatch: {shared_dir}/stalled.yaml: cannot read: Permission denied\n"


def test_a_dangling_symlink_in_a_snapshot_directory_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "snap" / "good.yaml", kustomization())
    (tmp_path / "snap" / "gone.yaml").symlink_to(tmp_path / "deleted.yaml")
    code, _, err = in_process(capsys, "analyze", "--now", NOW, str(tmp_path / "snap"))
    assert code == 2
    assert err == f"stalewatch: {tmp_path}/snap/gone.yaml: no such file or directory (a symlink to nothing)\n"


def test_a_symlinked_directory_is_read_once_even_in_a_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "snap" / "linked" / "k.yaml", kustomization())
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path / "elsewhere" / "other.yaml", kustomization("other"))
    (tmp_path / "snap" / "elsewhere").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "snap" / "linked" / "loop").symlink_to(tmp_path / "snap")
    code, out, err = in_process(capsys, "analyze", "--now", NOW, "-o", "json", str(tmp_path / "snap"))
    assert (code, err) == (0, "")
    assert orjson.loads(out)["summary"]["objects"] == 2


def test_one_item_nested_too_deep_loses_only_that_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep: Any = "bottom"
    for _ in range(120):
        deep = {"x": deep}
    odd = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": deep}
    snapshot = write(
        tmp_path / "k.json", orjson.dumps(kubectl_list(kustomization("a"), odd, kustomization("b"))).decode()
    )
    code, out, err = in_process(capsys, "analyze", "--now", NOW, "-o", "json", str(snapshot))
    assert code == 2
    assert err == f"stalewatch: {snapshot}: item 2: nested more than 100 levels deep; refusing it\n"
    assert orjson.loads(out)["summary"]["objects"] == 2


def test_an_unknown_tag_in_document_1_loses_only_document_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "kind: ConfigMap\nmetadata: {name: a}\ndata: !!python/object:os.system x\n---\n"
    snapshot = write(tmp_path / "k.yaml", text + yaml.safe_dump_all([kustomization("b"), kustomization("c")]))
    code, out, err = in_process(capsys, "analyze", "--now", NOW, "-o", "json", str(snapshot))
    assert code == 2
    assert err == (
        f"stalewatch: {snapshot}: document 1: not valid YAML: line 3, column 7: could not determine "
        "a constructor for the tag 'tag:yaml.org,2002:python/object:os.system'\n"
    )
    assert orjson.loads(out)["summary"]["objects"] == 2


def test_a_number_json_cannot_hold_loses_the_file_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = write(
        tmp_path / "k.json",
        orjson.dumps(kustomization()).decode().replace('"generation":1', '"generation":1e400'),
    )
    code, _, err = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    assert code == 2
    assert err.splitlines()[0].startswith(f"stalewatch: {snapshot}: not valid JSON: number is infinity")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param("generation: 100000000000000000000", "metadata.generation", id="generation-past-int64"),
        pytest.param("generation: 1e41", "metadata.generation", id="generation-1e41"),
    ],
)
def test_a_generation_past_int64_is_a_malformed_object_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, field: str
) -> None:
    raw = yaml.safe_dump(kustomization("odd")).replace("generation: 1", text, 1)
    snapshot = write(tmp_path / "k.yaml", raw + "---\n" + yaml.safe_dump(kustomization("fine")))
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(snapshot))
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"stalewatch: {snapshot}: document 1: Kustomization flux-system/odd: {field} ")
    assert "Kustomization flux-system/fine" in out
    assert_no_traceback(out, err)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        pytest.param("Deployment", ("spec", "replicas"), 10**20, id="replicas-past-int64"),
        pytest.param("ReplicaSet", ("status", "readyReplicas"), -(10**20), id="ready-replicas-below-int64"),
        pytest.param(
            "Lease", ("spec", "leaseDurationSeconds"), 9_000_000_000_000_000, id="lease-9e15-seconds"
        ),
    ],
)
def test_an_integer_out_of_range_inside_an_object_never_crashes_analyze(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, path: tuple[str, str], value: int
) -> None:
    snapshot = shutil.copytree(EXAMPLES / "tofu-controller-down", tmp_path / "snap")
    document = yaml.safe_load((snapshot / "flux-system.yaml").read_text())
    target = next(item for item in document["items"] if item["kind"] == kind)
    target.setdefault(path[0], {})[path[1]] = value
    (snapshot / "flux-system.yaml").write_text(yaml.safe_dump(document))
    for output in ("text", "json"):
        code, out, err = in_process(capsys, "analyze", "--now", NOW, "-o", output, str(snapshot))
        assert_no_traceback(out, err)
        assert code in (1, 2)  # the ControllerDown root is still found; never 3 (a crash)
        assert "ControllerDown" in out


def test_bad_input_wins_the_exit_code_but_the_critical_root_is_still_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(tmp_path / "broken.yaml", "kind: [unclosed\n")
    code, out, err = in_process(
        capsys, "analyze", "--now", NOW, "-o", "json", str(EXAMPLES / "tofu-controller-down"), str(broken)
    )
    summary = orjson.loads(out)["summary"]
    assert (code, summary["by_severity"]["critical"], summary["load_errors"]) == (2, 1, 1)
    assert err.count("\n") == 1


def test_an_internal_error_is_exit_3_in_one_line_never_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OverflowError("date value out of range")

    monkeypatch.setattr("watcher.cli._evaluate", broken)
    code, out, err = in_process(capsys, "analyze", "--now", NOW, str(EXAMPLES / "healthy"))
    assert (code, out) == (3, "")
    [line] = err.splitlines()
    assert line.startswith(
        "stalewatch: internal error, this is a stalewatch bug: OverflowError: date value out of range (at "
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ("--set", "thresholds.skew\x1b[2J=5m"),
            r"config: thresholds.skew\x1b[2J: unknown setting; known: ",
            id="config-error",
        ),
        pytest.param(
            ("--kubeconfig", "/nonexistent/\x1b]0;owned\x07"),
            r"stalewatch: kubeconfig /nonexistent/\x1b]0;owned\x07: no such file",
            id="kubeconfig-error",
        ),
    ],
)
def test_run_escapes_what_it_says_on_stderr_before_it_starts(args: tuple[str, ...], expected: str) -> None:
    """The log (stdout, JSON) escapes by JSON's rules; the one line for the person on stderr too."""
    code, out, err = stalewatch("run", "--listen", "127.0.0.1:18080", *args)
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith(expected), err
    assert not {"\x1b", "\x07"} & set(out + err)
    assert_no_traceback(out, err)
