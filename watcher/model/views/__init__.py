"""Views: what the commands and the page ask of an evaluation and the store, after the fact.

Enters: an Evaluation (and the store it was made from). Leaves: answers for one reader each:
a stack's rows and verdicts for the page (stacks.py, row_verdicts.py), what breaks if an object
goes away (impact.py, impact_tree.py), whether a stack converged at a revision for `wait`
(convergence.py, targets.py, subtree.py), what changed between evaluations (transitions.py,
timeline.py), and how a command-line target names a kind (spelling.py).

The engine never calls these: they read its output, so nothing here can slow an evaluation.
"""
