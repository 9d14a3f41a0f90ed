"""Store: the objects the engine holds, their graph, and what it keeps between evaluations.

Enters: projected (or packed) objects and the rules' answers about them. Leaves: answers about
neighbours at O(answer), never O(cluster): the object store and its reverse indexes (graph.py),
which workload and release an object belongs to (owners.py), the controllers tracked with their
Pods and verdicts (tracking.py), each cache's next deadline (deadlines.py), sorted output tables
(table.py), objects deleted moments ago (orphans.py), the StatusStale satellites kept out of
correlation (satellites.py), and the working set one correlation pass shares (working.py).
"""
