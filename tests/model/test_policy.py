"""Reading policy denials from the text controllers get back: one named case per format.

The strings are the formats upstream writes, with names and messages from the upstream tests
and documentation named per case (facts, not code):
  * the API server's webhook wrapping: kubernetes/kubernetes
    staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror{,_test}.go
    (`admission webhook %q denied the request: %s`, newer servers prefixed `<resource> %q is forbidden: `);
  * Gatekeeper: open-policy-agent/gatekeeper pkg/webhook/policy.go (`[%s] %s` per constraint, joined
    by "\n"; `[denied by %s]` before 3.4, as in its older docs);
  * Kyverno: kyverno/kyverno pkg/webhooks/utils/block.go GetBlockedMessages (`\n\nresource %s was blocked
    due to the following policies \n\n` + yaml.v2 of policy -> rule -> message; before 1.10
    `\n\npolicy %s for resource violation: \n\n`);
  * ValidatingAdmissionPolicy: kubernetes/kubernetes
    staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/dispatcher.go and the
    expected errors of test/integration/apiserver/cel/validatingadmissionpolicy_test.go;
  * the wrappers: fluxcd/pkg ssa/errors/errors.go (`%s dry-run failed (%s): %s`), helm-controller's
    `Helm install failed for release %s with chart %s: %s`, a controller's reconcile error.
"""

from __future__ import annotations

import pytest

from watcher.model.rules.policy import MAX_DENIALS, MESSAGE_CUT, Admission, Engine, read_denial

GK = 'admission webhook "validation.gatekeeper.sh" denied the request: '
KYVERNO = 'admission webhook "validate.kyverno.svc-fail" denied the request: '
BLOCKED = "\n\nresource Deployment/default/nginx-deployment was blocked due to the following policies \n\n"
VAP = (
    "namespaces \"test-foobar\" is forbidden: ValidatingAdmissionPolicy 'validate-namespace-suffix' "
    "with binding "
    "'validate-namespace-suffix-binding' denied request: failed expression: "
    "object.metadata.name.endsWith('k8s')"
)


def denial(
    engine: Engine, *policies: tuple[str, str, str], denied: str = "", webhook: str = ""
) -> dict[str, object]:
    """What a test expects: the engine, (policy, rule, message) per denial, the denied object, the webhook."""
    return {"engine": engine, "denials": list(policies), "denied": denied, "webhook": webhook}


def shape(found: Admission | None) -> dict[str, object] | None:
    if found is None:
        return None
    return {
        "engine": found.engine,
        "denials": [(d.policy, d.rule, d.message) for d in found.denials],
        "denied": found.denied,
        "webhook": found.webhook,
    }


GATEKEEPER_CASES = [
    pytest.param(
        GK + '[ns-must-have-gk] you must provide labels: {"gatekeeper"}',
        denial(
            Engine.GATEKEEPER,
            ("ns-must-have-gk", "", 'you must provide labels: {"gatekeeper"}'),
            webhook="validation.gatekeeper.sh",
        ),
        id="gatekeeper-one-constraint",
    ),
    pytest.param(
        'Error from server (Forbidden): error when creating "privileged.yaml": ' + GK + "[denied by "
        "azurepolicy-container-no-privilege-00edd87bf80f443fa51d10910255adbc4013d590bec3d290b4f48725d4dfbdf9]"
        ' Privileged container is not allowed: nginx-privileged, securityContext: {"privileged": true}',
        denial(
            Engine.GATEKEEPER,
            (
                "azurepolicy-container-no-privilege-00edd87bf80f443fa51d10910255adbc4013d590bec3d290b4f48725d4dfbdf9",
                "",
                "Privileged container is not allowed: nginx-privileged, securityContext: "
                '{"privileged": true}',
            ),
            webhook="validation.gatekeeper.sh",
        ),
        id="gatekeeper-before-3.4-denied-by",
    ),
    pytest.param(
        'pods "web-7d9f" is forbidden: '
        + GK
        + "[psp-privileged-container] Privileged container is not allowed: web\n"
        + '[psp-host-filesystem] HostPath volume {"name": "data"} is not allowed, pod: web-7d9f.\n'
        + "Allowed path: [{'pathPrefix': '/foo', 'readOnly': true}]",
        denial(
            Engine.GATEKEEPER,
            ("psp-privileged-container", "", "Privileged container is not allowed: web"),
            (
                "psp-host-filesystem",
                "",
                'HostPath volume {"name": "data"} is not allowed, pod: web-7d9f.\n'
                "Allowed path: [{'pathPrefix': '/foo', 'readOnly': true}]",
            ),
            denied='pods "web-7d9f"',
            webhook="validation.gatekeeper.sh",
        ),
        id="gatekeeper-two-constraints-and-a-multi-line-message",
    ),
    pytest.param(
        'failed to ensure Service checkout/storefront-lb: services "storefront-lb" is forbidden: '
        + GK
        + "[deny-public-loadbalancers] Service type LoadBalancer is not allowed [in checkout]",
        denial(
            Engine.GATEKEEPER,
            ("deny-public-loadbalancers", "", "Service type LoadBalancer is not allowed [in checkout]"),
            denied='services "storefront-lb"',
            webhook="validation.gatekeeper.sh",
        ),
        id="gatekeeper-in-a-controller-reconcile-error-with-brackets-in-the-message",
    ),
    pytest.param(
        "Helm install failed for release apps/edge with chart edge@1.2.0: "
        + GK
        + "[deny-public-loadbalancers] Service type LoadBalancer is not allowed",
        denial(
            Engine.GATEKEEPER,
            ("deny-public-loadbalancers", "", "Service type LoadBalancer is not allowed"),
            webhook="validation.gatekeeper.sh",
        ),
        id="gatekeeper-in-a-helm-controller-install-failure",
    ),
]

