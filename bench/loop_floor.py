"""What a Python keep-alive client can reach on this machine: the floor under the engine's CPU per request.

One thread, one ``epoll``, ``users`` keep-alive connections to a plain HTTP/1.1 URL, each sending its
next GET as soon as its answer is complete (closed loop, as wrk and the engine's ``plain`` arm). It
keeps what the engine's client must keep per request, and nothing else: the time of the send, of the
first and the last byte (``perf_counter_ns``), the status and the body's size from
``Content-Length``, the response head through the engine's own ``read_head`` (read once per
distinct head, then looked up by its bytes), each request's record appended to a list. No
greenlets, no hub, no timers, no Locust. Like the engine's arms it warms up first (``warmup_s``):
only requests sent after it count, and the CPU is this thread's over the measured window.

``bench/generator`` prints its requests per CPU-second beside wrk's in the same run
(``machine.loop_floor``): how close any Python closed-loop client gets to wrk on this machine's
kernel and Python, so a reader can tell what the engine's design costs from what Python costs. With
``engine_record`` the same loop does the engine's own per-request work on top: each answer's times
rounded as the client rounds them and recorded by its ``ArmRecorder`` as the engine's single loop
records a plain answer (``machine.loop_floor_recorded``), so what is left between it and the engine
is the engine's shape (Locust, the hub, the loop's yields to it, picking the path), not its
recording. Since the engine runs its closed-loop keep-alive arms on a single loop of its own
(workers/engine/http/single_loop.py), that gap is small. It measures; it is not a client of the
product. Loopback only: the caller gives a 127.0.0.0/8 or ::1 address, the run stops after
``warmup_s + seconds``. Anything that breaks the loop (no answer for 1 s, a closed connection, an
answer without a ``Content-Length`` it can read) raises ``FloorFailed`` with the reason.
"""

from __future__ import annotations

import ipaddress
import resource
import select
import socket
import time
from collections.abc import Callable

from workers.engine.http.http1 import read_head
from workers.engine.recording.recorder import ArmRecorder

RECV_SIZE = 65536


class FloorFailed(RuntimeError):
    """The floor loop could not measure (the reason in words)."""


def _send(state: list, head: bytes) -> None:
    state[1] = time.perf_counter_ns()
    state[0].send(head)


def _run(poller, conns: dict[int, list], head: bytes, until: float, keep: Callable[[tuple], None]) -> None:
    """The closed loop until ``until`` (monotonic s): each complete answer's record, (send ns,
    first-byte ns, last-byte ns, its ``Head``, its length), given to ``keep``, its connection's next
    request sent. A connection's state: [socket, send ns, first-byte ns, length, body bytes read,
    head]."""
    clock = time.perf_counter_ns
    answered = 0
    while True:
        events = poller.poll(1.0)
        if not events:
            raise FloorFailed("no answer for 1 s")
        for fd, _ in events:
            state = conns[fd]
            buf = state[0].recv(RECV_SIZE)
            now = clock()
            if not buf:
                raise FloorFailed("the server closed a keep-alive connection")
            if not state[2]:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    raise FloorFailed("a response head in more than one read")
                answer = read_head(buf[:end])
                if answer.length is None or answer.bad_length:
                    raise FloorFailed("an answer without Content-Length (or with one that is not a number)")
                body = len(buf) - end - 4
                state[2], state[3], state[4], state[5] = (now, answer.length, body, answer)
            else:
                state[4] += len(buf)
            if state[4] >= state[3]:
                keep((state[1], state[2], now, state[5], state[3]))
                state[2] = 0
                # Sent before the loop may end: the next loop (the window after the warm-up) finds
                # every connection with a request in flight.
                _send(state, head)
                answered += 1
                if answered % 256 == 0 and time.monotonic() >= until:
                    return


def engine_keep(recorder: ArmRecorder, url: str) -> Callable[[tuple], None]:
    """``keep`` for the loop with the engine's own per-request work: the answer's times rounded as
    the client rounds them, recorded by an ``ArmRecorder`` as the engine's single loop records a
    plain answer (``record_answer``, workers/engine/http/single_loop.py)."""
    record_answer = recorder.record_answer

    def keep(answered: tuple) -> None:
        sent, first, last, answer, _ = answered
        start = sent - 500
        record_answer(
            url,
            sent,
            max(1, (first - start) // 1000),
            max(1, (last - start) // 1000),
            answer,
            answer.status == 200,
        )

    return keep


def measure(
    host: str,
    port: int,
    path: str,
    users: int,
    seconds: float,
    warmup_s: float = 0.5,
    engine_record: bool = False,
) -> dict:
    """Closed loop on ``users`` connections, ``warmup_s`` then ``seconds`` measured: the requests sent
    in the window and this thread's CPU over it, per request. ``engine_record``: each answer recorded
    by an ``ArmRecorder`` as the engine records it (``engine_keep``), which counts the window as the
    engine does; else a tuple appended to a list."""
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"loopback only, not {host}")
    # The engine's own request head (workers/engine/http/http1.py), byte for byte in size.
    head = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: tollgate/0.1\r\nAccept: */*\r\n\r\n"
    head = head.encode("latin-1")
    poller = select.epoll()
    conns: dict[int, list] = {}
    records: list[tuple] = []
    recorder = ArmRecorder("plain") if engine_record else None
    keep = engine_keep(recorder, f"http://{host}:{port}{path}") if recorder else records.append
    try:
        for _ in range(users):
            sock = socket.create_connection((host, port), timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conns[sock.fileno()] = [sock, 0, 0, 0, 0, None]
            poller.register(sock.fileno(), select.EPOLLIN)
        for state in conns.values():
            _send(state, head)
        _run(poller, conns, head, time.monotonic() + warmup_s, keep)  # warm-up: not counted
        records.clear()
        if recorder:
            recorder.start_window()
        window_ns = time.perf_counter_ns()
        before = resource.getrusage(resource.RUSAGE_THREAD)
        _run(poller, conns, head, time.monotonic() + seconds, keep)
        after = resource.getrusage(resource.RUSAGE_THREAD)
    except OSError as exc:
        raise FloorFailed(f"{type(exc).__name__}: {exc}") from None
    finally:
        poller.close()
        for state in conns.values():
            state[0].close()
    if recorder:
        count, failures = recorder.requests, recorder.failures
    else:
        counted = [r for r in records if r[0] >= window_ns]  # sent in the window, as the engine counts
        count, failures = len(counted), sum(1 for record in counted if record[3].status != 200)
    user_s, sys_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "requests": count,
        "failures": failures,
        "engine_record": engine_record,
        "warmup_s": warmup_s,
        "cpu_s": round(user_s + sys_s, 3),
        "per_cpu_s": round(count / (user_s + sys_s), 1) if count and user_s + sys_s > 0 else None,
        "user_us_per_req": round(user_s / count * 1e6, 2) if count else None,
        "sys_us_per_req": round(sys_s / count * 1e6, 2) if count else None,
    }
