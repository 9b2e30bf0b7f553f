"""The portal on Gunicorn for the tests that go through its doors (tests/gunicorn_portal.py)."""

from tests.gunicorn_portal import gunicorn_portal  # noqa: F401 - a fixture
