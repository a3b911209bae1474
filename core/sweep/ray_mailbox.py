"""The post office between a sweep's Ray workers and its parent: one small Ray actor per sweep.

Each run's worker (core/training/ray_worker.py) puts its events here in batches, in order, and learns with
the same call whether the parent asked its run to stop; the parent's pump (core/sweep/ray_launcher.py) takes
everything waiting in one call. One round trip carries events out and the stop flag in, so a run costs the
cluster a call every RAY_FLUSH_SECONDS (core/training/ray_worker.py), however many steps it trains. An async
actor: `take` waits for events without holding up the workers' `put`s. TensorFlow-free; Ray imports it by
name in the actor's process.

A run of several workers (`--workers W` with `--ray`, core/sweep/ray_workers.py) meets here too: each worker
files the address it listens on (`join`) and gets back all W, in worker order, once the last has come; each
then builds its TF_CONFIG from them (core/training/workers.py `tf_config`). Only the chief puts events.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Mailbox:
    """Events by run, in the order they were put, and the runs asked to stop (a Ray actor's state)."""

    def __init__(self) -> None:
        self._events: list[tuple[int, dict[str, Any]]] = []
        self._stops: set[int] = set()
        self._arrived = asyncio.Event()
        self._clusters: dict[int, tuple[dict[int, str], asyncio.Event]] = {}  # by run: addresses by worker

    async def put(self, run: int, events: list[dict[str, Any]]) -> bool:
        """File a run's events (in order); whether the run was asked to stop."""
        if events:
            self._events.extend((run, event) for event in events)
            self._arrived.set()
        return run in self._stops

    async def take(self, timeout: float) -> list[tuple[int, dict[str, Any]]]:
        """Every event waiting, oldest first, waiting up to `timeout` s for one; [] if none came."""
        if not self._events:
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        taken, self._events = self._events, []
        self._arrived.clear()
        return taken

    async def stop(self, run: int) -> None:
        """Ask `run` to end after its current step (its worker hears it at its next put)."""
        self._stops.add(run)

    async def join(self, run: int, worker: int, workers: int, address: str, timeout: float) -> list[str] | None:
        """File worker `worker`'s "host:port" for `run`; every worker's address (worker 0 first) once all
        `workers` have filed theirs, or None if they had not within `timeout` s."""
        addresses, complete = self._clusters.setdefault(run, ({}, asyncio.Event()))
        addresses[worker] = address
        if len(addresses) >= workers:
            complete.set()
        try:
            await asyncio.wait_for(complete.wait(), timeout)
        except asyncio.TimeoutError:
            return None
        return [addresses[k] for k in range(workers)]