KYVERNO_CASES = [
    pytest.param(
        KYVERNO
        + BLOCKED
        + "james-disallow-privileged-containers:\n"
        + "  check-privileged-james-1: 'validation error: Privileged containers are not allowed.\n"
        + "    rule check-privileged-james-1 failed at path /spec/containers/'\n"
        + "james-require-labels:\n"
        + "  check-required-labels-james-1: 'validation error: Required labels (app, version,\n"
        + "    environment) must be present. rule check-required-labels-james-1 failed at path\n"
        + "    /metadata/labels/'\n",
        denial(
            Engine.KYVERNO,
            (
                "james-disallow-privileged-containers",
                "check-privileged-james-1",
                "validation error: Privileged containers are not allowed. "
                "rule check-privileged-james-1 failed at path /spec/containers/",
            ),
            (
                "james-require-labels",
                "check-required-labels-james-1",
                "validation error: Required labels (app, version, environment) must be present. "
                "rule check-required-labels-james-1 failed at path /metadata/labels/",
            ),
            denied="Deployment/default/nginx-deployment",
            webhook="validate.kyverno.svc-fail",
        ),
        id="kyverno-two-policies-with-folded-quoted-messages",
    ),
    pytest.param(
        'error: failed to create deployment: admission webhook "validate.kyverno.svc" denied the request:\n\n'
        "resource Deployment/default/inflate was blocked due to the following policies\n\n"
        "require-labels:\n"
        "  autogen-check-for-labels: 'validation error: The label `app.kubernetes.io/name`\n"
        "    is required. Rule autogen-check-for-labels failed at path "
        "/spec/template/metadata/labels/app.kubernetes.io/name/'\n",
        denial(
            Engine.KYVERNO,
            (
                "require-labels",
                "autogen-check-for-labels",
                "validation error: The label `app.kubernetes.io/name` is required. Rule "
                "autogen-check-for-labels "
                "failed at path /spec/template/metadata/labels/app.kubernetes.io/name/",
            ),
            denied="Deployment/default/inflate",
            webhook="validate.kyverno.svc",
        ),
        id="kyverno-validate-svc-autogen-rule",
    ),
    pytest.param(
        'admission webhook "validate.kyverno.svc-fail" denied the request: \n\n'
        "policy Pod/default/nginx for resource violation: \n\n"
        "disallow-latest-tag:\n  validate-image-tag: 'validation error: Using a mutable image tag "
        "e.g. ''latest''\n"
        "    is not allowed. rule validate-image-tag failed at path /spec/containers/0/image/'\n",
        denial(
            Engine.KYVERNO,
            (
                "disallow-latest-tag",
                "validate-image-tag",
                "validation error: Using a mutable image tag e.g. 'latest' is not allowed. "
                "rule validate-image-tag failed at path /spec/containers/0/image/",
            ),
            denied="Pod/default/nginx",
            webhook="validate.kyverno.svc-fail",
        ),
        id="kyverno-before-1.10-policy-for-resource-violation",
    ),
    pytest.param(
        "Deployment/apps/web dry-run failed (Forbidden): admission webhook "
        '"validate.kyverno.svc-fail" denied the '
        "request: resource Deployment/apps/web was blocked due to the following policies "
        "disallow-privilege-escalation:"
        " autogen-privilege-escalation: validation error: Privilege escalation is disallowed.",
        denial(
            Engine.KYVERNO,
            (
                "disallow-privilege-escalation",
                "autogen-privilege-escalation",
                "validation error: Privilege escalation is disallowed.",
            ),
            denied="Deployment/apps/web",
            webhook="validate.kyverno.svc-fail",
        ),
        id="kyverno-in-a-kustomize-dry-run-with-newlines-folded",
    ),
    pytest.param(
        'admission webhook "mutate.kyverno.svc-fail" denied the request:\n\n'
        "resource Pod/default/demo was blocked due to the following policies\n\n"
        "sigstore-image-verification:\n"
        "  sigstore-image-verification: 'failed to verify image docker.io/nginx:latest: "
        ".attestors[0].entries[0].keyless:\n"
        "    sigstore bundle verification failed: no matching signatures found'\n",
        denial(
            Engine.KYVERNO,
            (
                "sigstore-image-verification",
                "sigstore-image-verification",
                "failed to verify image docker.io/nginx:latest: .attestors[0].entries[0].keyless: "
                "sigstore bundle verification failed: no matching signatures found",
            ),
            denied="Pod/default/demo",
            webhook="mutate.kyverno.svc-fail",
        ),
        id="kyverno-image-verification-blocks-through-its-mutating-webhook",
    ),
    pytest.param(
        'admission webhook "validate.kyverno.svc-fail" denied the request: \n\n'
        "resource Namespace//team-a was blocked due to the following policies \n\n"
        "require-ns-owner:\n  check-owner: validation error: every namespace needs an owner label\n",
        denial(
            Engine.KYVERNO,
            ("require-ns-owner", "check-owner", "validation error: every namespace needs an owner label"),
            denied="Namespace//team-a",
            webhook="validate.kyverno.svc-fail",
        ),
        id="kyverno-cluster-scoped-resource",
    ),
]

