"""Admission denials by a policy engine, read from the error text a client got back.

A controller that keeps retrying a write a policy denies shows it only as text: in its Warning
Events, or in a Flux object's Ready/Released message. This module reads that text (pure: a
string in, the denial out) for the three engines whose formats are fixed upstream:

* OPA Gatekeeper: the API server wraps a webhook's answer as `admission webhook "<name>" denied
  the request: <message>` (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/
  plugin/webhook/errors/statuserror.go; servers newer than v1.34 prefix it with `<resource>
  "<name>" is forbidden: `, v1.34 does not, as tests/kube/test_admission_denials.py records);
  Gatekeeper's webhook `validation.gatekeeper.sh` answers one `[<constraint>] <message>` per
  denying constraint, joined by newlines (open-policy-agent/gatekeeper pkg/webhook/policy.go);
  releases before 3.4 wrote `[denied by <constraint>] <message>`.
* Kyverno: its validating webhooks (`validate.kyverno.svc`, `-fail`, `-ignore`), and the mutating
  one for image verification, answer `\\n\\nresource <Kind>/<ns>/<name> was blocked due to the
  following policies \\n\\n` and a YAML map of policy -> rule -> message (kyverno/kyverno
  pkg/webhooks/utils/block.go, GetBlockedMessages); releases before 1.10 wrote `\\n\\npolicy
  <Kind>/<ns>/<name> for resource violation: \\n\\n` and the same map.
* ValidatingAdmissionPolicy: `ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
  denied request: <message>` (or without the binding), wrapped as a Forbidden or Invalid status
  error `<resource> "<name>" is forbidden: ...` (kubernetes/kubernetes staging/src/k8s.io/
  apiserver/pkg/admission/plugin/policy/validating/dispatcher.go).

What is NOT a denial: a webhook that could not be called (`failed calling webhook`), any other
webhook's answer (mutating ones included, unless it is Kyverno's own "blocked" answer), an answer
that names no policy (Gatekeeper's internal errors), RBAC's Forbidden, schema validation errors.

Bounded for hostile text: only the first READ_LIMIT characters are read, at most MAX_DENIALS
policies kept, each message cut to MESSAGE_CUT characters; every pattern is linear.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

READ_LIMIT = 16384
MAX_DENIALS = 16
MESSAGE_CUT = 300


class Engine(enum.StrEnum):
    """The policy engine that denied; a fixed set (a metric label)."""

    GATEKEEPER = "gatekeeper"
    KYVERNO = "kyverno"
    VAP = "vap"


@dataclass(frozen=True, slots=True)
class Denial:
    """One policy that denied: a Gatekeeper constraint, a Kyverno policy's rule, a VAP binding."""

    engine: Engine
    policy: str
    rule: str
    """Kyverno's rule, the VAP binding; "" for Gatekeeper (a constraint has no rules)."""
    message: str


@dataclass(frozen=True, slots=True)
class Admission:
    """A denied request: what denied it and, when the text says, the object it was for."""

    denials: tuple[Denial, ...]
    webhook: str
    """The webhook's name; "" for a ValidatingAdmissionPolicy (the API server's own)."""
    denied: str
    """The object the request was for, as the text names it ("Service/payments/edge",
    or `services "edge"` when only the API server's prefix names it); "" when unnamed."""

    @property
    def engine(self) -> Engine:
        return self.denials[0].engine

    def policies(self) -> list[str]:
        """Each policy once, in the order the text names them."""
        return list(dict.fromkeys(d.policy for d in self.denials))


_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?"
"""An object name as policies are named (a DNS subdomain, upper case tolerated)."""
_OBJECT = r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}/(?:[a-z0-9][a-z0-9.-]{0,252})?/[A-Za-z0-9][A-Za-z0-9._:-]{0,252}"
"""`<Kind>/<namespace>/<name>`, the namespace empty for a cluster-scoped object."""
_WEBHOOK = re.compile(r'admission webhook "([^"\n]{1,253})" denied the request(?::|\s+without explanation)')
_VAP = re.compile(rf"ValidatingAdmissionPolicy '({_NAME})'(?: with binding '({_NAME})')? denied request: ?")
_FORBIDDEN = re.compile(r'([a-z0-9][a-z0-9.-]{0,252}) "([^"\n]{1,253})" is (?:forbidden|invalid): (?:: )?$')
"""The API server's prefix before a denial: `services "edge" is forbidden: ` (`... is invalid: : `)."""
_DRY_RUN = re.compile(rf"({_OBJECT}) dry-run failed")
"""kustomize-controller's `<Kind>/<ns>/<name> dry-run failed (<Reason>): ` (fluxcd/pkg ssa/errors)."""
_CONSTRAINT = re.compile(rf"\[(?:denied by )?({_NAME})\] ?")
_KYVERNO_HEAD = re.compile(
    rf"\s*(?:resource ({_OBJECT}) was blocked due to the following policies"
    rf"|policy ({_OBJECT}) for resource (?:violations?|errors?):)[ \t]*"
)
_KYVERNO_POLICY = re.compile(rf"({_NAME}):\s*$")
_KYVERNO_RULE = re.compile(rf"  ({_NAME}):(?: (.*))?$")
_KYVERNO_FLAT = re.compile(rf"\s*({_NAME}):\s+({_NAME}):\s+(.*)$", re.DOTALL)
"""The map with its newlines folded into spaces (as some tools relay it): one policy, one rule."""


