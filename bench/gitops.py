"""Flux sources, Kustomizations, HelmReleases and tofu-controller Terraform objects for the
benchmark cluster, with the status their controllers write (artifacts, inventories, history)."""

from __future__ import annotations

from collections.abc import Iterator

from bench.kinds import API_VERSIONS, CONTROLLERS, Obj, Placed, sha

FAILURES: dict[str, tuple[str, str, str]] = {
    "GitRepository": (
        "GitOperationFailed",
        "failed to checkout and determine revision: unable to clone '{url}': ssh: handshake failed: EOF",
        "FetchFailed",
    ),
    "Kustomization": (
        "HealthCheckFailed",
        "health check failed after 5m0s: timeout waiting for: "
        "[Deployment/{namespace}/app status: 'InProgress']",
        "",
    ),
    "HelmRelease": (
        "UpgradeFailed",
        "Helm upgrade failed for release {namespace}/{name} with chart podinfo@6.5.4: "
        "context deadline exceeded",
        "Released",
    ),
    "Terraform": (
        "TFExecApplyFailed",
        "error running Apply: rpc error: code = Internal desc = exit status 1",
        "Apply",
    ),
}
"""Kind -> (Ready's reason, its message, a second condition the controller sets with it): what
source-controller, kustomize-controller, helm-controller and tofu-controller write on failure.
FetchFailed is True while a fetch fails; Released and Apply turn False with Ready."""