VAP_CASES = [
    pytest.param(
        VAP,
        denial(
            Engine.VAP,
            (
                "validate-namespace-suffix",
                "validate-namespace-suffix-binding",
                "failed expression: object.metadata.name.endsWith('k8s')",
            ),
            denied='namespaces "test-foobar"',
        ),
        id="vap-with-binding-forbidden",
    ),
    pytest.param(
        "The deployments \"envoy\" is invalid: : ValidatingAdmissionPolicy 'demo-policy.example.com' "
        "with binding "
        "'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
        denial(
            Engine.VAP,
            (
                "demo-policy.example.com",
                "demo-binding-test.example.com",
                "failed expression: object.spec.replicas <= 5",
            ),
            denied='deployments "envoy"',
        ),
        id="vap-invalid-as-kubectl-prints-it",
    ),
    pytest.param(
        'Deployment/apps/web dry-run failed (Invalid): deployments.apps "web" is forbidden: '
        "ValidatingAdmissionPolicy 'max-replicas' denied request: failed expression: "
        "object.spec.replicas <= 5",
        denial(
            Engine.VAP,
            ("max-replicas", "", "failed expression: object.spec.replicas <= 5"),
            denied="Deployment/apps/web",
        ),
        id="vap-without-binding-in-a-kustomize-dry-run",
    ),
]