def read_denial(message: str) -> Admission | None:
    """The policy denial in `message`, or None when it holds none (see the module docstring)."""
    text = message[:READ_LIMIT]
    for match in _WEBHOOK.finditer(text):
        found = _from_webhook(match.group(1), text[match.end() :], before=text[: match.start()])
        if found is not None:
            return found
    vap = _VAP.search(text)
    if vap is None:
        return None
    denial = Denial(Engine.VAP, vap.group(1), vap.group(2) or "", _cut(text[vap.end() :]))
    return Admission((denial,), "", _named(text[: vap.start()]))


def _from_webhook(webhook: str, body: str, *, before: str) -> Admission | None:
    if webhook == "validation.gatekeeper.sh":
        denials = _gatekeeper(body)
        return Admission(denials, webhook, _named(before)) if denials else None
    if webhook.startswith(("validate.kyverno.svc", "mutate.kyverno.svc")):
        head = _KYVERNO_HEAD.match(body)
        if head is None:
            return None  # a Kyverno answer that blocks on no policy: a mutation error, an internal one
        denials = _kyverno(body[head.end() :])
        resource = head.group(1) or head.group(2)
        return Admission(denials, webhook, resource) if denials else None
    return None


def _gatekeeper(body: str) -> tuple[Denial, ...]:
    """One denial per `[constraint] message` line; a line that starts no constraint continues the
    message before it (a Rego message may hold newlines)."""
    found: list[list[str]] = []
    for line in body.lstrip().split("\n"):
        match = _CONSTRAINT.match(line)
        if match is not None and len(found) < MAX_DENIALS:
            found.append([match.group(1), line[match.end() :]])
        elif found:
            found[-1][1] += "\n" + line
        else:
            return ()  # not Gatekeeper's deny format: an internal error, a partial answer
    return tuple(Denial(Engine.GATEKEEPER, name, "", _cut(text)) for name, text in found)


def _kyverno(body: str) -> tuple[Denial, ...]:
    """The policy -> rule -> message map as yaml.v2 writes it: a policy at column 0, its rules
    indented two spaces, a long or quoted message continued on lines indented further."""
    lines = body.strip("\n").split("\n")
    if len(lines) == 1:
        flat = _KYVERNO_FLAT.match(lines[0])
        return (Denial(Engine.KYVERNO, flat[1], flat[2], _cut(_unquote(flat[3]))),) if flat else ()
    found: list[list[str]] = []
    policy = ""
    for line in lines:
        rule = _KYVERNO_RULE.match(line)
        if rule is not None and policy and len(found) < MAX_DENIALS:
            found.append([policy, rule.group(1), rule.group(2) or ""])
            continue
        head = _KYVERNO_POLICY.match(line)
        if head is not None:
            policy = head.group(1)
        elif found and line.startswith("    "):
            found[-1][2] += " " + line.strip()
    return tuple(Denial(Engine.KYVERNO, p, r, _cut(_unquote(m))) for p, r, m in found)


def _unquote(value: str) -> str:
    """A YAML scalar as yaml.v2 quotes it: 'single' (with '' for a quote) or "double"."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _named(before: str) -> str:
    """The denied object as the text before the denial names it: kustomize-controller's dry-run
    prefix first (kind, namespace and name), else the API server's `<resource> "<name>"`."""
    near = before[-600:]
    dry_runs = [match.group(1) for match in _DRY_RUN.finditer(near)]
    if dry_runs:
        return dry_runs[-1]
    prefix = _FORBIDDEN.search(near)
    return f'{prefix.group(1)} "{prefix.group(2)}"' if prefix else ""


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CUT else text[: MESSAGE_CUT - 3] + "..."
