"""A counter of published evaluations that coroutines can wait on.

A neutral module, like telemetry: the live model (kube layer) bumps it each time it publishes a
new evaluation, and the live stream (web layer) waits on it, so neither imports the other. One
shared future per generation, so waking every waiter costs the same with one or a hundred, and
bumping from synchronous code needs no lock.
"""

from __future__ import annotations

import asyncio


class Generations:
    """`count` is how many evaluations were published; `wait(seen)` returns once it moved past `seen`."""

    def __init__(self) -> None:
        self.count = 0
        self._next: asyncio.Future[None] | None = None

    def bump(self) -> None:
        self.count += 1
        if self._next is not None:
            if not self._next.done():
                self._next.set_result(None)
            self._next = None

    async def wait(self, seen: int) -> int:
        """The current count once it differs from `seen` (at once if it already does). Shielded:
        a waiter cancelled by its own timeout does not cancel the future the others share."""
        while self.count == seen:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._next)
        return self.count
