"""Flags more than one subcommand takes, declared once: a duration, and the cluster to read."""

from __future__ import annotations

import argparse
from datetime import timedelta

from watcher.config import MAX_DURATION, setting_duration
from watcher.model.ingest.objects import format_duration

_LONGEST = format_duration(MAX_DURATION)


def positive_duration(text: str) -> timedelta:
    """A duration above zero, for argparse: read as every setting and the fleet's flags are
    (config.setting_duration), so a flag takes what a setting takes."""
    try:
        value = setting_duration(text)
    except ValueError:
        value = timedelta(0)
    if value <= timedelta(0):
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 30s, 5m or 1h30m, or a number of seconds, "
            f"up to {_LONGEST}; got {text!r}"
        )
    return value


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig, --context and --namespaces, as `wait` and `impact` read the cluster."""
    parser.add_argument("--kubeconfig", metavar="FILE", help="default $KUBECONFIG, else ~/.kube/config")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
    add_namespaces_argument(parser)


def add_namespaces_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--namespaces, the `namespaces` setting: namespace mode (docs/operations.md, tenants)."""
    parser.add_argument(
        "--namespaces",
        metavar="NS[,NS...]",
        help="namespace mode: list and watch only in these namespaces (a Role in each suffices)",
    )


CLUSTER_FLAGS = ("kubeconfig", "context", "namespaces")
"""The settings add_cluster_arguments' flags set."""
