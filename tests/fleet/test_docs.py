"""docs/operations.md's fleet sections stay true: every Prometheus config they show is accepted by
the real promtool, and the /api/v1/fleet example has exactly the fields the fleet writes."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.fleet.test_model import TOFU, critical_root, fleet, reporting, revision, s
from watcher.cli import build_parser
from watcher.fleet.queries import Answer

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
SECTIONS = (
    DOC.read_text().split("## One per cluster, one view of the fleet", 1)[1].split("\n## Upgrades", 1)[0]
)
YAML = re.findall(r"```yaml\n(.*?)```", SECTIONS, re.DOTALL)
KEYED_BY_DATA = {"blast_radius", "critical", "warning", "info", "a", "prod-eu-1"}
"""Keys that are data (a query's name, a severity, a cluster), not fields of the schema."""
[JSON] = re.findall(r"```json\n(.*?)```", SECTIONS, re.DOTALL)


@pytest.mark.parametrize("config", [c for c in YAML if "scrape_configs" in c or "remote_write" in c])
def test_each_prometheus_config_shown_is_one_promtool_accepts(config: str, tmp_path: Path) -> None:
    path = tmp_path / "prometheus.yml"
    path.write_text(config)
    assert yaml.safe_load(config)
    checked = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_fleet_document_shown_has_the_fields_the_fleet_writes() -> None:
    shown = json.loads(JSON)
    written = fleet(
        {
            **reporting("a"),
            "roots": Answer((critical_root("a"),)),
            "matrix": Answer((revision("a", "r1", "r1"),)),
            "controllers_down": Answer((s(0, cluster="a", **TOFU),)),
            "root_counts": Answer((s(1, cluster="a", severity="critical"),)),
            "blast_radius": Answer(error="timeout: query timed out in expression evaluation"),
        }
    ).to_dict()

    def shape(value: object) -> object:
        """Keys all the way down; a mapping keyed by data (errors, counts, cells) by its first value."""
        if isinstance(value, dict):
            if value.keys() & KEYED_BY_DATA or not value:
                return {"*": shape(next(iter(value.values()), None))}
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list) and value:
            return [shape(value[0])]
        return None

    assert shape(shown) == shape(written)
    assert datetime.fromisoformat(shown["now"]).tzinfo == UTC


FLAG_ROWS = re.findall(r"^\| `(--[a-z-]+) ([A-Z][A-Z=\[\]:]*)`[^|]*\| ([^|]*) \|", SECTIONS, re.MULTILINE)
"""(flag, metavar, default cell) of each row of the fleet's flag table that shows one."""


@pytest.mark.parametrize(("flag", "metavar", "default"), FLAG_ROWS, ids=[row[0] for row in FLAG_ROWS])
def test_each_flag_in_the_table_has_the_metavar_and_default_the_help_has(
    flag: str, metavar: str, default: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["fleet", "--prometheus", "http://127.0.0.1:9090"]
    args = build_parser(argv).parse_args(argv)
    with pytest.raises(SystemExit):
        build_parser(argv).parse_args(["fleet", "--help"])
    assert f"{flag} {metavar}" in capsys.readouterr().out
    if default.startswith("`"):
        assert getattr(args, flag[2:].replace("-", "_")) == default.strip("`")


def test_the_table_lists_every_flag_of_the_help_but_the_log_level(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser(["fleet"]).parse_args(["fleet", "--help"])
    helped = set(re.findall(r"^\s+(--[a-z-]+)", capsys.readouterr().out, re.MULTILINE))
    table = SECTIONS.split("| flag | default | what |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`(--[a-z-]+)", table)) == helped - {"--help", "--log-level"}