class GitOps(Placed):
    """Mixed into Cluster: the GitOps objects, named and wired by index so every reference
    (sourceRef, dependsOn, helmChart, inventory) points at an object that exists."""

    namespaces: list[str]

    def _deployment_names(self) -> list[tuple[str, str, int]]:
        raise NotImplementedError

    def stack_entries(self, kustomization: int) -> list[Obj]:
        raise NotImplementedError

    def git_revision(self, name: str, step: int = 0) -> str:
        return f"main@sha1:{sha(name, step)}"

    def _cond(self, kind: str, status: str, reason: str, message: str, generation: int | None = None) -> Obj:
        out: Obj = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": self.ago(hours=2),
        }
        if generation is not None:
            out["observedGeneration"] = generation
        return out

    def judged(self, obj: Obj, index: int) -> Obj:
        """`obj`, or the failing version of it for one in FAILING_GITOPS of a kind in FAILURES."""
        failure = FAILURES.get(obj["kind"])
        if failure is None or not self.failing_at(index):
            return obj
        reason, template, second = failure
        meta = obj["metadata"]
        message = template.format(url=obj["spec"].get("url", ""), **meta)
        flag = "True" if second == "FetchFailed" else "False"
        conditions = [self._cond("Ready", "False", reason, message, 1)]
        if second:
            conditions.append(self._cond(second, flag, reason, message, 1))
        obj["status"]["conditions"] = conditions
        return obj

    def _source(self, kind: str, name: str, namespace: str, spec: Obj, revision: str) -> Obj:
        return {
            "apiVersion": API_VERSIONS[kind],
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "generation": 1,
                "finalizers": ["finalizers.fluxcd.io"],
            },
            "spec": {"interval": "5m", "timeout": "60s", **spec},
            "status": {
                "observedGeneration": 1,
                "conditions": [
                    self._cond("Ready", "True", "Succeeded", f"stored artifact for revision '{revision}'", 1),
                    self._cond(
                        "ArtifactInStorage",
                        "True",
                        "Succeeded",
                        f"stored artifact for revision '{revision}'",
                        1,
                    ),
                ],
                "artifact": {
                    "revision": revision,
                    "digest": f"sha256:{sha(revision)}{sha(name)[:24]}",
                    "lastUpdateTime": self.ago(hours=1),
                    "path": f"{kind.lower()}/{namespace}/{name}/{sha(revision)}.tar.gz",
                    "url": f"http://source-controller.flux-system.svc.cluster.local./{kind.lower()}/{namespace}/{name}/{sha(revision)}.tar.gz",
                    "size": 40960,
                },
                "url": f"http://source-controller.flux-system.svc.cluster.local./{kind.lower()}/{namespace}/{name}/latest.tar.gz",
            },
        }

    def _gitrepositorys(self) -> Iterator[Obj]:
        for i in range(self.count["GitRepository"]):
            name = f"repo-{i:04d}"
            spec = {
                "url": f"ssh://git@github.com/acme/{name}",
                "ref": {"branch": "main"},
                "secretRef": {"name": "git"},
            }
            yield self._source("GitRepository", name, self.ns(i), spec, self.git_revision(name))

    def _ocirepositorys(self) -> Iterator[Obj]:
        for i in range(self.count["OCIRepository"]):
            name = f"oci-{i:04d}"
            spec = {"url": f"oci://ghcr.io/acme/manifests/{name}", "ref": {"tag": "latest"}}
            yield self._source(
                "OCIRepository", name, self.ns(i), spec, f"latest@sha256:{sha(name)}{sha(i)[:24]}"
            )

    def _helmrepositorys(self) -> Iterator[Obj]:
        for i in range(self.count["HelmRepository"]):
            name = f"charts-{i:04d}"
            spec = {"url": f"https://charts.acme.example/{name}", "type": "default"}
            yield self._source("HelmRepository", name, self.ns(i), spec, f"sha256:{sha(name)}{sha(i)[:24]}")

    def _buckets(self) -> Iterator[Obj]:
        for i in range(self.count["Bucket"]):
            name = f"bucket-{i:04d}"
            spec = {"bucketName": name, "endpoint": "s3.amazonaws.com", "provider": "aws"}
            yield self._source("Bucket", name, self.ns(i), spec, f"sha256:{sha(name)}{sha(i)[:24]}")

    def repo(self, i: int) -> tuple[str, str]:
        """(namespace, name) of the GitRepository the i-th Kustomization or Terraform applies."""
        j = i % self.count["GitRepository"]
        return self.ns(j), f"repo-{j:04d}"

    def _releases(self) -> Iterator[tuple[str, str, str, str]]:
        """(namespace, name, chart namespace, HelmRepository) per HelmRelease: as helm-controller
        does, its HelmChart lives beside the HelmRepository, named <namespace>-<release>."""
        for i in range(self.count["HelmRelease"]):
            j = i % self.count["HelmRepository"]
            yield self.ns(i), f"release-{i:05d}", self.ns(j), f"charts-{j:04d}"

    def _helmcharts(self) -> Iterator[Obj]:
        for namespace, release, chart_ns, charts in self._releases():
            spec = {
                "chart": "podinfo",
                "version": "6.x",
                "sourceRef": {"kind": "HelmRepository", "name": charts},
            }
            chart = self._source("HelmChart", f"{namespace}-{release}", chart_ns, spec, "6.5.4")
            chart["status"]["conditions"][0]["message"] = "pulled 'podinfo' chart with version '6.5.4'"
            yield chart

    def _kustomizations(self) -> Iterator[Obj]:
        apps = self._deployment_names()[len(CONTROLLERS) :]
        for i in range(self.count["Kustomization"]):
            name, namespace = f"ks-{i:05d}", self.ns(i)
            repo_ns, repo = self.repo(i)
            revision = self.git_revision(repo)
            depends = (
                [{"name": f"ks-{i - len(self.namespaces):05d}"}]
                if i % 5 and i >= len(self.namespaces)
                else []
            )
            entries = [
                {"id": f"{ns}_{app}_apps_Deployment", "v": "v1"}
                for ns, app, _ in apps[i % len(apps) :: len(apps) // 8 + 1]
            ] + [{"id": f"{namespace}_{name}-config__ConfigMap", "v": "v1"}, *self.stack_entries(i)]
            yield {
                "apiVersion": API_VERSIONS["Kustomization"],
                "kind": "Kustomization",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "generation": 1,
                    "finalizers": ["finalizers.fluxcd.io"],
                },
                "spec": {
                    "interval": "10m",
                    "retryInterval": "2m",
                    "path": f"./clusters/prod/{name}",
                    "prune": True,
                    "wait": True,
                    "timeout": "5m",
                    "sourceRef": {"kind": "GitRepository", "name": repo, "namespace": repo_ns},
                    "dependsOn": depends,
                },
                "status": {
                    "observedGeneration": 1,
                    "lastAppliedRevision": revision,
                    "lastAttemptedRevision": revision,
                    "conditions": [
                        self._cond(
                            "Ready", "True", "ReconciliationSucceeded", f"Applied revision: {revision}", 1
                        )
                    ],
                    "inventory": {"entries": entries},
                },
            }

    def _helmreleases(self) -> Iterator[Obj]:
        for namespace, release, chart_ns, charts in self._releases():
            upgraded = f"Helm upgrade succeeded for release {namespace}/{release}.v3 with chart podinfo@6.5.4"
            history = [
                {
                    "name": release,
                    "namespace": namespace,
                    "version": v,
                    "status": "deployed" if v == 3 else "superseded",
                    "chartName": "podinfo",
                    "chartVersion": "6.5.4",
                    "appVersion": "6.5.4",
                    "configDigest": f"sha256:{sha(release, v)}",
                    "digest": f"sha256:{sha(release, 'd', v)}",
                    "firstDeployed": self.ago(days=3),
                    "lastDeployed": self.ago(days=3 - v),
                }
                for v in (3, 2, 1)
            ]
            yield {
                "apiVersion": API_VERSIONS["HelmRelease"],
                "kind": "HelmRelease",
                "metadata": {
                    "name": release,
                    "namespace": namespace,
                    "generation": 1,
                    "finalizers": ["finalizers.fluxcd.io"],
                },
                "spec": {
                    "interval": "10m",
                    "chart": {
                        "spec": {
                            "chart": "podinfo",
                            "version": "6.x",
                            "sourceRef": {"kind": "HelmRepository", "name": charts, "namespace": chart_ns},
                        }
                    },
                    "values": {"replicaCount": 2, "ingress": {"enabled": False}},
                },
                "status": {
                    "observedGeneration": 1,
                    "helmChart": f"{chart_ns}/{namespace}-{release}",
                    "lastAttemptedRevision": "6.5.4",
                    "lastAttemptedConfigDigest": f"sha256:{sha(release, 3)}",
                    "lastAttemptedGeneration": 1,
                    "conditions": [
                        self._cond(
                            "Ready",
                            "True",
                            "UpgradeSucceeded",
                            upgraded,
                            1,
                        ),
                        self._cond(
                            "Released",
                            "True",
                            "UpgradeSucceeded",
                            upgraded,
                            1,
                        ),
                    ],
                    "history": history,
                },
            }

    def _terraforms(self) -> Iterator[Obj]:
        for i in range(self.count["Terraform"]):
            name, namespace = f"tf-{i:05d}", self.ns(i)
            repo_ns, repo = self.repo(i)
            revision = self.git_revision(repo)
            yield {
                "apiVersion": API_VERSIONS["Terraform"],
                "kind": "Terraform",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "generation": 1,
                    "finalizers": ["finalizers.tf.contrib.fluxcd.io"],
                },
                "spec": {
                    "interval": "1h",
                    "approvePlan": "auto",
                    "path": f"./infra/{name}",
                    "sourceRef": {"kind": "GitRepository", "name": repo, "namespace": repo_ns},
                    "writeOutputsToSecret": {"name": f"{name}-outputs"},
                },
                "status": {
                    "observedGeneration": 1,
                    "lastAppliedRevision": revision,
                    "lastAttemptedRevision": revision,
                    "lastPlannedRevision": revision,
                    "conditions": [
                        self._cond(
                            "Ready", "True", "TerraformAppliedSucceed", f"Applied successfully: {revision}", 1
                        ),
                        self._cond(
                            "Apply", "True", "TerraformAppliedSucceed", f"Applied successfully: {revision}", 1
                        ),
                        self._cond(
                            "Plan", "True", "TerraformPlannedWithChanges", f"Plan generated: {revision}", 1
                        ),
                    ],
                    "plan": {"pending": "", "lastApplied": f"plan-{revision}"},
                    "availableOutputs": ["vpc_id", "subnet_ids"],
                },
            }
