"""Async jobs (docs/architecture.md#async): each process's one event loop, made on first
use in that process (so after the fork, never shared with the master), and running a
job's awaitable on it with its timeouts.

The soft timeout throws ``JobTimeout`` into the job where it waits (its ``await``), as
SIGALRM raises it inside a sync job. The hard timeout, ``CANCEL_GRACE`` later, cancels the
task for real (``CancelledError``, not caught for the job): only that job ends, the
process and its other jobs go on. A loop blocked by a sync call inside a job can't do
either; then the master's hard-timeout kill (``TIMEOUT_GRACE``) ends the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

from ..core import current
from ..errors import JobTimeout

# Before the master's kill (5 s past the soft timeout): a job that only ignored
# JobTimeout is cancelled alone, and its process lives on.
CANCEL_GRACE = 3.0

_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_shared: LoopThread | None = None  # set while a concurrent worker runs its loop in a thread


def process_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, made now if there is none yet (or it was the parent's)."""
    global _loop, _loop_pid
    if _loop is None or _loop_pid != os.getpid() or _loop.is_closed():
        _loop = asyncio.new_event_loop()
        _loop_pid = os.getpid()
    return _loop


class LoopThread:
    """The process's loop, run by a thread of its own: jobs started from several threads
    (``--concurrency`` above 1) all run as tasks of this one loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="cogworker-loop", daemon=True)
        self.stopping = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        while not self.stopping:
            try:
                self.loop.run_forever()
            except BaseException:
                # A job raised SystemExit or KeyboardInterrupt: asyncio lets those out of
                # the loop after setting them as the task's outcome (the job's failure, as
                # for a sync job). The loop goes on for the other jobs.
                continue

    def start(self) -> None:
        global _shared
        self.thread.start()
        _shared = self

    def stop(self) -> None:
        """Ends the loop; tasks still on it (none, unless the owner gave up waiting) are
        left as they are: the process is about to leave."""
        global _shared
        if _shared is self:
            _shared = None
        self.stopping = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=1.0)


def run(awaitable: Awaitable[Any], timeout: float | None, name: str) -> Any:
    """Awaits a job's awaitable to its end, on this process's loop (or the loop thread's
    when a concurrent worker runs one); returns its result or raises what it raised."""
    shared = _shared
    if shared is not None and threading.current_thread() is not shared.thread:
        future = asyncio.run_coroutine_threadsafe(guarded(awaitable, timeout, name), shared.loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise asyncio.CancelledError() from None
        except BaseException:
            # Interrupted while waiting (a Shutdown at the shutdown deadline): the job's task
            # is cancelled too, never left running on the loop thread.
            future.cancel()
            raise
    loop = process_loop()
    if loop.is_running():
        raise RuntimeError(f"job {name} returned an awaitable inside a running event loop: nothing here can await it")
    task = loop.create_task(guarded(awaitable, timeout, name))
    try:
        return loop.run_until_complete(task)
    except BaseException:
        # Something interrupted the loop itself (a stop-now's HardStop): the task ends
        # with it, not left pending on the loop for the next job to resume.
        if not task.done():
            task.cancel()
            loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        raise


async def guarded(awaitable: Awaitable[Any], timeout: float | None, name: str) -> Any:
    """The job's awaitable with its soft timeout (JobTimeout inside it) and the hard one
    (cancelled ``CANCEL_GRACE`` later). An operator's cancel cancels this task
    (``current.CurrentJob.attach``): a ``CancelledError`` at the job's next await."""
    running = current.current_job()
    task = asyncio.current_task()
    if running is not None and task is not None:
        running.attach(task)
    if timeout is None:
        return await awaitable
    guard = TimeoutGuard(awaitable, timeout)
    assert task is not None
    loop = asyncio.get_running_loop()
    soft = loop.call_later(timeout, guard.expire, task)
    hard = loop.call_later(timeout + CANCEL_GRACE, guard.cancel, task)
    try:
        return await guard
    except asyncio.CancelledError:
        if guard.cancelled:
            raise JobTimeout(
                f"job {name} cancelled {CANCEL_GRACE:g}s after its timeout of {timeout:g}s: it ignored JobTimeout"
            ) from None
        raise
    finally:
        soft.cancel()
        hard.cancel()


class TimeoutGuard:
    """Awaits a coroutine step by step, as ``await`` does, so that the soft timeout can
    be thrown into it as ``JobTimeout`` where it waits (asyncio's own cancellation can
    only raise ``CancelledError`` there)."""

    def __init__(self, awaitable: Awaitable[Any], timeout: float) -> None:
        self.coro = awaitable if isinstance(awaitable, Coroutine) else _wrap(awaitable)
        self.timeout = timeout
        self.expired = False  # the soft timeout fired: the next CancelledError becomes JobTimeout
        self.cancelled = False  # the hard one fired: the job is cancelled for real

    def expire(self, task: asyncio.Task[Any]) -> None:
        self.expired = True
        task.cancel()

    def cancel(self, task: asyncio.Task[Any]) -> None:
        self.cancelled = True
        task.cancel()

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        send: Any = None
        throw: BaseException | None = None
        while True:
            try:
                step = coro.send(send) if throw is None else coro.throw(throw)
            except StopIteration as stop:
                return stop.value
            send, throw = None, None
            try:
                send = yield step
            except asyncio.CancelledError as exc:
                throw = exc
                if self.expired and not self.cancelled:
                    self.expired = False  # once: a later CancelledError is a real one
                    uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python 3.11+
                    if uncancel is not None:
                        uncancel()
                    throw = JobTimeout(f"job ran past its timeout of {self.timeout:g}s")
            except BaseException as exc:  # thrown into us: goes on into the job, as await does
                throw = exc


async def _wrap(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
