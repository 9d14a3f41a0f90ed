"""What the stacks apply besides workloads and Flux objects: a third-party custom kind
(`Certificate`, shaped like cert-manager's, in the invented group certs.bench.example that
bench/crds/ serves) and built-in Jobs, with the status their controllers write. Each is applied
by one Kustomization, whose status.inventory lists it (`stack_entries`), so stalewatch watches
both kinds because an inventory lists them (watcher/kube/cluster.py) and judges them with
ObjectFailing.

In a cluster built with `failing`, one in FAILING_GITOPS of each is failing: a Certificate whose
issuance failed (Ready=False DoesNotExist, Issuing=False Failed, as cert-manager writes them) and
a Job past its backoff limit (FailureTarget, then Failed, as the job controller writes them: the
API server of Kubernetes 1.34 accepts Failed=True only after FailureTarget=True, and Complete=True
only after SuccessCriteriaMet=True).
"""

from __future__ import annotations

from collections.abc import Iterator

from bench.kinds import API_VERSIONS, Obj, Placed, sha


class Stack(Placed):
    """Mixed into Cluster: the Certificates and Jobs, the i-th of a kind applied by the
    Kustomization i modulo their number (in its namespace)."""

    def stack_name(self, kind: str, index: int) -> str:
        return f"{'cert' if kind == 'Certificate' else 'migrate'}-{index:05d}"

    def stack_entries(self, kustomization: int) -> list[Obj]:
        """The inventory entries of the Certificates and Jobs the Kustomization applies."""
        namespace, every = self.ns(kustomization), self.count["Kustomization"]
        out = []
        for kind in ("Certificate", "Job"):
            group, _, version = API_VERSIONS[kind].rpartition("/")
            for i in range(kustomization, self.count[kind], every):
                out.append({"id": f"{namespace}_{self.stack_name(kind, i)}_{group}_{kind}", "v": version})
        return out

    def _stack_ns(self, index: int) -> str:
        return self.ns(index % self.count["Kustomization"])

    def _certificates(self) -> Iterator[Obj]:
        for i in range(self.count["Certificate"]):
            name, namespace = self.stack_name("Certificate", i), self._stack_ns(i)
            yield {
                "apiVersion": API_VERSIONS["Certificate"],
                "kind": "Certificate",
                "metadata": {"name": name, "namespace": namespace, "generation": 1},
                "spec": {
                    "secretName": f"{name}-tls",
                    "dnsNames": [f"{name}.{namespace}.svc.cluster.local", f"{name}.acme.example"],
                    "issuerRef": {
                        "name": "letsencrypt",
                        "kind": "ClusterIssuer",
                        "group": "certs.bench.example",
                    },
                    "duration": "2160h0m0s",
                    "renewBefore": "360h0m0s",
                    "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                },
                "status": self.certificate_status(name, failing=self.failing_at(i)),
            }

    def certificate_status(
        self, name: str, *, failing: bool = False, renewing: bool = False, revision: int = 3, since: str = ""
    ) -> Obj:
        """What cert-manager writes: Ready=True and the validity window; Issuing=True (since
        `since`) while a renewal runs; when issuance failed (since `since`), Ready=False
        DoesNotExist and Issuing=False Failed."""
        when = self.ago(hours=2)
        if failing:
            when = since or when
            failed = (
                "The certificate request has failed to complete and will be retried: Failed to wait for "
                f'order resource "{name}-1-{sha(name)[:10]}" to become ready: order is in "invalid" state'
            )
            return {
                "conditions": [
                    cond(
                        "Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist", when
                    ),
                    cond("Issuing", "False", "Failed", failed, when),
                ],
                "failedIssuanceAttempts": 3,
                "lastFailureTime": when,
            }
        conditions = [cond("Ready", "True", "Ready", "Certificate is up to date and has not expired", when)]
        if renewing:
            conditions.append(
                cond(
                    "Issuing",
                    "True",
                    "Renewing",
                    "Renewing certificate as renewal was scheduled",
                    since or when,
                )
            )
        return {
            "conditions": conditions,
            "notBefore": self.ago(days=20),
            "notAfter": self.ago(days=-70),
            "renewalTime": self.ago(days=-55),
            "revision": revision,
        }

    def _jobs(self) -> Iterator[Obj]:
        for i in range(self.count["Job"]):
            name = self.stack_name("Job", i)
            yield {
                "apiVersion": API_VERSIONS["Job"],
                "kind": "Job",
                "metadata": {"name": name, "namespace": self._stack_ns(i)},
                "spec": {
                    "backoffLimit": 2,
                    "ttlSecondsAfterFinished": 86400,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "migrate",
                                    "image": f"ghcr.io/acme/migrate:v2.{sha(name)[:2]}.0",
                                    "args": [
                                        "migrate",
                                        "up",
                                        "--database",
                                        f"postgres://db-{i % 50:02d}/app",
                                    ],
                                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                                }
                            ],
                        }
                    },
                },
                "status": self.job_status(failed=self.failing_at(i)),
            }

    def job_status(self, *, failed: bool) -> Obj:
        """What the job controller writes when a Job finished: SuccessCriteriaMet then Complete,
        or FailureTarget then Failed past the backoff limit (3 Pods failed with backoffLimit 2)."""
        started, ended = self.ago(hours=3), self.ago(hours=3, seconds=-42)
        if failed:
            reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            return {
                "conditions": [
                    cond("FailureTarget", "True", reason, message, ended, probe=True),
                    cond("Failed", "True", reason, message, ended, probe=True),
                ],
                "startTime": started,
                "failed": 3,
                "terminating": 0,
                "ready": 0,
            }
        reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        return {
            "conditions": [
                cond("SuccessCriteriaMet", "True", reason, message, ended, probe=True),
                cond("Complete", "True", reason, message, ended, probe=True),
            ],
            "startTime": started,
            "completionTime": ended,
            "succeeded": 1,
            "terminating": 0,
            "ready": 0,
            "uncountedTerminatedPods": {},
        }


def cond(kind: str, status: str, reason: str, message: str, when: str, *, probe: bool = False) -> Obj:
    """A condition as its controller writes it: the job controller sets lastProbeTime, cert-manager
    observedGeneration."""
    out: Obj = {"type": kind, "status": status, "reason": reason, "message": message}
    if probe:
        out["lastProbeTime"] = when
    out["lastTransitionTime"] = when
    if not probe:
        out["observedGeneration"] = 1
    return out
