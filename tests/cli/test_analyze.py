"""`stalewatch analyze` end to end: the examples through the real loader, model and report."""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from watcher import __version__
from watcher.cli import main
from watcher.model.types import Finding

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("STALEWATCH_UPDATE_GOLDEN") == "1"
NOW = "2026-11-30T12:00:00Z"
TERRAFORMS = ["eks-cluster", "iam-roles", "rds-postgres", "route53-zones", "s3-artifacts", "vpc"]


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("STALEWATCH_") and name != "STALEWATCH_UPDATE_GOLDEN":
            monkeypatch.delenv(name)
    monkeypatch.delenv("NO_COLOR", raising=False)


def analyze_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["analyze", "--now", NOW, "--output", "json", *args])
    return code, orjson.loads(capsys.readouterr().out)


def key(subject: dict[str, str]) -> tuple[str, str, str]:
    return subject["kind"], subject["namespace"], subject["name"]


def objects_in(directory: Path) -> int:
    return sum(len(yaml.safe_load(f.read_text())["items"]) for f in directory.glob("*.yaml"))


@pytest.mark.parametrize(
    ("example", "root_id", "subject", "affected", "severity", "exit_code"),
    [
        pytest.param(
            "tofu-controller-down",
            "ControllerDown/Deployment/flux-system/tofu-controller",
            ("Deployment", "flux-system", "tofu-controller"),
            {("Terraform", "flux-system", name) for name in TERRAFORMS}
            | {
                ("Kustomization", "flux-system", name)
                for name in ("infra-terraform", "apps-data", "apps-payments", "ingress-edge")
            },
            "critical",
            1,
            id="tofu-controller-down-is-one-critical-controller-down",
        ),
        pytest.param(
            "reconciling-left-true",
            "StuckReconciling/Kustomization/flux-system/monitoring",
            ("Kustomization", "flux-system", "monitoring"),
            set(),
            "warning",
            0,
            id="reconciling-left-true-is-stuck-reconciling",
        ),
        pytest.param(
            "sibling-revision-skew",
            "RevisionSkew/Kustomization/flux-system/deploy-config",
            ("Kustomization", "flux-system", "deploy-config"),
            set(),
            "warning",
            0,
            id="sibling-skew-names-the-child-that-failed",
        ),
        pytest.param(
            "gitrepository-clone-failing",
            "ReconcileFailed/GitRepository/flux-system/tenants",
            ("GitRepository", "flux-system", "tenants"),
            {
                ("Kustomization", "flux-system", name)
                for name in ("tenants-shared", "tenants-team-a", "tenants-team-b")
            },
            "warning",
            0,
            id="failing-git-repository-is-the-root-of-its-kustomizations",
        ),
        pytest.param(
            "helmrelease-ready-workload-failing",
            "ReleaseReadyWorkloadFailing/HelmRelease/podinfo/podinfo",
            ("HelmRelease", "podinfo", "podinfo"),
            {("Deployment", "podinfo", "podinfo"), ("Pod", "podinfo", "podinfo-7c9d8f6b5-qk2lx")},
            "warning",
            0,
            id="ready-helmrelease-with-crash-looping-pod",
        ),
        pytest.param(
            "policy-denied-loadbalancer",
            "PolicyDenied/EdgeGateway/checkout/storefront",
            ("EdgeGateway", "checkout", "storefront"),
            {("Kustomization", "flux-system", name) for name in ("team-checkout", "flux-system")},
            "warning",
            0,
            id="another-stacks-gatekeeper-constraint-denies-a-controller-forever",
        ),
        pytest.param(
            "prune-orphan",
            "PruneOrphan/Terraform/team-data/reports-replica",
            ("Terraform", "team-data", "reports-replica"),
            set(),
            "warning",
            0,
            id="an-object-prune-left-behind-while-its-controller-retries-on-it",
        ),
    ],
)
def test_each_incident_example_has_exactly_its_one_root_cause(
    capsys: pytest.CaptureFixture[str],
    example: str,
    root_id: str,
    subject: tuple[str, str, str],
    affected: set[tuple[str, str, str]],
    severity: str,
    exit_code: int,
) -> None:
    code, report = analyze_json(capsys, str(EXAMPLES / example))
    roots = [f for f in report["findings"] if f["root_cause"] is None]
    assert [(r["id"], key(r["subject"]), r["severity"]) for r in roots] == [(root_id, subject, severity)]
    assert {key(s) for s in roots[0]["affected"]} == affected
    assert {f["root_cause"] for f in report["findings"] if f["root_cause"] is not None} <= {root_id}
    assert code == exit_code


