"""The HTTP/2 arms' protocol library when the machine has it: ``libnghttp2`` (the C library h2load,
curl and Apache use), driven without I/O through cffi: bytes in (``nghttp2_session_mem_recv``), bytes
out (``nghttp2_session_mem_send``), callbacks for what arrived.

``NgConnection`` offers the part of ``jh2``'s ``H2Connection`` that the timed client uses
(``http2.H2Client``, ``http2_state.Connection``) and hands out ``jh2``'s own event objects, so the
client's lanes, slots, GOAWAY handling, header checks and timing boundaries are the same on either
library; only the state machine, framing and HPACK move into compiled code (docs/performance.md,
"HTTP/2 on libnghttp2"). The library's HTTP messaging checks are off (``no_http_messaging``): received
header blocks are checked by the client's ``HeaderCheck``, with ``jh2``'s rules, as before, so a
malformed answer fails the same way on both; the message rules ``jh2`` enforces beyond header blocks
are checked here (``_frame``): a body unlike its ``content-length``, a 1xx answer that ends its
stream, trailers that do not: each a connection error, as in ``jh2``. A request the library does not
put on the wire at once (held back at the server's stream limit, or refused by it) fails at its
send, never waits for a timeout. Flow control is the library's: it hands back what was
received and sends WINDOW_UPDATE itself when half a window is consumed (as ``jh2`` does), so DATA events
carry ``flow_controlled_length`` 0 and the client acknowledges nothing.

``library()`` is the loaded library's version, or None where ``libnghttp2.so.14`` is missing (the
client then uses ``jh2``; ``ENABLED = False`` does the same, for the tests that run both).
The callbacks run inside ``mem_recv`` and ``mem_send``, which never yield to another greenlet: the
connection in the call is a module global (``_reading``), cheaper than a handle per callback, and
a lock keeps OS threads (cffi releases the GIL around C calls) from sharing it.
"""

from __future__ import annotations

import re
import threading
from importlib import metadata

import jh2.errors
import jh2.events
import jh2.exceptions
import jh2.settings
from jh2.connection import ConnectionState

try:
    from cffi import FFI
except ImportError:  # pragma: no cover - cffi comes with cryptography and pyOpenSSL
    FFI = None

SONAME = "libnghttp2.so.14"
MIN_VERSION = (1, 43, 0)  # error_callback2, no_http_messaging, mem_recv/mem_send (checked on 1.52)

