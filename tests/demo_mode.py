"""pytest plugin: the tests run in demo mode (``TOLLGATE_DEMO=1``) unless the environment says otherwise.

Loaded with ``-p tests.demo_mode`` from pyproject.toml's addopts, i.e. before pytest-django imports
the settings (a conftest.py would be too late). Subprocesses of the tests inherit the variable.
In demo mode the settings generate SECRET_KEY into ``var/secret_key`` and derive the Fernet key
from it; outside it they refuse to start without real secrets (see tests/test_settings.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("TOLLGATE_DEMO", "1")