NOT_DENIALS = [
    pytest.param(
        'Internal error occurred: failed calling webhook "validation.gatekeeper.sh": failed to call '
        "webhook: Post "
        '"https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s": context '
        "deadline exceeded",
        id="gatekeeper-webhook-could-not-be-called",
    ),
    pytest.param(
        'Internal error occurred: failed calling webhook "validate.kyverno.svc-fail": failed to call '
        "webhook: Post "
        '"https://kyverno-svc.kyverno.svc:443/validate/fail?timeout=10s": no endpoints available for service '
        '"kyverno-svc"',
        id="kyverno-webhook-could-not-be-called",
    ),
    pytest.param(
        'admission webhook "mutate.kyverno.svc-fail" denied the request: mutation policy add-labels '
        "error: failed to "
        "apply policy add-labels rules [add-team]",
        id="kyverno-mutation-error",
    ),
    pytest.param(
        'admission webhook "mutation.gatekeeper.sh" denied the request: [assign-team] failed to mutate',
        id="gatekeeper-mutating-webhook",
    ),
    pytest.param(
        'admission webhook "validation.gatekeeper.sh" denied the request: unable to get namespace: timeout',
        id="gatekeeper-internal-error-names-no-constraint",
    ),
    pytest.param(
        'admission webhook "validation.gatekeeper.sh" denied the request without explanation',
        id="gatekeeper-without-explanation",
    ),
    pytest.param(
        'admission webhook "webhook.cert-manager.io" denied the request: spec.dnsNames: Required value',
        id="another-webhook",
    ),
    pytest.param(
        'Service "edge" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and '
        "65535, inclusive",
        id="plain-validation-error",
    ),
    pytest.param(
        'configmaps "feature-flags" is forbidden: User '
        '"system:serviceaccount:flux-system:deploy-config" cannot patch '
        'resource "configmaps" in API group "" in the namespace "platform"',
        id="rbac-forbidden",
    ),
    pytest.param(
        "Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas': failed",
        id="vap-warning-is-no-denial",
    ),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize(("message", "expected"), [*GATEKEEPER_CASES, *KYVERNO_CASES, *VAP_CASES])
def test_a_denial_names_its_engine_policies_and_object(message: str, expected: dict[str, object]) -> None:
    assert shape(read_denial(message)) == expected


@pytest.mark.parametrize("message", NOT_DENIALS)
def test_what_is_not_a_policy_denial_reads_as_none(message: str) -> None:
    assert read_denial(message) is None


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("[" * 200_000, id="brackets"),
        pytest.param(GK + "[" * 200_000, id="gatekeeper-then-brackets"),
        pytest.param(KYVERNO + BLOCKED + ("a:\n  " * 50_000), id="kyverno-endless-map"),
        pytest.param("ValidatingAdmissionPolicy '" + "a" * 300_000, id="vap-unterminated-name"),
        pytest.param(
            ('services "' + "a" * 250 + '" is forbidden: ') * 2_000 + GK + "[x] y", id="long-prefixes"
        ),
        pytest.param("a/" * 100_000 + " dry-run failed: " + GK + "[x] y", id="slashes-before-a-dry-run"),
    ],
)
def test_hostile_text_is_read_quickly_and_bounded(message: str) -> None:
    found = read_denial(message)
    if found is not None:
        assert len(found.denials) <= MAX_DENIALS
        assert all(len(d.message) <= MESSAGE_CUT for d in found.denials)


def test_many_constraints_keep_the_first_ones_and_messages_are_cut() -> None:
    body = "\n".join(f"[constraint-{n}] " + "x" * 1000 for n in range(40))

    found = read_denial(GK + body)

    assert found is not None
    assert [d.policy for d in found.denials] == [f"constraint-{n}" for n in range(MAX_DENIALS)]
    assert {len(d.message) for d in found.denials} == {MESSAGE_CUT}


def test_unicode_messages_are_kept_as_written() -> None:
    found = read_denial(GK + "[team-a] Dienst „öffentlich“ ist verboten 🚫")

    assert found is not None
    assert found.denials[0].message == "Dienst „öffentlich“ ist verboten 🚫"


def test_a_bracket_that_is_no_constraint_name_is_not_gatekeepers_format() -> None:
    """Constraint names are DNS subdomains (lowercase ASCII): `[team-ä]` or `[]` is some other text."""
    assert read_denial(GK + "[team-ä] verboten") is None
    assert read_denial(GK + "[] verboten") is None


def test_a_truncated_kyverno_answer_keeps_the_rules_it_has() -> None:
    message = (KYVERNO + BLOCKED + "require-labels:\n  check-team: 'validation error: label team is requ")[
        :1024
    ]

    found = read_denial(message)

    assert found is not None
    assert [(d.policy, d.rule) for d in found.denials] == [("require-labels", "check-team")]
