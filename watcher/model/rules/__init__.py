"""Rules: what one object says is wrong, judged alone (with its source, through the Ctx).

Enters: one projected object and a Ctx (the clock, the config, a lookup of other objects).
Leaves: candidate findings, each with the next moment a threshold could change it, and the
object's row (its health and revision, rows.py). The dispatch table (dispatch.py) sends each
kind to its family: kstatus (kstatus.py, upstream's order), the GitOps rules (gitops_rules.py),
workloads and their Pods (workloads.py, workload_rule.py, words in workload_words.py),
controllers' liveness (controllers.py), Events (events.py) and policy denials (denials.py,
policy.py), field managers that fight (writers.py).

Nothing here reads the store: what needs many objects at once lives in cluster/ and correlate/.
"""