def test_the_tofu_incidents_symptoms_are_stale_terraforms_and_blocked_kustomizations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = analyze_json(capsys, str(EXAMPLES / "tofu-controller-down"))
    by_subject: dict[tuple[str, str, str], set[str]] = {}
    for f in report["findings"]:
        if f["root_cause"]:
            by_subject.setdefault(key(f["subject"]), set()).add(f["type"])
    for name in TERRAFORMS:
        assert by_subject[("Terraform", "flux-system", name)] == {"StatusStale"}
    for name in ("apps-data", "apps-payments", "ingress-edge"):
        assert by_subject[("Kustomization", "flux-system", name)] == {"DependencyBlocked"}


def test_the_policy_denial_names_the_constraint_the_service_the_controller_and_how_often(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = analyze_json(capsys, str(EXAMPLES / "policy-denied-loadbalancer"))
    [root] = [f for f in report["findings"] if f["root_cause"] is None]
    evidence = root["evidence"]
    assert (evidence["engine"], evidence["policies"], evidence["denied_object"]) == (
        "gatekeeper",
        ["deny-public-loadbalancers"],
        'services "storefront-lb"',
    )
    assert (evidence["controller"], evidence["count"], root["since"]) == (
        "edge-gateway-controller",
        7141,
        "2026-11-29T16:02:11Z",
    )


def test_the_policy_denial_names_the_constraint_and_the_stack_that_installed_it_and_compliance_per_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = analyze_json(capsys, str(EXAMPLES / "policy-denied-loadbalancer"))
    [root] = [f for f in report["findings"] if f["root_cause"] is None]
    assert root["evidence"]["policy_objects"] == ["K8sDenyServiceType deny-public-loadbalancers"]
    assert root["evidence"]["policy_installed_by"] == ["Kustomization flux-system/platform-policies"]
    compliance = report["compliance"]
    assert [
        (v["policy"], v["enforcement_action"], v["stack"], v["count"], v["objects"])
        for v in compliance["violations"]
    ] == [
        (
            "deny-public-loadbalancers",
            "deny",
            "Kustomization/flux-system/team-checkout",
            1,
            ["Service/checkout/storefront-metrics-lb"],
        ),
        (
            "require-run-as-non-root",
            "unknown",
            "Kustomization/flux-system/team-checkout",
            1,
            ["Deployment/checkout/edge-gateway-controller"],
        ),
    ]
    assert compliance["constraints"] == [
        {
            "kind": "K8sDenyServiceType",
            "name": "deny-public-loadbalancers",
            "enforcement_action": "deny",
            "audited": "2026-11-30T11:59:12Z",
            "total": 1,
            "listed": 1,
        }
    ]
    assert (compliance["reports"], compliance["not_judged"], code) == (1, [], 0), "information, no exit code"


def test_stuck_reconciling_says_ready_true_is_set_too(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = analyze_json(capsys, str(EXAMPLES / "reconciling-left-true"))
    assert "Ready=True" in report["findings"][0]["message"]


def test_revision_skew_quotes_the_failing_childs_forbidden_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = analyze_json(capsys, str(EXAMPLES / "sibling-revision-skew"))
    root = report["findings"][0]
    assert "dry-run failed (Forbidden)" in root["message"]
    assert 'User "system:serviceaccount:flux-system:deploy-config" cannot patch' in root["message"]


def waiting_cycle(path: Path, *links: tuple[str, str]) -> Path:
    """Kustomizations (name, how) each waiting on the next (the last on the first) for two hours:
    by `dependsOn`, or by the health of what it applied (`inventory`)."""
    items = []
    for (name, how), (after, _) in zip(links, [*links[1:], links[0]], strict=True):
        spec = {
            "interval": "10m",
            "path": "./",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        }
        status: dict[str, Any] = {"observedGeneration": 1}
        if how == "dependsOn":
            spec["dependsOn"] = [{"name": after}]
            reason, said = "DependencyNotReady", f"dependency 'flux-system/{after}' is not ready"
        else:
            entry = f"flux-system_{after}_kustomize.toolkit.fluxcd.io_Kustomization"
            status["inventory"] = {"entries": [{"id": entry, "v": "v1"}]}
            reason, said = "HealthCheckFailed", f"Kustomization/flux-system/{after} status: 'InProgress'"
        waits = {"type": "Ready", "status": "False", "reason": reason, "message": said}
        status["conditions"] = [{**waits, "lastTransitionTime": "2026-11-30T10:00:00Z"}]
        items.append(
            {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
                "spec": spec,
                "status": status,
            }
        )
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.mark.parametrize(
    ("links", "cycle", "by"),
    [
        pytest.param(
            [("a", "dependsOn"), ("b", "dependsOn"), ("c", "dependsOn")],
            ("c", "a", "b", "c"),
            "dependsOn",
            id="dependsOn",
        ),
        pytest.param(
            [("a", "inventory"), ("b", "dependsOn")],
            ("b", "a", "b"),
            "dependsOn and inventory",
            id="through-what-one-applied",
        ),
    ],
)
def test_a_waiting_cycle_is_named_in_the_root_cause(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    links: list[tuple[str, str]],
    cycle: tuple[str, ...],
    by: str,
) -> None:
    _, document = analyze_json(capsys, str(waiting_cycle(tmp_path / "cycle.json", *links)))
    [root] = [f for f in document["findings"] if f["root_cause"] is None]
    keys = [f"Kustomization/flux-system/{name}" for name in cycle]
    assert (root["type"], root["evidence"]["cycle"]) == ("DependencyBlocked", keys)
    named = " -> ".join(f"Kustomization flux-system/{name}" for name in cycle)
    assert root["message"].endswith(f" It waits on itself: {by} cycle: {named}."), root["message"]
    assert "Nothing it waits on shows a problem" not in root["message"]


def test_healthy_cluster_reports_no_findings_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", "--now", NOW, str(EXAMPLES / "healthy")])
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    assert (
        captured.out == f"No findings: {objects_in(EXAMPLES / 'healthy')} objects evaluated, all healthy.\n"
    )


def test_tofu_report_text_matches_golden(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", "--now", NOW, str(EXAMPLES / "tofu-controller-down")])
    text = capsys.readouterr().out
    golden = GOLDEN / "tofu-controller-down.txt"
    if UPDATE_GOLDEN:
        golden.write_text(text)
    assert text == golden.read_text()
    assert code == 1


def test_json_output_is_exactly_the_finding_fields_a_summary_and_the_rejected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = analyze_json(capsys, str(EXAMPLES / "tofu-controller-down"))
    assert set(report) == {"findings", "summary", "rejected", "compliance", "heartbeats"}
    assert report["rejected"] == []
    fields = {f.name for f in dataclasses.fields(Finding)}
    assert all(set(finding) == fields for finding in report["findings"])
    summary = report["summary"]
    assert set(summary) == {
        "now", "objects", "findings", "roots", "by_severity", "by_type", "load_errors", "rejected",
        "unjudged", "unread",
    }  # fmt: skip
    assert (summary["now"], summary["roots"], summary["load_errors"], summary["rejected"]) == (NOW, 1, 0, 0)
    assert summary["unjudged"] == {}
    assert summary["objects"] == objects_in(EXAMPLES / "tofu-controller-down")
    assert summary["findings"] == len(report["findings"]) == sum(summary["by_type"].values())
    assert summary["by_severity"]["critical"] == 1


def test_bad_input_exits_2_but_still_reports_the_good_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = shutil.copytree(EXAMPLES / "tofu-controller-down", tmp_path / "snapshot")
    (snapshot / "broken.yaml").write_text("kind: [unclosed\n")
    bad_condition = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "odd", "namespace": "flux-system"},
        "status": {"conditions": "Ready"},
    }
    (snapshot / "odd.json").write_bytes(orjson.dumps(bad_condition))
    code = main(["analyze", "--now", NOW, str(snapshot)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.startswith("CRITICAL ControllerDown: Deployment flux-system/tofu-controller\n")
    assert captured.out.endswith("2 load errors (see stderr): what they name was not evaluated.\n")
    assert captured.err.splitlines() == [
        f"stalewatch: {snapshot}/broken.yaml: not valid YAML: line 2, column 1: "
        "did not find expected ',' or ']'",
        f"stalewatch: {snapshot}/odd.json: Kustomization flux-system/odd: status.conditions is not a list",
    ]


def test_a_missing_path_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", "--now", NOW, "no/such/snapshot.yaml"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == "stalewatch: no/such/snapshot.yaml: no such file or directory\n"
    assert (
        captured.out
        == "No objects were evaluated.\n1 load error (see stderr): what they name was not evaluated.\n"
    )


@pytest.mark.parametrize(
    "now",
    [
        pytest.param("yesterday", id="not-a-time"),
        pytest.param("2026-11-30T12:00:00", id="no-zone"),
        pytest.param("2026-11-30", id="date-only"),
        pytest.param("2026-13-01T00:00:00Z", id="month-13"),
    ],
)
def test_a_bad_now_exits_2_with_the_expected_form(capsys: pytest.CaptureFixture[str], now: str) -> None:
    code = main(["analyze", "--now", now, str(EXAMPLES / "healthy")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == (
        "stalewatch analyze: error: argument --now: expected an RFC 3339 time with a zone, "
        f"e.g. 2026-11-30T12:00:00Z; got {now!r} (see stalewatch analyze --help)\n"
    )
    assert captured.out == ""


def test_now_with_an_offset_is_the_same_instant(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = analyze_json(capsys, "--now", "2026-11-30T13:00:00+01:00", str(EXAMPLES / "healthy"))
    assert report["summary"]["now"] == NOW


def test_a_severity_override_decides_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = analyze_json(
        capsys, "--set", "severities.ControllerDown=warning", str(EXAMPLES / "tofu-controller-down")
    )
    assert (code, report["findings"][0]["severity"]) == (0, "warning")


def test_excluded_namespaces_are_not_evaluated(capsys: pytest.CaptureFixture[str]) -> None:
    example = EXAMPLES / "helmrelease-ready-workload-failing"
    code, report = analyze_json(capsys, "--set", "exclude_namespaces=podinfo", str(example))
    assert (code, report["findings"]) == (0, [])
    assert (
        report["summary"]["objects"] == objects_in(example) - 7
    )  # the HelmRelease, Deployment, 2 RS, 3 pods


def test_a_bad_config_exits_2_before_reading_any_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "stalewatch.yaml"
    config.write_text("thresholds:\n  revision_skew: soon\n")
    code = main(["analyze", "--config", str(config), str(EXAMPLES / "healthy")])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err == (
        "config: thresholds.revision_skew: expected a duration such as 90s, 10m or 1h30m "
        "(units h, m, s, ms), or a number of seconds; got 'soon'\n"
    )


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("no_color", "coloured"),
    [
        pytest.param(None, True, id="terminal-gets-colour"),
        pytest.param("1", False, id="NO_COLOR-turns-it-off"),
    ],
)
def test_colour_only_on_a_terminal_without_no_color(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", no_color)
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    main(["analyze", "--now", NOW, str(EXAMPLES / "reconciling-left-true")])
    assert ("\x1b[" in terminal.getvalue()) is coloured


def test_python_dash_m_watcher_help_works() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "watcher", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "analyze" in result.stdout
    assert "config" in result.stdout


def test_analyze_as_a_separate_process_prints_the_golden_report_and_exits_1() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "watcher", "analyze", "--now", NOW, str(EXAMPLES / "tofu-controller-down")],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("STALEWATCH_")},
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (GOLDEN / "tofu-controller-down.txt").read_text()


def test_a_reader_that_goes_away_is_not_a_traceback() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "watcher", "analyze", "--now", NOW, str(EXAMPLES / "tofu-controller-down")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # like `| head` exiting before stalewatch writes
    _, stderr = process.communicate()
    assert (process.returncode, stderr) == (0, b"")


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().out.startswith("usage: stalewatch [-h] [--version] COMMAND ...")


def test_version_names_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"stalewatch {__version__}\n"


def test_run_is_wired_to_the_live_watcher_with_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert "--listen [HOST]:PORT" in capsys.readouterr().out


def test_run_with_bad_configuration_exits_2_before_touching_a_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--listen", "nope"]) == 2
    assert capsys.readouterr().err == (
        "config: listen: expected [HOST]:PORT such as ':8080', '127.0.0.1:9090' or '[::1]:8080'; got 'nope'\n"
    )


def test_analyze_does_not_import_the_live_watcher() -> None:
    script = (
        "import sys; from watcher.cli import main; "
        f"main(['analyze', '--now', {NOW!r}, {str(EXAMPLES / 'healthy')!r}]); "
        "print('watcher.app' in sys.modules, 'kubernetes_asyncio' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "False False"


def test_the_policy_denied_examples_readme_shows_what_analyze_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = (EXAMPLES / "policy-denied-loadbalancer" / "README.md").read_text()
    shown = readme.split("examples/policy-denied-loadbalancer/\n", 2)[-1].split("$ echo $?")[0]

    code = main(["analyze", "--now", NOW, str(EXAMPLES / "policy-denied-loadbalancer")])

    assert (capsys.readouterr().out, code) == (shown, 0)


def test_crd_ownership_risk_example_names_each_crd_its_installer_the_other_release_and_the_stacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Incident 2 before it happens: one root per CRD release A installs, nothing else."""
    code, report = analyze_json(capsys, str(EXAMPLES / "crd-ownership-risk"))
    assert code == 0
    assert [(f["id"], f["root_cause"]) for f in report["findings"]] == [
        (f"CRDOwnershipRisk/CustomResourceDefinition/{plural}.image.toolkit.fluxcd.io", None)
        for plural in ("imagepolicies", "imagerepositories")
    ]
    for finding, kind in zip(report["findings"], ("ImagePolicy", "ImageRepository"), strict=True):
        assert finding["severity"] == "warning"
        assert finding["evidence"]["installed_by"] == ["HelmRelease team-platform/platform-base"]
        assert finding["evidence"]["controllers"] == [
            {
                "name": "image-reflector-controller",
                "workload": "Deployment team-delivery/image-reflector-controller",
                "deployed_by": "HelmRelease team-delivery/image-automation",
            }
        ]
        assert finding["evidence"]["stacks"] == {
            "Kustomization flux-system/apps": 1,
            "Kustomization flux-system/web": 2,
        }
        assert {key(s) for s in finding["affected"]} == {
            ("Deployment", "team-delivery", "image-reflector-controller"),
            (kind, "team-apps", "podinfo"),
            (kind, "team-web", "checkout"),
            (kind, "team-web", "storefront"),
        }
        assert finding["message"].startswith(
            "Removing or upgrading HelmRelease team-platform/platform-base deletes"
        )


def test_healthy_multi_stack_example_with_a_kept_shared_crd_reports_no_findings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Five root stacks, dependsOn between them and inside one, three releases with their charts,
    controllers alive with Leases, and the image.toolkit CRDs one stack installs for another's
    controller kept by helm.sh/resource-policy: keep: no CRDOwnershipRisk, nothing at all."""
    example = EXAMPLES / "healthy-multi-stack"
    code = main(["analyze", "--now", NOW, str(example)])
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    assert captured.out == f"No findings: {objects_in(example)} objects evaluated, all healthy.\n"


def test_prune_orphan_example_roots_its_controllers_retries_in_the_object_prune_left_behind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Incident 4: a Terraform removed from Git, dropped from its Kustomization's inventory, not
    pruned; tofu-controller's failures on it are its symptoms, and it is the only root."""
    code, report = analyze_json(capsys, str(EXAMPLES / "prune-orphan"))
    orphan = "PruneOrphan/Terraform/team-data/reports-replica"
    assert code == 0
    assert [(f["id"], f["root_cause"]) for f in report["findings"]] == [
        (orphan, None),
        ("ReconcileFailed/Terraform/team-data/reports-replica", orphan),
        ("RetryLoop/Terraform/team-data/reports-replica/error", orphan),
        ("RevisionSkew/Terraform/team-data/reports-replica", orphan),
    ]
    root = report["findings"][0]
    assert (root["severity"], root["since"]) == ("warning", "2026-11-28T09:14:07Z")
    assert root["evidence"]["kustomization"] == "Kustomization/flux-system/data-infra"
    assert root["evidence"]["reason"] == "NotInInventory"
    assert root["evidence"]["controller"] == "tofu-controller"
    assert "RetryLoop, Warning error 203 times, last at 2026-11-30T11:51:02Z" in root["evidence"]["acted_on"]


def test_the_prune_orphan_examples_readme_shows_what_analyze_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = (EXAMPLES / "prune-orphan" / "README.md").read_text()
    shown = readme.split("examples/prune-orphan/\n", 2)[-1].split("$ echo $?")[0]

    code = main(["analyze", "--now", NOW, str(EXAMPLES / "prune-orphan")])

    assert (capsys.readouterr().out, code) == (shown, 0)


def test_the_conflicting_writers_series_names_both_managers_and_the_fields_that_flip(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Incident 3 from seven snapshots of one EdgeGateway: one root, naming both writers."""
    code, report = analyze_json(capsys, str(EXAMPLES / "conflicting-writers"))
    assert code == 0
    [root] = report["findings"]
    assert (root["id"], root["severity"], root["since"]) == (
        "ConflictingWriters/EdgeGateway/team-storefront/storefront",
        "warning",
        "2026-11-30T11:40:05Z",
    )
    evidence = root["evidence"]
    assert evidence["managers"] == evidence["writers"] == ["edge-operator", "mesh-controller"]
    assert evidence["fields"] == ["spec.sidecar", "spec.sidecar.image", "spec.sidecar.port"]
    assert (evidence["flips"], evidence["per_hour"], evidence["last"]) == (5, 30.0, "2026-11-30T11:50:05Z")
    assert report["summary"]["objects"] == 1


def test_one_snapshot_of_the_fought_over_object_shows_no_fight(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = analyze_json(capsys, str(EXAMPLES / "conflicting-writers" / "storefront.7.yaml"))
    assert (code, report["findings"]) == (0, [])


def test_the_conflicting_writers_examples_readme_shows_what_analyze_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = (EXAMPLES / "conflicting-writers" / "README.md").read_text()
    shown = readme.split("examples/conflicting-writers/\n", 2)[-1].split("$ echo $?")[0]
    code = main(["analyze", "--now", NOW, str(EXAMPLES / "conflicting-writers")])
    assert (capsys.readouterr().out, code) == (shown, 0)
