"""Correlation: candidate findings in, one root per cause out, each with its blast radius.

Enters: the candidates of every object (rules/ and cluster/), the store, controller verdicts.
Leaves: findings linked to their root (correlator.py's steps: controllers down, sources,
dependencies, releases.py's releases over failing workloads, policies.py's denials over their
stacks), then roots.py's finish: each finding's root_cause and each root's affected subjects.
Runs over findings, not objects, so its cost follows the number of problems.
"""
