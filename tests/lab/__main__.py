"""`make lab`: the real-Flux lab with one thing broken and `stalewatch run` serving its page.

Starts the lab (real source-, kustomize- and helm-controller against a real kube-apiserver, a
local Git server), lets Flux reconcile the lab's repository, then breaks kustomize-controller the
way the incident stalewatch was built for did (its process killed, its new Pod in
ImagePullBackOff; `--break none` keeps the lab healthy), and serves stalewatch on a printed URL
until Ctrl-C, when everything stops and the lab's files are removed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from tests.controlplane.harness import free_port
from tests.lab.lab import condition, running_lab, wait_for
from tests.lab.manifests import NAMESPACE, git_repository, kustomization


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make lab", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--break", dest="broken", choices=("kustomize-controller", "none"), default="kustomize-controller"
    )
    parser.add_argument("--port", type=int, default=0, help="where stalewatch listens (default: a free port)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("starting the lab (the first run builds the controllers: several minutes)...", flush=True)
    with running_lab() as lab:
        lab.apply(git_repository(lab.git_url), kustomization())
        wait_for(
            "Kustomization apps Ready",
            lambda: (
                (condition(lab.get("kustomizations.kustomize.toolkit.fluxcd.io", "apps"), "Ready") or {}).get(
                    "status"
                )
                == "True"
            ),
            timeout=120,
        )
        print(f"Flux reconciled {lab.git_url} into the cluster (Kustomization {NAMESPACE}/apps Ready).")
        if args.broken != "none":
            lab.kill(args.broken)
            lab.break_pod(args.broken)
            print(f"{args.broken}: process killed, its Pod in ImagePullBackOff.")
        listen = f"127.0.0.1:{args.port or free_port()}"
        process = lab.start_stalewatch(listen)
        print(f"\nstalewatch: http://{listen}/   (kubeconfig: {lab.plane.kubeconfig})")
        print(
            "Ctrl-C stops stalewatch, the controllers and the cluster, and removes the lab's files.",
            flush=True,
        )
        while not stop.wait(1):
            if process.poll() is not None:
                print(f"stalewatch exited with {process.returncode}; see {lab.logs / 'stalewatch.log'}")
                return 1
    print("lab stopped and cleaned up.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
