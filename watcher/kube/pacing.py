"""How long the live loop waits before its next pass, from what the last ones cost.

A pass costs two things. Its changes (each object judged again, the components they reach
correlated) cost about the same whatever the batching: a change is paid for once, now or a
little later. The rest (the evaluation's bookkeeping, whatever the pass finds it must redo as
a whole) is paid once per pass, and only that is what waiting saves. So the wait is paced on
that part alone: a pass whose cost is all its changes' is followed almost at once (the issue's
"evaluate as soon as a change arrives"), and the bookkeeping of passes stays near 1% of a core.

What a change costs is not known in advance (it depends on the kind, the size of the cluster,
the machine, how many findings its component holds): `Pacing` learns the part of a pass no
change explains from the passes themselves, as the intercept of a line fitted to each pass's
cost against its number of changes, recent passes weighing most. The fit weighs each pass by
1/changes² (a pass's noise grows with its cost), so the pass over a whole relist does not tilt
it, and leaves out passes with no change (a tick: they skip the work a change starts). The
batches must vary for the line to be read: under steady churn they would not (each wait sets
the next batch), so every other wait is half as long; until the line is read, a pass's whole
cost counts, which waits longer, never less. A pass that costs far more than the line says (it
ran over everything: a controller's verdict changed) is kept out of the fit, and what it cost
beyond the line is waited for in proportion.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Fit:
    """Cost = fixed + changes x per_change, fitted by least squares weighted 1/changes² (an
    ordinary fit of cost/changes against 1/changes, whose slope is `fixed`), each pass weighing
    MEMORY times the one after it (about a hundred passes count: a few seconds under churn; with
    twenty, single passes' noise moved the intercept at 50k between -8 and 3.5 ms, BENCHMARKS.md)."""

    weight: float = 0.0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    xy: float = 0.0

    MEMORY = 0.99

    def add(self, changes: int, cost: float) -> None:
        if changes < 1:
            return
        x, y, keep = 1.0 / changes, cost / changes, self.MEMORY
        self.weight = self.weight * keep + 1.0
        self.x = self.x * keep + x
        self.y = self.y * keep + y
        self.xx = self.xx * keep + x * x
        self.xy = self.xy * keep + x * y

    def line(self) -> tuple[float, float] | None:
        """(fixed, per_change): what a pass costs that no change explains, and what each change
        adds; None while the batches have not varied enough to tell."""
        spread = self.weight * self.xx - self.x * self.x
        if self.weight < 2.0 or spread <= 1e-12 * self.weight * self.weight:
            return None
        fixed = (self.weight * self.xy - self.x * self.y) / spread
        return fixed, (self.y - fixed * self.x) / self.weight


class Pacing:
    """When the next pass may start, from the last pass's cost beyond what its changes cost.

    A change that arrives after a quiet spell is evaluated at once (`debounce`, the least wait
    after a change, is 0 by default). Under churn the next pass waits SHARE times what a pass
    costs that its changes do not explain (the fit's intercept; for a pass far above the line,
    its cost minus its changes times the fitted cost of one), so that part takes at most about
    1/(SHARE+1) of a core however fast changes come; every other wait is half of that, so the
    batches vary enough for the fit to be read. Yet the next pass starts at most `longest` after
    the last one began (a pass that took more than half of `longest` waits its own duration, so
    costly passes never run back to back; no change waits more than `longest` after waking).
    Costs are CPU time (thread time), not wall time, so a busy shared machine does not slow the
    passes down further.
    """

    SHARE = 99
    """Wait 99 times a pass's cost beyond its changes': that part stays under 1% of a core
    (BENCHMARKS.md, "Pacing at 1% of a core"; "Pacing on what batching saves")."""

    OUTLIER = 3.0
    """A pass costing more than this many times the line's prediction ran over more than its
    changes: it is left out of the fit. OUTLIERS of them in a row mean the costs moved (an
    incident began, the cluster grew): the fit starts again from them."""
    OUTLIERS = 3

    def __init__(self, *, debounce: float, longest: float) -> None:
        self.debounce, self.longest = debounce, longest
        self._next = 0.0
        """The monotonic moment from which a pass costs no more than its share."""
        self._fit = _Fit()
        self._halve = False
        self._outliers = 0

    def delay(self, now: float) -> float:
        """Seconds to wait at `now`, when a change has just woken the loop."""
        return max(self.debounce, min(self._next - now, self.longest))

    def passed(self, *, started: float, ended: float, cost: float, changes: int) -> None:
        """A pass ran from `started` to `ended` (monotonic), took `cost` CPU seconds, and
        evaluated `changes` changes (events and reads that arrived since the pass before)."""
        took = ended - started
        line = self._fit.line()
        if line is None:
            self._fit.add(changes, cost)
            beyond = cost
        else:
            fixed, per_change = line
            if cost <= self.OUTLIER * (max(fixed, 0.0) + per_change * changes):
                self._fit.add(changes, cost)
                self._outliers = 0
                beyond = min(cost, max(0.0, fixed))
            else:
                beyond = min(cost, cost - per_change * changes)
                if changes:
                    self._outliers += 1
                if self._outliers == self.OUTLIERS:
                    self._fit, self._outliers = _Fit(), 0
        share = self.SHARE / 2 if self._halve else self.SHARE
        if changes:
            self._halve = not self._halve
        self._next = ended + min(beyond * share, max(self.longest - took, took))
