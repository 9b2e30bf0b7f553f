"""The timed HTTP clients of the arms, one module per protocol: ``http1`` (``TimedClient``),
``http2`` (``H2Client``, its connection's state in ``http2_state``); HTTP/3 goes beside them.
What they share: ``endpoint`` (where and how an arm connects: ``Endpoint``, the arms'
``ConnectionPolicy``), ``sample`` (one request's timed outcome), ``cooperative`` (a connection
driven directly on gevent's hub); ``by_protocol`` makes an arm's client from its policy.
"""
