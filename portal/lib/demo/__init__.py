"""The demo's target and the tests' local TLS stacks: Caddy's configuration, the demo's pages and
the former Python target's Gunicorn TLS hooks."""
