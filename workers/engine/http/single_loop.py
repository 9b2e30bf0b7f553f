"""One loop for an arm's kept HTTP/1.1 connections: closed-loop keep-alive without a greenlet switch
per request.

An arm's users are greenlets. On the ``plain`` and ``tls`` arms in the closed loop each user used to
send, wait on the hub for its answer, and be switched back to read it: two greenlet switches, a
watcher started and stopped, a timer armed and disarmed, and the hub's own ``epoll_wait``, for every
request. ``bench/loop_floor.py`` measured what that costs: a single ``epoll`` loop doing the same
per-request work reached 0.81–0.97× wrk per CPU-second where the engine reached 0.46–0.70×
(docs/performance.md, "What the engine's design costs").

So on those arms (closed loop, no think time, HTTP/1.1 on a kept connection) a user opens its
connection and makes its first request itself, as before (``TimedClient.request``: connect and TLS
handshake timed, failures backed off), then parks the connection here (``drive``). From then on this
loop sends the user's requests and reads their answers on its own ``epoll``, one greenlet for all of
the arm's users in the process. Per request it does the client's work and nothing more: the start
taken right before the head is written, the first and last byte timed on ``perf_counter_ns`` and
rounded as the client does it, the head read once per distinct head (``http1.read_head``), the body
counted by its ``Content-Length``, the answer recorded by the arm's recorder
(``ArmRecorder.record_answer``: what ``record`` does with such an answer's ``Sample``, without making
one; a request handed back gets its ``Sample``). The timing boundaries are the client's.

Only the plainest answer is read here: a whole head in the first read, a ``Content-Length``, a 2xx to
5xx status other than 204 and 304, and a connection kept. Anything else (a head in pieces, chunked
or close-delimited bodies, 1xx, ``Connection: close``, a reset, the server's close, an error, a
timeout) is handed back to the user's greenlet with what was read (``TimedClient.finish``), and the
client's own code finishes the request exactly as it would have: retrying once on a new connection
after the server closed an idle one, reopening after ``Connection: close``, backing off after
connection failures. The user then parks its connection again, or makes its next request itself
while it has none.

The loop blocks in its own ``epoll``, not on the hub, so nothing costs a switch while answers flow.
The hub keeps its place: gevent's own ``epoll`` descriptor is in this loop's set, so any I/O the
hub waits for (a user finishing a handed-back request, the master's messages) wakes the loop, which
then yields at once; and it yields at least every ``YIELD_S`` for the hub's timers (the arm's
one-second ticks, Locust's spawning, a cancel). A timer is late by at most that.

A user stopped by Locust (the arm's end, a cancel) leaves the loop as it dies (``drive``'s
``finally``); its request in flight is dropped, as a killed greenlet's was. Each request has the
client's timeout per wait (``timeout_s`` without a byte read), checked every ``CHECK_S``.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable

import gevent
from gevent import get_hub
from gevent.hub import Waiter
from gevent.monkey import get_original

from workers.engine.http.http1 import RECV_SIZE, Head, TimedClient, read_head
from workers.engine.http.sample import ConnectionClosed, ProtocolError, Sample

# gevent's ``patch_all`` removes ``select.epoll``; this loop needs the real one. Like cooperative.py
# it relies on gevent's loop beyond its greenlet API (``hub.loop.fileno``: libev's own epoll descriptor;
# ``hub.loop.timer`` and ``hub.wait``), checked on ``cooperative.PRIVATE_API_CHECKED_ON``'s versions
# (tests/workers/test_private_api.py names this module in its recheck message).
_epoll = get_original("select", "epoll")
EPOLLIN = 1
YIELD_S = 0.002  # the hub runs at least this often
CHECK_S = 0.1  # timeouts checked this often
# False: every user loops on its own greenlet, as before this module (the tests compare both).
ENABLED = True


def applies(client: TimedClient, interval_ns: int, think_time_s: float, lanes: int) -> bool:
    """Whether an arm's users are driven by a single loop: the closed loop without think time, one
    lane, HTTP/1.1 on a kept connection, under gevent (the engine)."""
    return (
        ENABLED
        and not interval_ns
        and not think_time_s
        and lanes == 1
        and type(client) is TimedClient
        and client._coop
        and not client.policy.new_connection_per_request
    )


class _Kept:
    """One parked connection: its client, its socket's (or TLS object's) read and write, and the
    request in flight: its path, its start, its first byte's time and head, the body bytes still to
    come, and the time of the last byte sent or read (for the timeout)."""

    __slots__ = (
        *("client", "fd", "read", "write", "tls", "waiter"),
        *("path", "start_ns", "first_ns", "need", "answer", "last_ns"),
    )

    def __init__(self, client: TimedClient) -> None:
        conn = client.sock
        self.client = client
        self.fd = conn.raw.fileno()
        self.tls = conn.tls
        self.read = conn.tls.read if conn.tls is not None else conn.raw.recv
        self.write = conn.tls.write if conn.tls is not None else conn.raw.send
        self.waiter = Waiter()
        self.path = ""
        self.start_ns = 0
        self.first_ns = 0
        self.need = 0
        self.answer = None
        self.last_ns = 0


class SingleLoop:
    """The loop of one arm in one engine process (module docstring). ``pick``: the next path;
    ``record_answer``: the arm recorder's (``ArmRecorder.record_answer``: a plain answer recorded
    without its ``Sample``); ``expected``: the arm's verdict on a status."""

    def __init__(
        self,
        pick: Callable[[], str],
        record_answer: Callable[[str, int, int, int, Head, bool], None],
        expected: Callable[[int], bool],
        timeout_s: float = 10.0,
    ) -> None:
        self._pick = pick
        self._record_answer = record_answer
        self._expected = expected
        self._ok: dict[int, bool] = {}  # status -> ``expected``'s verdict, asked once per status
        self.timeout_ns = int(timeout_s * 1e9)
        self._kept: dict[int, _Kept] = {}
        self._epoll = None
        self._hub_fd = -1
        self._greenlet = None
        self._handed = False  # a user was handed its request since the last yield
        # What the loop did, for the arm's result: requests it completed, requests it handed back.
        self.requests = 0
        self.handed_back = 0

    def drive(self, client: TimedClient):
        """Park ``client``'s kept connection here: the loop sends its requests from now on. Returns when
        the loop hands it back: ``(sample, path, begun)``, a request for ``client.finish``."""
        if self._epoll is None:
            self._epoll = _epoll()
            self._hub_fd = get_hub().loop.fileno()
            self._epoll.register(self._hub_fd, EPOLLIN)
        kept = _Kept(client)
        self._kept[kept.fd] = kept
        self._epoll.register(kept.fd, EPOLLIN)
        try:
            self._send(kept)
            if self._greenlet is None:
                self._greenlet = gevent.spawn(self._run)
            return kept.waiter.get()
        finally:
            self._leave(kept)

    def _leave(self, kept: _Kept) -> None:
        if self._kept.get(kept.fd) is kept:
            del self._kept[kept.fd]
            self._epoll.unregister(kept.fd)

    def _hand_back(self, kept: _Kept, begun) -> None:
        """The request in flight to its user's greenlet, with what the loop read or met (``begun``)."""
        self._leave(kept)
        self.handed_back += 1
        self._handed = True
        sample = Sample(kept.path, kept.start_ns)
        get_hub().loop.run_callback(kept.waiter.switch, (sample, kept.path, begun))

    def _send(self, kept: _Kept) -> None:
        """The next request on a parked connection: its path picked, its start taken, its head written."""
        path = self._pick()
        head = kept.client.head_for(path)
        kept.path = path
        kept.first_ns = 0
        kept.start_ns = kept.last_ns = time.perf_counter_ns()
        try:
            sent = kept.write(head)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            sent = 0
        except OSError as exc:
            self._hand_back(kept, exc)
            return
        if sent < len(head):
            self._hand_back(kept, head[sent:])  # the client writes the rest, waiting as it does

    def _run(self) -> None:
        kept_by_fd = self._kept
        poll = self._epoll.poll
        clock = time.perf_counter_ns
        yield_ns, check_ns = int(YIELD_S * 1e9), int(CHECK_S * 1e9)
        next_yield = next_check = clock()
        hub = get_hub()
        # Yielding on a timer due at once makes the hub go through a whole turn of its loop (its poll,
        # without blocking, and every timer due) before the loop resumes. ``gevent.sleep(0)`` would
        # only queue a callback, which the hub runs in the same pass as the one that resumed the
        # loop for up to 50 callbacks: its timers (the arm's one-second ticks) came tens of ms late.
        turn = hub.loop.timer(0.0)
        try:
            while kept_by_fd:
                hub_ready = False
                for fd, _ in poll(YIELD_S):
                    kept = kept_by_fd.get(fd)
                    if kept is None:
                        hub_ready = True  # gevent's own descriptor: the hub has I/O to dispatch
                    else:
                        self._readable(kept)
                now = clock()
                if now >= next_check:
                    self._time_out(now)
                    next_check = now + check_ns
                if hub_ready or self._handed or now >= next_yield:
                    self._handed = False
                    hub.wait(turn)
                    next_yield = clock() + yield_ns
        except Exception as exc:
            for kept in list(kept_by_fd.values()):  # no user waits forever on a loop that broke
                self._hand_back(kept, exc)
            raise
        finally:
            turn.close()
            self._greenlet = None

    def _time_out(self, now: int) -> None:
        limit = now - self.timeout_ns
        for kept in [kept for kept in self._kept.values() if kept.last_ns < limit]:
            self._hand_back(kept, TimeoutError("timed out"))

    def _readable(self, kept: _Kept) -> None:
        """What came on a parked connection: the answer read while it is the plainest kind, else
        handed back (module docstring); a complete answer recorded and the next request sent."""
        while True:
            try:
                data = kept.read(RECV_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError):
                return
            except ssl.SSLEOFError:
                data = b""
            except OSError as exc:  # a reset, a TLS error: the client retries or records it
                self._hand_back(kept, exc)
                return
            now = time.perf_counter_ns()
            kept.last_ns = now
            if not kept.first_ns:
                if not data:
                    self._hand_back(kept, ConnectionClosed("connection closed before the response"))
                    return
                end = data.find(b"\r\n\r\n")
                try:
                    answer = read_head(data[:end]) if end >= 0 else None
                except ProtocolError:  # not HTTP/1.x: the client reads it again and says so
                    answer = None
                if answer is None or not answer.plain:
                    self._hand_back(kept, (data, now))
                    return
                kept.first_ns, kept.answer = now, answer
                kept.need = answer.length - (len(data) - end - 4)
            elif not data:
                self._hand_back(kept, ProtocolError("connection closed inside the body"))
                return
            else:
                kept.need -= len(data)
            if kept.need <= 0:
                self._complete(kept, now)
                return
            if kept.tls is None or not kept.tls.pending():
                return

    def _complete(self, kept: _Kept, last_ns: int) -> None:
        """A plain answer read whole: recorded (times rounded as the client rounds them, ``http1``),
        the next request sent."""
        answer, start_ns = kept.answer, kept.start_ns
        ok = self._ok.get(answer.status)
        if ok is None:
            ok = self._ok[answer.status] = self._expected(answer.status)
        start = start_ns - 500
        ttfb_us, ttlb_us = max(1, (kept.first_ns - start) // 1000), max(1, (last_ns - start) // 1000)
        self.requests += 1
        self._record_answer(kept.path, start_ns, ttfb_us, ttlb_us, answer, ok)
        self._send(kept)
