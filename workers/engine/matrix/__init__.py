"""The TLS configuration matrix on the generator's side (``tls_matrix``): each variant's client
context and the handshake that tells what it negotiated, on the system library with the arm's
expansion into sub-arms (``variants``) and on the bundled one (``bundled``); what a variant must
be on either (``rules``); the system library's handshake messages parsed (``handshake_log``).
"""