_CDEF = """
typedef struct nghttp2_session nghttp2_session;
typedef struct nghttp2_session_callbacks nghttp2_session_callbacks;
typedef struct nghttp2_option nghttp2_option;
typedef struct {
    size_t length; int32_t stream_id; uint8_t type; uint8_t flags; uint8_t reserved;
} nghttp2_frame_hd;
typedef struct { nghttp2_frame_hd hd; uint32_t error_code; } nghttp2_rst_stream;
typedef struct {
    nghttp2_frame_hd hd; int32_t last_stream_id; uint32_t error_code;
    uint8_t *opaque_data; size_t opaque_data_len; uint8_t reserved;
} nghttp2_goaway;
typedef struct { uint8_t *name; uint8_t *value; size_t namelen; size_t valuelen; uint8_t flags; } nghttp2_nv;
typedef struct { int32_t settings_id; uint32_t value; } nghttp2_settings_entry;
typedef struct { nghttp2_frame_hd hd; size_t niv; nghttp2_settings_entry *iv; } nghttp2_settings;
typedef union {
    nghttp2_frame_hd hd; nghttp2_rst_stream rst_stream; nghttp2_settings settings; nghttp2_goaway goaway;
} nghttp2_frame;
typedef struct { int age; int version_num; const char *version_str; const char *proto_str; } nghttp2_info;

nghttp2_info *nghttp2_version(int);
const char *nghttp2_strerror(int);
int nghttp2_session_callbacks_new(nghttp2_session_callbacks **);
void nghttp2_session_callbacks_set_on_begin_headers_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, const nghttp2_frame *, void *));
void nghttp2_session_callbacks_set_on_header_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, const nghttp2_frame *, const uint8_t *, size_t, const uint8_t *, size_t,
            uint8_t, void *));
void nghttp2_session_callbacks_set_on_frame_recv_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, const nghttp2_frame *, void *));
void nghttp2_session_callbacks_set_on_data_chunk_recv_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, uint8_t, int32_t, const uint8_t *, size_t, void *));
void nghttp2_session_callbacks_set_on_stream_close_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, int32_t, uint32_t, void *));
void nghttp2_session_callbacks_set_on_frame_send_callback(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, const nghttp2_frame *, void *));
void nghttp2_session_callbacks_set_error_callback2(nghttp2_session_callbacks *,
    int (*)(nghttp2_session *, int, const char *, size_t, void *));
int nghttp2_option_new(nghttp2_option **);
void nghttp2_option_set_no_http_messaging(nghttp2_option *, int);
int nghttp2_session_client_new2(nghttp2_session **, const nghttp2_session_callbacks *, void *,
    const nghttp2_option *);
void nghttp2_session_del(nghttp2_session *);
int nghttp2_submit_settings(nghttp2_session *, uint8_t, const nghttp2_settings_entry *, size_t);
int nghttp2_submit_window_update(nghttp2_session *, uint8_t, int32_t, int32_t);
int32_t nghttp2_submit_request(nghttp2_session *, const void *, const nghttp2_nv *, size_t, const void *,
    void *);
ssize_t nghttp2_session_mem_send(nghttp2_session *, const uint8_t **);
ssize_t nghttp2_session_mem_recv(nghttp2_session *, const uint8_t *, size_t);
uint32_t nghttp2_session_get_next_stream_id(nghttp2_session *);
int nghttp2_session_want_read(nghttp2_session *);
int nghttp2_session_want_write(nghttp2_session *);
"""

DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0, 1, 3, 4, 7
END_STREAM, ACK = 0x1, 0x1
NV_FLAG_NO_INDEX = 0x1
MAX_CONCURRENT_STREAMS = jh2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
ENABLE_PUSH = jh2.settings.SettingCodes.ENABLE_PUSH
ENABLED = True  # False: jh2 even where the library is installed (module docstring)
CACHED_LISTS = 256  # request header lists kept as C arrays (a run sends a few distinct ones)

_cffi = _ng = _callbacks = _option = None
_version: str | None = None
_reading: NgConnection | None = None  # the connection inside ``mem_recv``/``mem_send`` (module docstring)
_lock = threading.Lock()  # one connection in the library's calls at a time: they release the GIL
_load_lock = threading.Lock()
_loaded: list = []  # [True] once loading was tried
CALLBACK_FAILURE = -902  # NGHTTP2_ERR_CALLBACK_FAILURE: a callback raised; the call fails with it


def _load() -> str | None:
    """Load the library and make the callbacks once; its version, or None without it."""
    if _cffi is not None or _loaded:
        return _version
    with _load_lock:
        if not _loaded:
            _load_once()
            _loaded.append(True)
    return _version


def _load_once() -> None:
    global _cffi, _ng, _callbacks, _option, _version
    if FFI is None:
        return
    ffi = FFI()
    ffi.cdef(_CDEF)
    try:
        lib = ffi.dlopen(SONAME)
    except OSError:
        return
    info = lib.nghttp2_version(0)
    version = ffi.string(info.version_str).decode()
    numbers = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if numbers is None or tuple(int(part) for part in numbers.groups()) < MIN_VERSION:
        return
    callbacks = ffi.new("nghttp2_session_callbacks **")
    lib.nghttp2_session_callbacks_new(callbacks)
    cb = callbacks[0]
    made = _make_callbacks(ffi)
    _callbacks_keep.extend(made)
    begin, header, frame, chunk, close, error, sent = made
    lib.nghttp2_session_callbacks_set_on_begin_headers_callback(cb, begin)
    lib.nghttp2_session_callbacks_set_on_header_callback(cb, header)
    lib.nghttp2_session_callbacks_set_on_frame_recv_callback(cb, frame)
    lib.nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, chunk)
    lib.nghttp2_session_callbacks_set_on_stream_close_callback(cb, close)
    lib.nghttp2_session_callbacks_set_error_callback2(cb, error)
    lib.nghttp2_session_callbacks_set_on_frame_send_callback(cb, sent)
    option = ffi.new("nghttp2_option **")
    lib.nghttp2_option_new(option)
    lib.nghttp2_option_set_no_http_messaging(option[0], 1)
    _cffi, _ng, _callbacks, _option, _version = ffi, lib, cb, option[0], version


