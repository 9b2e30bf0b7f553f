"""Signed, frozen reports: the portal's Ed25519 report-signing keys, the frozen report of a finished
run and the published public keys (``/.well-known/tollgate-report-keys.json``)."""
