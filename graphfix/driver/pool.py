"""A pool of forked worker processes that maps a function over work items, in order.

A worker's failure (an exception, a crash, a stall past the time limit) is its item's, never
the run's; what a pass learned after the workers were forked travels with the items that
need it, as each item's state (`Call.state`), sent to a worker once for a run of items that
share it.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Call(NamedTuple):
    """One item of a map: `function(item)`, after the process running it adopted `state`
    (None: the item needs none, or the worker has it already)."""

    function: Callable[[Any], Any]
    state: Any
    item: Any


class WorkerPool:
    """`workers` forked processes for all the passes of a run (one: this process). What a
    pass learned after they were forked travels with the items that need it. With workers,
    a file's work never takes the run down:
    an exception, a worker that dies (libcst's parser can crash the process) or one that
    outlives `timeout` seconds on one item is that item's failure, given to `failed(function,
    item, error)` for the value the pass goes on with; a dead or stopped worker is replaced."""

    def __init__(self, workers: int, timeout: float | None = None, failed=None,
                 adopt: Callable[[Any], None] | None = None):
        self.workers, self.timeout = max(1, workers), timeout
        self.failed = failed if failed is not None else _raise_failure
        self.running: list[_Worker] = []
        self.adopt = adopt

    def __enter__(self) -> WorkerPool:
        if self.workers > 1:  # (one job runs here: no fork, and what it imports is kept)
            self.running = [_Worker(self.adopt) for _ in range(self.workers)]
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.running:
            worker.stop(gently=exc[0] is None)
        self.running = []

    def map(self, function, items: list, tick=None, state=lambda item: None,
            prepare=None) -> list:
        """`[function(item) for item in items]`, each after `adopt(state(item))` (a state of
        None: none to adopt), in order, whatever worker ran it; a failed item gives
        `failed(function, item, error)`.
        `prepare()`, if given, runs once in each forked worker before its first item of the
        map (what every item needs, such as imports): the per-item time limit counts from
        its end, so a worker's start-up is no one file's time. (One job runs here, untimed
        and unprepared: a warm run imports only what its items need.)"""
        import collections
        import time

        calls = [Call(function, state(item), item) for item in items]
        if not self.running:
            return [_ticked(self._here(call), tick) for call in calls]
        # Imported only with workers running: a warm run, all cached, forks none.
        from multiprocessing.connection import wait

        results: list = [None] * len(calls)
        waiting = collections.deque(range(len(calls)))
        chunk = max(1, min(16, len(calls) // (self.workers * 4)))
        while True:
            for worker in self.running:
                if not worker.in_flight and waiting:
                    taken = [waiting.popleft() for _ in range(min(chunk, len(waiting)))]
                    worker.send(taken, [worker.unless_sent(calls[i]) for i in taken],
                                prepare)
            busy = [w for w in self.running if w.in_flight]
            if not busy:
                return results
            now = time.monotonic()
            timed = [w.since for w in busy if w.prepared is prepare]
            limit = None if self.timeout is None or not timed else max(
                0.0, min(timed) + self.timeout - now)
            ready = wait([w.connection for w in busy], limit)
            for worker in busy:
                if worker.connection in ready:
                    answer = worker.receive()
                    if answer is _PREPARED:
                        worker.prepared = prepare
                        continue
                    if answer is not None:
                        ok, value = answer
                        index = worker.in_flight.popleft()
                        results[index] = value if ok else self.failed(function, items[index],
                                                                      value)
                        _ticked(None, tick)
                        continue
                    error = worker.crash_reason()
                elif (self.timeout is not None and worker.prepared is prepare
                      and time.monotonic() - worker.since > self.timeout):
                    error = f"took longer than {self.timeout:g} s (--timeout-per-file)"
                else:
                    continue
                index = worker.in_flight.popleft()
                waiting.extendleft(reversed(worker.in_flight))  # the rest of its chunk
                worker.stop(gently=False)
                self.running[self.running.index(worker)] = _Worker(self.adopt)
                results[index] = self.failed(function, items[index], error)
                _ticked(None, tick)


    def _here(self, call):
        """One call in this process (one job): an exception is still the item's failure;
        a crash or a stall is not bounded here (`--jobs 2` or more isolates them)."""
        try:
            return _call(call, self.adopt)
        except Exception as exc:
            return self.failed(call.function, call.item, f"internal error: {type(exc).__name__}: {exc}")


def _raise_failure(function, item, error):
    raise RuntimeError(f"{getattr(function, '__name__', function)}: {error}")


class _Worker:
    """One forked process of `WorkerPool`, and the indices of the items it is running."""

    def __init__(self, adopt: Callable[[Any], None] | None):
        import collections
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, adopt), daemon=True)
        self.process.start()
        theirs.close()
        self.in_flight: collections.deque[int] = collections.deque()
        self.since = 0.0  # when its current item began
        self.last_state = None  # the state it was sent last (`unless_sent`)
        self.prepared = None  # the `prepare` it has run (its map's, or None)

    def unless_sent(self, call):
        """`call` without its state where it has none or the state is the one this worker
        was sent last (it keeps it: a closure's parts travel once for a run of its files,
        however many files without work come between them)."""
        if call.state is None or call.state is self.last_state:  # (None: the item needs none)
            return call._replace(state=None)
        self.last_state = call.state
        return call

    def send(self, indices: list[int], calls: list, prepare=None) -> None:
        """Items to run, after `prepare()` where this worker has not run it yet (it then
        answers `_PREPARED` first)."""
        import time

        self.in_flight.extend(indices)
        self.since = time.monotonic()
        self.connection.send((None if prepare is self.prepared else prepare, calls))

    def receive(self):
        """(ok, value) of its current item, or `_PREPARED`; None if it died."""
        import time

        try:
            answer = self.connection.recv()
        except (EOFError, OSError):
            return None
        self.since = time.monotonic()
        return _PREPARED if answer == _PREPARED else answer

    def crash_reason(self) -> str:
        import signal

        self.process.join(5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"graphfix's worker reading it crashed ({name}); not parsed"
        return f"graphfix's worker reading it stopped (exit code {code}); not parsed"

    def stop(self, *, gently: bool) -> None:
        if gently and self.process.is_alive():
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


def _serve(connection, adopt: Callable[[Any], None] | None) -> None:
    """A worker's loop: calls in, one (ok, result or error) out per call, until told to end.
    Ctrl-C is the parent's to handle (it stops the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        prepare, calls = message
        if prepare is not None:
            prepare()  # (a failure here is each item's, below)
            connection.send(_PREPARED)
        for call in calls:
            try:
                answer = (True, _call(call, adopt))
            except Exception as exc:
                answer = (False, f"internal error: {type(exc).__name__}: {exc}")
            try:
                connection.send(answer)
            except Exception as exc:  # a result that cannot be pickled
                connection.send((False, f"internal error: {type(exc).__name__}: {exc}"))


# A worker's answer that it has run its map's `prepare`: its items' clock starts now.
_PREPARED = "prepared"


def _call(call: Call, adopt: Callable[[Any], None] | None):
    if call.state is not None and adopt is not None:
        adopt(call.state)
    return call.function(call.item)


def _ticked(result, tick):
    if tick is not None:
        tick()
    return result
