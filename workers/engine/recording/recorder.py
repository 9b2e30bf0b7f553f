"""Per-arm recording: µs HDR histograms, counts and a per-second series.

Only requests that *start* after the warm-up and *end* before the window closes are recorded, so
neither the ramp-up nor requests cut off by the stop leak into the statistics.
"""

from __future__ import annotations

import time
from collections import Counter

from hdrh.histogram import HdrHistogram

from workers.engine.http.sample import CONNECTION_ERRORS, Sample
from workers.engine.recording.quic import QuicTally

# 1 µs … 60 s at 3 significant digits: the format the portal stores and merges.
HIST_MIN_US = 1
HIST_MAX_US = 60_000_000
HIST_DIGITS = 3
MAX_ERROR_SAMPLES = 3
MAX_DISTINCT_SIZES = 20
MAX_DISTINCT_HEADERS = 5
MAX_SEEN = 1000  # (url, size, content headers) combinations remembered to skip the bookkeeping
# Open loop: a request that starts this much after its scheduled time counts as late.
LATE_US = 1000


def new_histogram() -> HdrHistogram:
    return HdrHistogram(HIST_MIN_US, HIST_MAX_US, HIST_DIGITS)


def _clamp(value_us: int, floor: int = HIST_MIN_US) -> int:
    return min(max(value_us, floor), HIST_MAX_US)


_SHAPE = new_histogram()  # only its bucket arithmetic is used


def percentiles(counts: dict[int, int], wanted: tuple[float, ...]) -> list[int | None]:
    """``HdrHistogram.get_value_at_percentile`` of the histogram these counts would make, for each
    percentile (ascending), from the sorted distinct values instead of a walk over every bucket:
    the first value whose running count reaches the percentile's count lies in the bucket the
    histogram would stop at, and the answer is that bucket's highest equivalent value."""
    if not counts:
        return [None] * len(wanted)
    total = sum(counts.values())
    items = sorted((_clamp(value), n) for value, n in counts.items())
    out: list[int | None] = []
    running, i = 0, -1
    for percentile in wanted:
        target = max(1, int(percentile * total / 100 + 0.5))
        while running < target:
            i += 1
            running += items[i][1]
        out.append(_SHAPE.get_highest_equivalent_value(items[i][0]))
    return out


def _count(counts: dict[int, int], value: int) -> None:
    counts[value] = counts.get(value, 0) + 1


def _add(hist: HdrHistogram, counts: dict[int, int], floor: int = HIST_MIN_US) -> HdrHistogram:
    """Record each distinct value once with its count (exactly what one call per value would do),
    then forget the counts. ``floor``: the least value kept (0 for ``connect_us``: an HTTP/3
    connection's is 0, QUIC having no separate transport handshake)."""
    for value, count in counts.items():
        hist.record_value(_clamp(value, floor), count)
    counts.clear()
    return hist


def _encoded_counts(counts: dict[int, int]) -> str | None:
    """The encoded HDR histogram these counts make (None when empty); the counts are kept."""
    if not counts:
        return None
    hist = new_histogram()
    for value, count in counts.items():
        hist.record_value(_clamp(value), count)
    return hist.encode().decode("ascii")


