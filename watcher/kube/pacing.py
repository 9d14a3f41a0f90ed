"""How long the live loop waits before its next pass, from what the last ones cost.

A pass costs two things. Its changes (each object judged again, the components they reach
correlated) cost about the same whatever the batching: a change is paid for once, now or a
little later. The rest (the evaluation's bookkeeping, whatever the pass finds it must redo as
a whole) is paid once per pass, and only that is what waiting saves. So the wait is paced on
that part alone: a pass whose cost is all its changes' is followed almost at once (the issue's
"evaluate as soon as a change arrives"), and the bookkeeping of passes stays near 1% of a core.

What a change costs is not known in advance (it depends on the kind, the size of the cluster,
the machine): `Pacing` learns it from the passes themselves, as the slope of a line fitted to
each pass's cost against its number of changes, recent passes weighing most. Under churn the
batches vary (arrivals are not regular, and each wait sets the next batch), which is what makes
the slope readable; until it is, a pass's whole cost counts, which waits longer, never less.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Line:
    """A least-squares line of cost against changes over past passes, each weighing MEMORY times
    the one after it (an exponentially weighted fit: a few dozen passes count)."""

    weight: float = 0.0
    changes: float = 0.0
    cost: float = 0.0
    changes_squared: float = 0.0
    changes_cost: float = 0.0

    MEMORY = 0.95

    def add(self, changes: int, cost: float) -> None:
        keep = self.MEMORY
        self.weight = self.weight * keep + 1.0
        self.changes = self.changes * keep + changes
        self.cost = self.cost * keep + cost
        self.changes_squared = self.changes_squared * keep + changes * changes
        self.changes_cost = self.changes_cost * keep + changes * cost

    def slope(self) -> float:
        """Cost per change; 0 while the batches have not varied enough to tell (or it is
        negative: noise), so that the whole of a pass's cost counts."""
        spread = self.weight * self.changes_squared - self.changes * self.changes
        if spread <= 1e-9 * self.weight * self.weight:
            return 0.0
        return max(0.0, (self.weight * self.changes_cost - self.changes * self.cost) / spread)


class Pacing:
    """When the next pass may start, from the last pass's cost beyond what its changes cost.

    A change that arrives after a quiet spell is evaluated at once (`debounce`, the least wait
    after a change, is 0 by default). Under churn the next pass waits SHARE times the part of
    the last pass's cost its changes do not explain (its cost minus its changes times the learnt cost of
    one), so that part takes at most 1/(SHARE+1) of a core however fast changes come; a pass that
    ran over everything (a controller's verdict changed) is almost all that part, and is followed
    by a wait in proportion. Yet the next pass starts at most `longest` after the last one began
    (a pass that took more than half of `longest` waits its own duration, so costly passes never
    run back to back; no change waits more than `longest` after waking). Costs are CPU time
    (thread time), not wall time, so a busy shared machine does not slow the passes down further.
    """

    SHARE = 99
    """Wait 99 times a pass's cost beyond its changes': that part stays under 1% of a core
    (BENCHMARKS.md, "Pacing at 1% of a core"; "Pacing on what batching saves")."""

    def __init__(self, *, debounce: float, longest: float) -> None:
        self.debounce, self.longest = debounce, longest
        self._next = 0.0
        """The monotonic moment from which a pass costs no more than its share."""
        self._line = _Line()

    def delay(self, now: float) -> float:
        """Seconds to wait at `now`, when a change has just woken the loop."""
        return max(self.debounce, min(self._next - now, self.longest))

    def passed(self, *, started: float, ended: float, cost: float, changes: int) -> None:
        """A pass ran from `started` to `ended` (monotonic), took `cost` CPU seconds, and
        evaluated `changes` changes (events and reads that arrived since the pass before)."""
        took = ended - started
        line = self._line
        line.add(changes, cost)
        beyond = max(0.0, cost - changes * line.slope())
        self._next = ended + min(beyond * self.SHARE, max(self.longest - took, took))
