"""Security: the outbound address policy, secrets at rest, report signing, SSH keys, webhook
signatures, redaction and target verification."""
