"""What a Python keep-alive client can reach on this machine: the floor under the engine's CPU per request.

One thread, one ``epoll``, ``users`` keep-alive connections to a plain HTTP/1.1 URL, each sending its
next GET as soon as its answer is complete (closed loop, as wrk and the engine's ``plain`` arm). It
keeps what the engine's client must keep per request, and nothing else: the time of the send, of the
first and the last byte (``perf_counter_ns``), the status and the body's size from
``Content-Length``, a response head parsed once per distinct text, each request's record appended
to a list. No greenlets, no hub, no timers, no Locust.

``bench/generator`` prints its requests per CPU-second beside wrk's in the same run
(``machine.loop_floor``): how close any Python closed-loop client gets to wrk on this machine's
kernel and Python, so a reader can tell what the engine's design costs (the greenlet per user, the
hub's switches) from what Python costs. It measures; it is not a client of the product. Loopback
only: the caller gives a 127.0.0.0/8 or ::1 address, the run stops after ``seconds``.
"""

from __future__ import annotations

import ipaddress
import resource
import select
import socket
import time

RECV_SIZE = 65536


def _head_of(text: str, cache: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(status, Content-Length) of a response head, parsed once per distinct text."""
    found = cache.get(text)
    if found is None:
        lines = text.split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise ValueError("the floor loop needs a Content-Length answer")
        found = cache[text] = (int(lines[0][9:12]), int(headers["content-length"]))
    return found


def measure(host: str, port: int, path: str, users: int, seconds: float) -> dict:
    """Closed loop on ``users`` connections for ``seconds``: requests and this thread's CPU per request."""
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"loopback only, not {host}")
    # The engine's own request head (workers/engine/http/http1.py), byte for byte in size.
    head = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: tollgate/0.1\r\nAccept: */*\r\n\r\n"
    head = head.encode("latin-1")
    poller = select.epoll()
    conns: dict[int, list] = {}  # fd -> [socket, send ns, first-byte ns, length, bytes of body read, status]
    cache: dict[str, tuple[int, int]] = {}
    records: list[tuple[int, int, int, int, int]] = []
    clock = time.perf_counter_ns
    try:
        for _ in range(users):
            sock = socket.create_connection((host, port), timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conns[sock.fileno()] = [sock, 0, 0, 0, 0, 0]
            poller.register(sock.fileno(), select.EPOLLIN)
        before = resource.getrusage(resource.RUSAGE_THREAD)
        deadline = time.monotonic() + seconds
        for state in conns.values():
            state[1] = clock()
            state[0].send(head)
        done = False
        while not done:
            events = poller.poll(1.0)
            if not events:
                raise TimeoutError("no answer for 1 s")
            for fd, _ in events:
                state = conns[fd]
                buf = state[0].recv(RECV_SIZE)
                now = clock()
                if not buf:
                    raise ConnectionError("the server closed a keep-alive connection")
                if not state[2]:
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        raise ValueError("a response head in more than one read")
                    state[2] = now
                    state[5], state[3] = _head_of(buf[:end].decode("latin-1"), cache)
                    state[4] = len(buf) - end - 4
                else:
                    state[4] += len(buf)
                if state[4] >= state[3]:
                    records.append((state[1], state[2], now, state[5], state[3]))
                    state[2] = 0
                    if len(records) % 512 == 0 and time.monotonic() >= deadline:
                        done = True
                        break
                    state[1] = clock()
                    state[0].send(head)
        after = resource.getrusage(resource.RUSAGE_THREAD)
    finally:
        poller.close()
        for state in conns.values():
            state[0].close()
    user_s, sys_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    count = len(records)
    failed = sum(1 for record in records if record[3] != 200)
    return {
        "requests": count,
        "failures": failed,
        "cpu_s": round(user_s + sys_s, 3),
        "per_cpu_s": round(count / (user_s + sys_s), 1) if user_s + sys_s > 0 else None,
        "user_us_per_req": round(user_s / count * 1e6, 2) if count else None,
        "sys_us_per_req": round(sys_s / count * 1e6, 2) if count else None,
        "ttlb_p50_us": sorted(r[2] - r[0] for r in records)[count // 2] // 1000 if count else None,
    }
