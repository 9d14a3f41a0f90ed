"""Flags more than one subcommand takes, declared once: a duration, and the cluster to read."""

from __future__ import annotations

import argparse
from datetime import timedelta

from watcher.model.ingest.objects import parse_duration


def positive_duration(text: str) -> timedelta:
    """A Go duration (30s, 5m, 1h30m) above zero, for argparse."""
    value = parse_duration(text)
    if value is None or value <= timedelta(0):
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 30s, 5m or 1h30m; got {text!r}"
        )
    return value


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context, as `wait` and `impact` read the cluster."""
    parser.add_argument("--kubeconfig", metavar="FILE", help="default $KUBECONFIG, else ~/.kube/config")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