_callbacks_keep: list = []  # the cffi callbacks live as long as the library


def _make_callbacks(ffi) -> list:
    buffer = ffi.buffer

    @ffi.callback("int(nghttp2_session *, const nghttp2_frame *, void *)", error=CALLBACK_FAILURE)
    def on_begin_headers(session, frame, user_data):
        _reading._block = []
        return 0

    @ffi.callback(
        "int(nghttp2_session *, const nghttp2_frame *, const uint8_t *, size_t, const uint8_t *, size_t,"
        " uint8_t, void *)",
        error=CALLBACK_FAILURE,
    )
    def on_header(session, frame, name, namelen, value, valuelen, flags, user_data):
        _reading._block.append((buffer(name, namelen)[:], buffer(value, valuelen)[:]))
        return 0

    @ffi.callback("int(nghttp2_session *, const nghttp2_frame *, void *)", error=CALLBACK_FAILURE)
    def on_frame_recv(session, frame, user_data):
        _reading._frame(frame)
        return 0

    @ffi.callback(
        "int(nghttp2_session *, uint8_t, int32_t, const uint8_t *, size_t, void *)", error=CALLBACK_FAILURE
    )
    def on_data_chunk(session, flags, stream_id, data, length, user_data):
        event = jh2.events.DataReceived()
        event.stream_id, event.data, event.flow_controlled_length = stream_id, buffer(data, length)[:], 0
        reading = _reading
        reading._events.append(event)
        if stream_id in reading._lengths:
            reading._lengths[stream_id][1] += length
        return 0

    @ffi.callback("int(nghttp2_session *, int32_t, uint32_t, void *)", error=CALLBACK_FAILURE)
    def on_stream_close(session, stream_id, error_code, user_data):
        if _reading is not None:
            _reading._closed(stream_id, error_code)
        return 0

    @ffi.callback("int(nghttp2_session *, int, const char *, size_t, void *)", error=CALLBACK_FAILURE)
    def on_error(session, code, message, length, user_data):
        if _reading is not None:
            _reading._error = ffi.string(message, length).decode("utf-8", "replace")
        return 0

    @ffi.callback("int(nghttp2_session *, const nghttp2_frame *, void *)", error=CALLBACK_FAILURE)
    def on_frame_send(session, frame, user_data):
        if _reading is not None:
            _reading._sent(frame)
        return 0

    return [
        on_begin_headers,
        on_header,
        on_frame_recv,
        on_data_chunk,
        on_stream_close,
        on_error,
        on_frame_send,
    ]


def _code_name(code: int) -> str:
    try:
        return jh2.errors.ErrorCodes(code).name
    except ValueError:
        return f"0x{code:x}"


def library() -> str | None:
    """``libnghttp2``'s version when the HTTP/2 arms use it, else None (``jh2``)."""
    return _load() if ENABLED else None


def describe() -> str:
    """``run.engine.http2``: the HTTP/2 arms' protocol library and its version."""
    version = library()
    return f"libnghttp2 {version}" if version else f"jh2 {metadata.version('jh2')}"


