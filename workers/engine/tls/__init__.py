"""TLS on the generator's side: the run's TLS library (``libraries``: Python's ``ssl`` or the
bundled pyOpenSSL), the ``tls_mtls`` arm's client-certificate check (``mtls``), and the
report's TLS facts (``facts``: one handshake and its resumption; ``acceptance``: what the server
accepts, by short handshakes on the bundled library).
"""
