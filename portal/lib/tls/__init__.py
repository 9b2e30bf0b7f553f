"""TLS: certificates, client certificates, the TLS matrix, TLS errors in words, and tuning advice."""