class NgConnection:
    """One client session of ``libnghttp2`` with the ``jh2`` ``H2Connection`` surface the client uses."""

    def __init__(self) -> None:
        if _load() is None:
            raise RuntimeError(f"{SONAME} is not available")
        session = _cffi.new("nghttp2_session **")
        rv = _ng.nghttp2_session_client_new2(session, _callbacks, _cffi.NULL, _option)
        if rv:
            raise MemoryError(_cffi.string(_ng.nghttp2_strerror(rv)).decode())
        self._session = _cffi.gc(session[0], _ng.nghttp2_session_del)
        self._events: list = []
        self._block: list = []
        self._responded: set[int] = set()  # streams whose final answer's header block came
        # Streams ended or reset lately: a later RST_STREAM, or the library's close of a stream the server
        # reset, hands out nothing more.
        self._finished: dict[int, None] = {}
        self._lengths: dict[int, list] = {}  # stream -> [its answer's content-length, body bytes so far]
        self._head: set[int] = set()  # streams of HEAD requests (no body, whatever content-length says)
        self._error: str | None = None  # the library's last error message
        self._violation: str | None = None  # a message rule the answer broke (``_frame``)
        self._goaway = False  # the server sent GOAWAY
        self._ended_by_library = False  # the library sent GOAWAY: the session is over
        self._sending = False  # inside ``data_to_send``
        self._submitted = 0  # the request queued by ``send_headers`` and not yet on the wire
        self._refused: str | None = None  # the library closed that request's stream before sending it
        self._nva: dict[tuple, tuple] = {}  # a request header list -> its C array (and what it points to)
        self._pending = b""  # bytes taken out of the library after an error, sent first

    # -- the H2Connection surface ------------------------------------------------------------

    @property
    def state_machine(self):
        return self

    @property
    def state(self) -> ConnectionState:
        """CLOSED once the session wants neither to read nor to write (``Connection.usable``)."""
        session = self._session
        if _ng.nghttp2_session_want_read(session) or _ng.nghttp2_session_want_write(session):
            return ConnectionState.CLIENT_OPEN
        return ConnectionState.CLOSED

    def initiate_connection(self) -> None:
        """The preface's SETTINGS: no server push (the client never accepts one)."""
        self._settings({ENABLE_PUSH: 0})

    def update_settings(self, settings: dict) -> None:
        self._settings(settings)

    def _settings(self, settings: dict) -> None:
        entries = _cffi.new("nghttp2_settings_entry[]", [(int(k), int(v)) for k, v in settings.items()])
        self._check(_ng.nghttp2_submit_settings(self._session, 0, entries, len(settings)))

    def increment_flow_control_window(self, increment: int, stream_id: int | None = None) -> None:
        self._check(_ng.nghttp2_submit_window_update(self._session, 0, stream_id or 0, increment))

    def get_next_available_stream_id(self) -> int:
        return _ng.nghttp2_session_get_next_stream_id(self._session)

    def send_headers(self, stream_id: int, headers: list, end_stream: bool = True) -> None:
        """Queue a request without a body on ``stream_id`` (the next one: the library numbers them);
        ``data_to_send`` then puts it on the wire or fails."""
        if not end_stream:
            raise NotImplementedError("requests with a body are sent by jh2")
        key = tuple(headers)
        entry = self._nva.get(key)
        if entry is None:
            entry = self._nva[key] = _nv_array(headers)
            if len(self._nva) > CACHED_LISTS:
                self._nva.pop(next(iter(self._nva)))
        null = _cffi.NULL
        got = _ng.nghttp2_submit_request(self._session, null, entry[0], entry[1], null, null)
        if got < 0:
            raise jh2.exceptions.ProtocolError(_cffi.string(_ng.nghttp2_strerror(got)).decode())
        if got != stream_id:
            raise jh2.exceptions.ProtocolError(f"stream {got} opened where {stream_id} was expected")
        self._submitted = got
        if entry[3]:
            self._head.add(got)

    def data_to_send(self) -> bytes:
        """What the library has to send. A request queued by ``send_headers`` that it did not put out
        (held back at the server's SETTINGS_MAX_CONCURRENT_STREAMS, or refused: e.g. a header block
        over its limit) raises ``ProtocolError``: the request fails here, not at its timeout."""
        global _reading
        with _lock:
            _reading = self
            self._sending = True
            try:
                out = self._drain()
            finally:
                _reading = None
                self._sending = False
        if self._submitted:
            stream_id, self._submitted = self._submitted, 0
            refused, self._refused = self._refused, None
            if refused:
                why = f"refused by the client's HTTP/2 library ({refused})"
            else:
                why = "held back by the client's HTTP/2 library (the server's stream limit is reached)"
            self._pending = out  # what did go out is sent with the next flush
            raise jh2.exceptions.ProtocolError(f"the request on stream {stream_id} was not sent: {why}")
        return out

    def _drain(self) -> bytes:
        """Everything the library has queued to send (with ``_lock`` held and ``_reading`` set)."""
        out = _cffi.new("const uint8_t **")
        chunks, self._pending = [self._pending] if self._pending else [], b""
        while True:
            n = _ng.nghttp2_session_mem_send(self._session, out)
            if n < 0:
                raise jh2.exceptions.ProtocolError(_cffi.string(_ng.nghttp2_strerror(n)).decode())
            if n == 0:
                break
            chunks.append(_cffi.buffer(out[0], n)[:])
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def receive_data(self, data: bytes) -> list:
        """Feed what was read; the events it completed, in order, as ``jh2``'s (with any a send
        produced since the last read). A connection error (the server broke the protocol: the library
        ends the session with a GOAWAY of its own, or the answer broke a message rule) raises
        ``ProtocolError`` with the reason."""
        global _reading
        self._error = None
        with _lock:
            _reading = self
            try:
                rv = _ng.nghttp2_session_mem_recv(self._session, data, len(data))
                # What the library queued in answer, taken out now (sent by the client's next flush): a
                # connection error's GOAWAY (``on_frame_send``), once out, ends the session.
                self._pending = self._drain()
            finally:
                _reading = None
        events, self._events = self._events, []
        if rv < 0:
            raise jh2.exceptions.ProtocolError(self._error or _cffi.string(_ng.nghttp2_strerror(rv)).decode())
        if self._violation is not None:
            raise jh2.exceptions.ProtocolError(self._violation)
        if self._ended_by_library or (not self._goaway and not _ng.nghttp2_session_want_read(self._session)):
            said = self._error or "the session ended"
            raise jh2.exceptions.ProtocolError(f"HTTP/2 connection error: {said}")
        return events

    def acknowledge_received_data(self, acknowledged_size: int, stream_id: int) -> None:
        """Nothing to do: the library hands received bytes back itself (module docstring)."""

    # -- callbacks (inside ``receive_data``) ------------------------------------------------

    def _frame(self, frame) -> None:
        hd = frame.hd
        kind, stream_id, flags = hd.type, hd.stream_id, hd.flags
        events = self._events
        if kind == DATA:
            if flags & END_STREAM:
                self._ended(stream_id)
        elif kind == HEADERS:
            block, self._block = self._block, []
            ends = flags & END_STREAM
            if stream_id in self._responded:
                if not ends:
                    self._violation = f"trailers on stream {stream_id} without END_STREAM"
                event = jh2.events.TrailersReceived()
            elif _informational(block):
                if ends:
                    self._violation = f"an informational (1xx) answer ended stream {stream_id}"
                event = jh2.events.InformationalResponseReceived()
            else:
                event = jh2.events.ResponseReceived()
                self._responded.add(stream_id)
                self._expect_length(stream_id, block)
            event.stream_id, event.headers = stream_id, block
            events.append(event)
            if ends:
                self._ended(stream_id)
        elif kind == RST_STREAM:
            if stream_id not in self._finished:  # jh2 ignores a reset of a stream already ended
                self._stream_reset(stream_id, frame.rst_stream.error_code)
        elif kind == SETTINGS and not flags & ACK:
            settings = frame.settings
            changed = {}
            for i in range(settings.niv):
                entry = settings.iv[i]
                if entry.settings_id == MAX_CONCURRENT_STREAMS:
                    changed[MAX_CONCURRENT_STREAMS] = jh2.settings.ChangedSetting(
                        MAX_CONCURRENT_STREAMS, None, entry.value
                    )
            event = jh2.events.RemoteSettingsChanged()
            event.changed_settings = changed
            events.append(event)
        elif kind == GOAWAY:
            self._goaway = True
            event = jh2.events.ConnectionTerminated()
            event.error_code = frame.goaway.error_code
            event.last_stream_id = frame.goaway.last_stream_id
            event.additional_data = None
            events.append(event)

    def _expect_length(self, stream_id: int, block: list) -> None:
        """Note the answer's content-length, checked at its end (as ``jh2`` does): not for a HEAD
        request's answer, a 204 or a 304."""
        head = stream_id in self._head
        self._head.discard(stream_id)
        if head:
            return
        length = status = None
        for name, value in block:
            if name == b"content-length":
                length = value
            elif name == b":status":
                status = value
        if length is not None and status not in (b"204", b"304"):
            try:
                self._lengths[stream_id] = [int(length), 0]
            except ValueError:
                self._violation = f"stream {stream_id}: content-length {length!r} is not a number"

    def _ended(self, stream_id: int) -> None:
        event = jh2.events.StreamEnded()
        event.stream_id = stream_id
        self._events.append(event)
        self._responded.discard(stream_id)
        self._head.discard(stream_id)
        expected = self._lengths.pop(stream_id, None)
        if expected is not None and expected[0] != expected[1]:
            said, got = expected
            self._violation = f"stream {stream_id}: the body was {got} bytes where content-length said {said}"
        self._finish(stream_id)

    def _finish(self, stream_id: int) -> None:
        self._finished[stream_id] = None
        if len(self._finished) > CACHED_LISTS:
            del self._finished[next(iter(self._finished))]

    def _stream_reset(self, stream_id: int, error_code: int) -> None:
        event = jh2.events.StreamReset()
        event.stream_id, event.error_code, event.remote_reset = stream_id, error_code, True
        self._events.append(event)
        self._responded.discard(stream_id)
        self._head.discard(stream_id)
        self._lengths.pop(stream_id, None)
        self._finish(stream_id)

    def _closed(self, stream_id: int, error_code: int) -> None:
        """The library closed a stream. With an error and not by the server's RST_STREAM: the request
        being sent was never put on the wire (``data_to_send`` fails it), or another stream is reset.
        After the server's GOAWAY the streams above its last are the GOAWAY's (``ConnectionTerminated``),
        sent again."""
        self._lengths.pop(stream_id, None)
        if self._sending and error_code and stream_id == self._submitted:
            self._refused = _code_name(error_code)
        elif error_code and not self._goaway and stream_id not in self._finished:
            self._stream_reset(stream_id, error_code)

    def _sent(self, frame) -> None:
        """A frame went out: the request's HEADERS (it is on the wire), or the library's GOAWAY (it
        ended the session: why)."""
        kind = frame.hd.type
        if kind == HEADERS and frame.hd.stream_id == self._submitted:
            self._submitted = 0
        elif kind == GOAWAY:
            self._ended_by_library = True
            goaway = frame.goaway
            said = _cffi.buffer(goaway.opaque_data, goaway.opaque_data_len)[:].decode("utf-8", "replace")
            self._error = f"{_code_name(goaway.error_code)}: {said or self._error or 'no reason given'}"

    def _check(self, rv: int) -> None:
        if rv < 0:
            raise jh2.exceptions.ProtocolError(_cffi.string(_ng.nghttp2_strerror(rv)).decode())


def _informational(block: list) -> bool:
    for name, value in block:
        if name == b":status":
            return value[:1] == b"1"
    return False


def _nv_array(headers: list) -> tuple:
    """A request's header list as the library's ``nghttp2_nv`` array (its count, what it points to,
    whether it is a HEAD request); ``authorization`` (jh2's never-indexed fields) with NO_INDEX, as
    ``jh2`` sends it."""
    kept = []
    head = False
    nva = _cffi.new("nghttp2_nv[]", len(headers))
    for i, header in enumerate(headers):
        name, value = bytes(header[0]), bytes(header[1])
        head = head or (name == b":method" and value == b"HEAD")
        name_c, value_c = _cffi.new("uint8_t[]", name), _cffi.new("uint8_t[]", value)
        kept += (name_c, value_c)
        nv = nva[i]
        nv.name, nv.value, nv.namelen, nv.valuelen = name_c, value_c, len(name), len(value)
        nv.flags = NV_FLAG_NO_INDEX if getattr(header, "indexable", True) is False else 0
    return nva, len(headers), kept, head
