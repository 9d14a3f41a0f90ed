"""Cluster rules: what no single object shows, judged across the store.

Enters: each object change (after the per-object rules) and the store. Leaves: findings and
reports that need several objects or the model's memory: a prune that left an object behind
(prune.py), a CRD installed by a stack that does not need it (crd_risk.py), a CRD removed under
its objects (removals.py), policy audits attributed to stacks (audits.py, compliance.py). The
engine feeds them all through one place (rules.py), which also holds ConflictingWriters.
"""
