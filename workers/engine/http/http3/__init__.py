"""HTTP/3 for the engine: QUIC connections on the engine's own UDP sockets and timers (``driver``),
the timed client of the ``h3``, ``h3_new``, ``h3_resumed`` and ``h3_0rtt`` arms (``client``), what
``qh3`` is asked beyond its public API (``quic``) and how a request fails (``errors``)."""
