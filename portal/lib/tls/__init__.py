"""TLS: the configuration matrix and the advice it gives, client certificates, self-signed
certificates, TLS errors in words."""