class ArmRecorder:
    """Records samples per arm. A request's values are counted in dicts (value -> count) and added to
    the HDR histograms once per distinct value, at each second's roll and whenever a histogram is
    read (``hdrh``'s ``record_value`` costs about 1.4 µs, several per request; a dict count about
    0.1 µs). Which samples are recorded is decided per sample, as they end, exactly as before."""

    def __init__(self, arm: str, quic: QuicTally | None = None) -> None:
        self.arm = arm
        # HTTP/3 arms: their QUIC connections' figures over the window (``result.quic``), else None.
        self.quic = quic
        self.window_start_ns: int | None = None
        self.window_end_ns: int | None = None
        self._ttfb, self._ttlb = new_histogram(), new_histogram()
        self._connect, self._tls_handshake = new_histogram(), new_histogram()
        # Counts not yet in the histograms: (ttfb, ttlb, connect, tls_handshake) of the window so
        # far, and (ttlb, ttfb) of the current second.
        self._pending: tuple[dict[int, int], ...] = ({}, {}, {}, {})
        self._sec_pending: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self._seen: set[tuple] = set()  # (url, size, content type, encoding) already noted
        self.requests = 0
        self.failures = 0
        self.status_codes: Counter[int] = Counter()
        self.errors: dict[str, dict] = {}
        self.sizes_by_url: dict[str, set[int]] = {}
        # Content-Type and Content-Encoding per request target, of expected answers: the arms of a
        # cost must have been served the same representation, not only the same number of bytes.
        self.content_by_url: dict[str, dict[str, set[str]]] = {}
        self.connections_opened = 0
        # Keep-alive arms: connections opened because the server had closed the user's previous one.
        self.connections_reopened = 0
        self.sessions_reused = 0
        # Open loop: requests that started ≥ LATE_US after their scheduled time, and the worst lag.
        self.late_requests = 0
        self.max_schedule_lag_us = 0
        # Per-second bucket, rolled by tick().
        self._sec_requests = 0
        self._sec_failures = 0
        # Warm-up totals, for progress only; requests that ended neither in the warm-up nor in the window
        # (started before it opened, or ended after it closed): sent, never measured.
        self.warmup_requests = 0
        self.unwindowed_requests = 0
        # Connection-level failures (refused, reset, timeout) by kind, warm-up and window alike: the
        # unreachable-target rule (workers.engine.unreachable.Watch) reads them with the attempts.
        self.connection_failures: dict[str, int] = {}
        # HTTP/2 arms (``workers.engine.http.http2``), in the window: the protocol ALPN selected per
        # connection opened, the server's lowest SETTINGS_MAX_CONCURRENT_STREAMS, the most streams in
        # flight on one connection, GOAWAYs read by error code. None until an HTTP/2 request is seen.
        self.http2: dict | None = None

    def flush(self) -> None:
        """Add every pending count of the window into its histogram (reading one does it too)."""
        for hist, counts, floor in zip(
            (self._ttfb, self._ttlb, self._connect, self._tls_handshake),
            self._pending,
            (HIST_MIN_US, HIST_MIN_US, 0, HIST_MIN_US),
            strict=True,
        ):
            _add(hist, counts, floor)

    @property
    def ttfb(self) -> HdrHistogram:
        return _add(self._ttfb, self._pending[0])

    @property
    def ttlb(self) -> HdrHistogram:
        return _add(self._ttlb, self._pending[1])

    @property
    def connect(self) -> HdrHistogram:
        return _add(self._connect, self._pending[2], 0)

    @property
    def tls_handshake(self) -> HdrHistogram:
        return _add(self._tls_handshake, self._pending[3])

    @property
    def measuring(self) -> bool:
        return self.window_start_ns is not None and self.window_end_ns is None

    def start_window(self) -> None:
        self.window_start_ns = time.perf_counter_ns()
        for counts in self._sec_pending:
            counts.clear()
        self._sec_requests = self._sec_failures = 0
        if self.quic is not None:
            self.quic.start_window()

    def close_window(self) -> None:
        self.window_end_ns = time.perf_counter_ns()
        if self.quic is not None:
            self.quic.close_window()

    def record(self, sample: Sample, expected_ok: bool) -> None:
        if sample.error is not None and sample.error in CONNECTION_ERRORS:
            _count(self.connection_failures, sample.error)
        if sample.alpn is not None:  # every HTTP/2 connection of the arm, warm-up included
            self._note_h2_connection(sample)
        if not self._windowed(sample.start_ns):
            return
        self.requests += 1
        self._sec_requests += 1
        failed = sample.error is not None or not expected_ok
        if failed:
            self.failures += 1
            self._sec_failures += 1
        if sample.error is not None:
            entry = self.errors.setdefault(sample.error, {"count": 0, "samples": []})
            entry["count"] += 1
            if len(entry["samples"]) < MAX_ERROR_SAMPLES and sample.error_detail not in entry["samples"]:
                entry["samples"].append(sample.error_detail)
        pending = self._pending
        if sample.connect_us is not None:
            self.connections_opened += 1
            self.connections_reopened += sample.reopened
            _count(pending[2], sample.connect_us)
        if sample.tls_handshake_us is not None:
            _count(pending[3], sample.tls_handshake_us)
            if sample.session_reused:
                self.sessions_reused += 1
        if sample.streams_in_flight or self.quic is not None:
            self._note_streams(sample)
        if sample.status is None:
            return
        if sample.schedule_lag_us >= LATE_US:
            self.late_requests += 1
            self.max_schedule_lag_us = max(self.max_schedule_lag_us, sample.schedule_lag_us)
        self._answered(
            sample.url,
            sample.status,
            sample.body_bytes,
            sample.content_type,
            sample.content_encoding,
            sample.ttfb_us,
            sample.ttlb_us,
            expected_ok,
        )

    def record_answer(
        self, url: str, start_ns: int, ttfb_us: int, ttlb_us: int, head, expected_ok: bool
    ) -> None:
        """``record`` of a complete HTTP/1.1 answer on a kept connection (``http1.Head`` ``head``, its
        body as long as its Content-Length) without its ``Sample``: what ``record`` does with such a
        sample, which has no error, opened no connection, carries no HTTP/2 or QUIC figures and no
        schedule. The single loop's path (``http.single_loop``), every request of ``plain``/``tls``."""
        if not self._windowed(start_ns):
            return
        self.requests += 1
        self._sec_requests += 1
        if not expected_ok:
            self.failures += 1
            self._sec_failures += 1
        _, _, content_type, content_encoding = head.noted
        self._answered(
            url, head.status, head.length, content_type, content_encoding, ttfb_us, ttlb_us, expected_ok
        )

    def _windowed(self, start_ns: int) -> bool:
        """Whether a request that started at ``start_ns`` and ends now is measured; if not, counted
        as the warm-up's or as unwindowed."""
        start = self.window_start_ns
        if start is None or start_ns < start or self.window_end_ns is not None:
            if start is None:
                self.warmup_requests += 1
            else:
                self.unwindowed_requests += 1
            return False
        return True

    def _answered(
        self,
        url: str,
        status: int,
        size: int,
        content_type: str,
        content_encoding: str,
        ttfb: int,
        ttlb: int,
        expected_ok: bool,
    ) -> None:
        """An answer in the window: its status, its content (an expected one's), its times."""
        self.status_codes[status] += 1
        if expected_ok:
            self._note_content(url, size, content_type, content_encoding)
        pending = self._pending
        # ``_count`` four times, written out: this is every request's path.
        counts = pending[0]
        counts[ttfb] = counts.get(ttfb, 0) + 1
        counts = pending[1]
        counts[ttlb] = counts.get(ttlb, 0) + 1
        sec_ttlb, sec_ttfb = self._sec_pending
        sec_ttlb[ttlb] = sec_ttlb.get(ttlb, 0) + 1
        sec_ttfb[ttfb] = sec_ttfb.get(ttfb, 0) + 1

    def _h2(self) -> dict:
        if self.http2 is None:
            self.http2 = {"alpn": {}, "peer_max_streams": None, "streams_peak": 0, "goaway": {}}
        return self.http2

    def _note_streams(self, sample: Sample) -> None:
        """A request in the window on a multiplexed protocol: HTTP/3's QUIC figures, or HTTP/2's."""
        if self.quic is not None:
            self.quic.note(sample)
        else:
            self._note_http2(sample)

    def _note_h2_connection(self, sample: Sample) -> None:
        """What one HTTP/2 connection negotiated: ALPN, and the server's stream limit (not HTTP/3's:
        its connections are in ``quic``)."""
        if self.quic is not None:
            return
        h2 = self._h2()
        _count(h2["alpn"], sample.alpn)
        if sample.peer_max_streams is not None:
            known = h2["peer_max_streams"]
            limit = sample.peer_max_streams
            h2["peer_max_streams"] = limit if known is None else min(known, limit)

    def _note_http2(self, sample: Sample) -> None:
        """A request in the window: the streams in flight beside it, a GOAWAY it saw."""
        h2 = self._h2()
        h2["streams_peak"] = max(h2["streams_peak"], sample.streams_in_flight)
        if sample.goaway is not None:
            _count(h2["goaway"], sample.goaway)

    def _note_content(self, url: str, size: int, content_type: str, content_encoding: str) -> None:
        """Body sizes and content headers per request target, of expected answers only (an error page
        is not the page); a combination already noted costs one set lookup."""
        key = (url, size, content_type, content_encoding)
        if key in self._seen:
            return
        if len(self._seen) < MAX_SEEN:
            self._seen.add(key)
        sizes = self.sizes_by_url.setdefault(url, set())
        if len(sizes) < MAX_DISTINCT_SIZES:
            sizes.add(size)
        empty: dict[str, set[str]] = {"content_type": set(), "content_encoding": set()}
        content = self.content_by_url.setdefault(url, empty)
        for key_name, value in (("content_type", content_type), ("content_encoding", content_encoding)):
            if len(content[key_name]) < MAX_DISTINCT_HEADERS:
                content[key_name].add(value)

    def roll_second(self, encode: bool = False) -> dict:
        """Close the current one-second bucket and return its summary: TTLB percentiles (``p50_us``
        …) and TTFB percentiles (``ttfb_p50_us``, ``ttfb_p95_us``) of the same requests. ``encode``
        adds the bucket's histograms (``hist``: ttlb_us, ttfb_us encoded), for a master to merge."""
        ttlb, ttfb = self._sec_pending
        point = {
            "requests": self._sec_requests,
            "failures": self._sec_failures,
            **dict(zip(("p50_us", "p95_us", "p99_us"), percentiles(ttlb, (50, 95, 99)), strict=True)),
            **dict(zip(("ttfb_p50_us", "ttfb_p95_us"), percentiles(ttfb, (50, 95)), strict=True)),
        }
        if encode:
            point["hist"] = {
                "ttlb_us": _encoded_counts(ttlb),
                "ttfb_us": _encoded_counts(ttfb),
            }
        ttlb.clear()
        ttfb.clear()
        self._sec_requests = self._sec_failures = 0
        return point

    def measured_s(self) -> float:
        if self.window_start_ns is None:
            return 0.0
        end = self.window_end_ns or time.perf_counter_ns()
        return (end - self.window_start_ns) / 1e9

    def result(self) -> dict:
        measured_s = self.measured_s()
        sizes = [size for values in self.sizes_by_url.values() for size in values]

        def encoded(h: HdrHistogram) -> str | None:
            return h.encode().decode("ascii") if h.total_count else None

        return {
            "requests": self.requests,
            "failures": self.failures,
            "measured_s": round(measured_s, 6),
            "rps": round(self.requests / measured_s, 3) if measured_s > 0 else 0.0,
            "hist": {
                "ttfb_us": encoded(self.ttfb),
                "ttlb_us": encoded(self.ttlb),
                "connect_us": encoded(self.connect),
                "tls_handshake_us": encoded(self.tls_handshake),
            },
            "status_codes": {str(code): n for code, n in sorted(self.status_codes.items())},
            "response_bytes": {"min": min(sizes), "max": max(sizes)} if sizes else {"min": None, "max": None},
            "sizes_by_url": {url: sorted(values) for url, values in self.sizes_by_url.items()},
            "content_by_url": {
                url: {key: sorted(values) for key, values in content.items()}
                for url, content in self.content_by_url.items()
            },
            "errors": self.errors,
            "connections_opened": self.connections_opened,
            "connections_reopened": self.connections_reopened,
            "tls_sessions_reused": self.sessions_reused,
            "late_requests": self.late_requests,
            "unwindowed_requests": self.unwindowed_requests,
            "max_schedule_lag_us": self.max_schedule_lag_us,
            "http2": self.http2,
            "quic": self.quic.result() if self.quic is not None else None,
        }
