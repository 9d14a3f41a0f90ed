"""Policy denials as the real kube-apiserver words them, read back by stalewatch.

The API server, not this test, writes the text: a real ValidatingAdmissionPolicy denies a
LoadBalancer Service, and a validating webhook served here answers the way Gatekeeper's and
Kyverno's do (the body of their answer as open-policy-agent/gatekeeper pkg/webhook/policy.go and
kyverno/kyverno pkg/webhooks/utils/block.go build it), which the API server wraps in its own
`admission webhook "<name>" denied the request: ` and `services "<name>" is forbidden: `. The
Status message a controller then gets is what its Warning Event carries: parsed, and through the
model, it is PolicyDenied.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.controlplane.harness import ControlPlane, free_port
from tests.model.builders import MIN, NOW, event, run
from watcher.model.rules.policy import Engine, read_denial
from watcher.model.types import FindingType

pytestmark = pytest.mark.cluster

CONSTRAINT = "deny-public-loadbalancers"
GATEKEEPER_ANSWER = f"[{CONSTRAINT}] Service type LoadBalancer is not allowed; use the shared ingress"
KYVERNO_ANSWER = (
    "\n\nresource Service/{namespace}/storefront-lb was blocked due to the following policies \n\n"
    "restrict-service-types:\n  no-loadbalancer: 'validation error: Service type LoadBalancer is not "
    "allowed.\n"
    "    rule no-loadbalancer failed at path /spec/type/'\n"
)


def _answers(namespace_of: dict[str, str]) -> type[BaseHTTPRequestHandler]:
    class Webhook(BaseHTTPRequestHandler):
        """Denies every request, in the words of the engine its path names (/gatekeeper, /kyverno)."""

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            engine = urllib.parse.urlsplit(self.path).path.strip("/")
            message = (
                GATEKEEPER_ANSWER
                if engine == "gatekeeper"
                else KYVERNO_ANSWER.format(namespace=namespace_of[engine])
            )
            body = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": request["uid"],
                    "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": message},
                },
            }
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    return Webhook


@pytest.fixture
def namespaces(control_plane: ControlPlane) -> Iterator[dict[str, str]]:
    """One fresh namespace per engine."""
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    names = {engine: f"{prefix}-{engine}" for engine in ("gatekeeper", "kyverno", "vap")}
    for name in names.values():
        control_plane.kubectl("create", "namespace", name)
    yield names
    for name in names.values():
        control_plane.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def policies(control_plane: ControlPlane, namespaces: dict[str, str]) -> Iterator[None]:
    """The webhooks (served here, over TLS with the test PKI's serving certificate for 127.0.0.1) and
    a ValidatingAdmissionPolicy, each bound to its own namespace only; removed afterwards."""
    assert control_plane.pki is not None
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), _answers(namespaces))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(str(control_plane.pki.serving_cert), str(control_plane.pki.serving_key))
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bundle = base64.b64encode(control_plane.pki.ca_cert.read_bytes()).decode()
    suffix = namespaces["vap"]
    webhooks = [
        _webhook(name, f"https://127.0.0.1:{port}/{engine}", bundle, namespaces[engine], suffix)
        for engine, name in (
            ("gatekeeper", "validation.gatekeeper.sh"),
            ("kyverno", "validate.kyverno.svc-fail"),
        )
    ]
    vap, binding = _validating_admission_policy(CONSTRAINT, namespaces["vap"], suffix)
    objects = [*webhooks, vap, binding]
    control_plane.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    try:
        yield
    finally:
        for obj in objects:
            control_plane.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false")
        server.shutdown()
        server.server_close()


def _webhook(name: str, url: str, bundle: str, namespace: str, suffix: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"{name.split('.')[0]}-{suffix}"},
        "webhooks": [
            {
                "name": name,
                "clientConfig": {"url": url, "caBundle": bundle},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["services"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


def _validating_admission_policy(name: str, namespace: str, suffix: str) -> tuple[dict[str, Any], ...]:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"{name}-{suffix}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["services"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "object.spec.type != 'LoadBalancer'",
                    "message": "Service type LoadBalancer is not allowed",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"{name}-{namespace}"},
        "spec": {
            "policyName": f"{name}-{suffix}",
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return policy, binding


def denial_text(control_plane: ControlPlane, namespace: str) -> str:
    """The Status message the API server answers a LoadBalancer Service create with: what
    client-go's error says, and so what a controller's Warning Event says. Policies take effect
    once the API server has seen them, so the create is retried until it is denied."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "storefront-lb"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]},
    }
    url = f"{control_plane.url}/api/v1/namespaces/{namespace}/services"
    deadline = time.monotonic() + 30
    while True:
        request = urllib.request.Request(
            url,
            data=json.dumps(service).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, context=control_plane.admin_ssl(), timeout=10):
                pass
        except urllib.error.HTTPError as error:
            return str(json.loads(error.read())["message"])
        control_plane.kubectl("delete", "service", "storefront-lb", "-n", namespace)
        assert time.monotonic() < deadline, f"a LoadBalancer Service in {namespace} was never denied"
        time.sleep(0.3)


@pytest.mark.usefixtures("policies")
@pytest.mark.parametrize(
    ("engine", "policy", "rule", "denied"),
    [
        # v1.34 wraps a webhook's answer without the `services "<name>" is forbidden: ` prefix
        # that newer API servers add: Gatekeeper's answer then names no object.
        pytest.param(Engine.GATEKEEPER, CONSTRAINT, "", "", id="gatekeeper"),
        pytest.param(
            Engine.KYVERNO,
            "restrict-service-types",
            "no-loadbalancer",
            "Service/{ns}/storefront-lb",
            id="kyverno",
        ),
        pytest.param(
            Engine.VAP,
            f"{CONSTRAINT}-{{ns}}",
            f"{CONSTRAINT}-{{ns}}",
            'services "storefront-lb"',
            id="validating-admission-policy",
        ),
    ],
)
def test_the_api_servers_denial_names_the_engine_the_policy_and_the_service(
    control_plane: ControlPlane,
    namespaces: dict[str, str],
    engine: Engine,
    policy: str,
    rule: str,
    denied: str,
) -> None:
    namespace = namespaces[str(engine)]
    text = denial_text(control_plane, namespace)

    found = read_denial(text)

    assert found is not None, text
    [denial] = found.denials
    assert (denial.engine, denial.policy, denial.rule) == (
        engine,
        policy.format(ns=namespace),
        rule.format(ns=namespace),
    )
    assert found.denied == denied.format(ns=namespace)
    assert "LoadBalancer is not allowed" in denial.message


@pytest.mark.usefixtures("policies")
def test_a_controllers_event_with_the_real_denial_is_policy_denied(
    control_plane: ControlPlane, namespaces: dict[str, str]
) -> None:
    text = denial_text(control_plane, namespaces["gatekeeper"])
    reconcile_error = event(
        "storefront.1",
        "checkout",
        kind="EdgeGateway",
        involved="storefront",
        reason="ReconcileError",
        message=f"failed to ensure Service checkout/storefront-lb: {text}",
        count=40,
        first=30 * MIN,
        last=MIN,
    )

    [found] = run(reconcile_error, now=NOW).findings

    assert (found.type, found.evidence["policies"]) == (FindingType.POLICY_DENIED, [CONSTRAINT])
