"""Secrets fail closed: the settings, loaded by real processes with a clean environment.

Outside demo mode the settings refuse to start without SECRET_KEY or TOLLGATE_SECRET_KEYS, or with a
malformed key; demo mode and TOLLGATE_SECRETS_DIR generate secrets once; production settings pass
``manage.py check --deploy --fail-level WARNING``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portal.lib.security.secrets import derive_key, generate_key, generate_secret_key
from tests.demo_mode import own_redis_db

ROOT = Path(__file__).resolve().parent.parent
SHOW = (
    "import json, sys, time\n"
    "time.sleep(max(0.0, float(sys.argv[1]) - time.time()) if len(sys.argv) > 1 else 0.0)\n"
    "from django.conf import settings\n"
    "print(json.dumps({name: getattr(settings, name, None) for name in (\n"
    "    'SECRET_KEY', 'TOLLGATE_SECRET_KEYS', 'SECURE_PROXY_SSL_HEADER', 'SECURE_SSL_REDIRECT',\n"
    "    'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS',\n"
    "    'TOLLGATE_ALLOW_NETWORKS', 'PASSWORD_HASHERS')}))\n"
)


def clean_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """Only PATH from the test's environment: no TOLLGATE_DEMO, no secrets."""
    base = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "TOLLGATE_VAR_DIR": str(tmp_path / "var"),
    }
    if os.environ.get("DATABASE_URL"):
        base["DATABASE_URL"] = os.environ["DATABASE_URL"]
    return {**base, **env}


def load_settings(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SHOW, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def loaded(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def refused(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "ImproperlyConfigured" in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


def test_without_secret_key_the_settings_refuse_to_start(tmp_path):
    for value in (None, "", "  "):
        env = clean_env(tmp_path, TOLLGATE_SECRET_KEYS=generate_key(), TOLLGATE_DEMO="0", DEBUG="1")
        if value is not None:
            env["SECRET_KEY"] = value
        message = refused(load_settings(env))
        assert "SECRET_KEY is not set" in message
        assert "TOLLGATE_SECRETS_DIR" in message
    assert not (tmp_path / "var" / "secret_key").exists()


def test_the_tests_cheap_password_hashes_exist_in_demo_mode_only(tmp_path):
    fast = {"TOLLGATE_TEST_FAST_PASSWORD_HASHES": "1"}
    production = clean_env(
        tmp_path, SECRET_KEY=generate_secret_key(), TOLLGATE_SECRET_KEYS=generate_key(), **fast
    )
    assert loaded(load_settings(production))["PASSWORD_HASHERS"][0].endswith(".PBKDF2PasswordHasher")
    assert "MD5" not in " ".join(loaded(load_settings(production))["PASSWORD_HASHERS"])
    demo = loaded(load_settings(clean_env(tmp_path, TOLLGATE_DEMO="1")))
    assert demo["PASSWORD_HASHERS"][0].endswith(".PBKDF2PasswordHasher")  # the demo's accounts: PBKDF2
    tests = loaded(load_settings(clean_env(tmp_path, TOLLGATE_DEMO="1", **fast)))
    assert tests["PASSWORD_HASHERS"] == [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]


def test_without_fernet_keys_the_settings_refuse_to_start(tmp_path):
    message = refused(load_settings(clean_env(tmp_path, SECRET_KEY=generate_secret_key())))
    assert "TOLLGATE_SECRET_KEYS is not set" in message
    assert "Fernet.generate_key()" in message  # how to make one


def test_a_malformed_fernet_key_is_refused_without_showing_it(tmp_path):
    env = clean_env(
        tmp_path, SECRET_KEY=generate_secret_key(), TOLLGATE_SECRET_KEYS=f"{generate_key()},oops-7d1c"
    )
    proc = load_settings(env)
    message = refused(proc)
    assert "TOLLGATE_SECRET_KEYS: key 2 of 2 is not a Fernet key" in message
    assert "oops-7d1c" not in proc.stderr

    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "fernet_keys").write_text("oops-7d1c\n")
    message = refused(load_settings(clean_env(tmp_path, TOLLGATE_SECRETS_DIR=str(secrets_dir))))
    assert f"{secrets_dir / 'fernet_keys'}: key 1 of 1 is not a Fernet key" in message


def test_demo_mode_generates_the_secret_key_once_and_derives_the_fernet_key(tmp_path):
    env = clean_env(tmp_path, TOLLGATE_DEMO="1")
    first, second = loaded(load_settings(env)), loaded(load_settings(env))
    key_file = tmp_path / "var" / "secret_key"
    assert first["SECRET_KEY"] == key_file.read_text().strip() == second["SECRET_KEY"]
    assert len(first["SECRET_KEY"]) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert first["TOLLGATE_SECRET_KEYS"] == [derive_key(first["SECRET_KEY"])]
    assert second["TOLLGATE_SECRET_KEYS"] == first["TOLLGATE_SECRET_KEYS"]
    # Configured secrets win over the demo's.
    configured = {"SECRET_KEY": generate_secret_key(), "TOLLGATE_SECRET_KEYS": generate_key()}
    shown = loaded(load_settings({**env, **configured}))
    assert shown["SECRET_KEY"] == configured["SECRET_KEY"]
    assert shown["TOLLGATE_SECRET_KEYS"] == [configured["TOLLGATE_SECRET_KEYS"]]


def test_secrets_dir_generates_the_secrets_once_and_processes_starting_together_agree(tmp_path):
    secrets_dir = tmp_path / "secrets"  # does not exist yet, like a fresh volume's subdirectory
    env = clean_env(tmp_path, TOLLGATE_SECRETS_DIR=str(secrets_dir))
    start = str(time.time() + 1.5)  # web, worker and beat of docker-compose start at once
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHOW, start], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0]
    shown = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert all(s == shown[0] for s in shown)
    assert sorted(p.name for p in secrets_dir.iterdir()) == ["fernet_keys", "secret_key"]
    for name in ("fernet_keys", "secret_key"):
        assert stat.S_IMODE((secrets_dir / name).stat().st_mode) == 0o600
    assert shown[0]["SECRET_KEY"] == (secrets_dir / "secret_key").read_text().strip()
    assert shown[0]["TOLLGATE_SECRET_KEYS"] == (secrets_dir / "fernet_keys").read_text().split()
    assert shown[0]["TOLLGATE_SECRET_KEYS"] != [derive_key(shown[0]["SECRET_KEY"])]  # independent keys
    assert loaded(load_settings(env)) == shown[0]  # the next start reads the same files

    # Rotation in a container: a new key in front of the file's old one.
    new = generate_key()
    (secrets_dir / "fernet_keys").write_text(f"{new}\n{shown[0]['TOLLGATE_SECRET_KEYS'][0]}\n")
    assert loaded(load_settings(env))["TOLLGATE_SECRET_KEYS"] == [new, shown[0]["TOLLGATE_SECRET_KEYS"][0]]


def production_env(tmp_path: Path, **env: str) -> dict[str, str]:
    return clean_env(
        tmp_path,
        DEBUG="0",
        TOLLGATE_HTTPS="1",
        SECRET_KEY=generate_secret_key(),
        TOLLGATE_SECRET_KEYS=generate_key(),
        ALLOWED_HOSTS="tollgate.example",
        **env,
    )


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy(tmp_path):
    proc = check_deploy(production_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout

    # TOLLGATE_HTTPS is what switches the secure cookies, the redirect and HSTS on.
    env = production_env(tmp_path)
    del env["TOLLGATE_HTTPS"]
    proc = check_deploy(env)
    assert proc.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in proc.stderr + proc.stdout


def test_https_settings_and_the_proxy_header_switch(tmp_path):
    shown = loaded(load_settings(production_env(tmp_path)))
    assert shown["SECURE_SSL_REDIRECT"] and shown["SESSION_COOKIE_SECURE"] and shown["CSRF_COOKIE_SECURE"]
    assert shown["SECURE_HSTS_SECONDS"] == 31536000
    assert shown["SECURE_PROXY_SSL_HEADER"] is None  # a client must not be able to claim https
    shown = loaded(load_settings(production_env(tmp_path, TOLLGATE_PROXY_SSL_HEADER="1")))
    assert shown["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_the_outbound_allow_list_is_empty_by_default_and_checked_at_startup(tmp_path):
    env = clean_env(tmp_path, TOLLGATE_DEMO="1")
    assert loaded(load_settings(env))["TOLLGATE_ALLOW_NETWORKS"] == []
    shown = loaded(load_settings({**env, "TOLLGATE_ALLOW_NETWORKS": " 127.0.0.0/8, ::1/128,10.20.0.0/16 "}))
    assert shown["TOLLGATE_ALLOW_NETWORKS"] == ["127.0.0.0/8", "::1/128", "10.20.0.0/16"]
    for bad in ("10.0.0.1/8", "intranet", "127.0.0.0/8;::1/128"):
        message = refused(load_settings({**env, "TOLLGATE_ALLOW_NETWORKS": bad}))
        assert message.startswith("django.core.exceptions.ImproperlyConfigured: TOLLGATE_ALLOW_NETWORKS: ")
        assert "is not a network in CIDR notation" in message


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("redis://127.0.0.1:6379/15", "gw0", "redis://127.0.0.1:6379/15"),
        ("redis://127.0.0.1:6379/15", "gw1", "redis://127.0.0.1:6379/14"),
        ("redis://127.0.0.1:6379/0", "gw1", "redis://127.0.0.1:6379/15"),
        ("redis://127.0.0.1:6379", "gw1", "redis://127.0.0.1:6379"),  # no database named: left alone
        ("redis://127.0.0.1:6379/12", "", "redis://127.0.0.1:6379/12"),  # not under xdist
    ],
)
def test_each_xdist_worker_gets_its_own_redis_database(url, worker, expected):
    assert own_redis_db(url, worker) == expected


SQLITE_TURNS = (
    "import json, threading, time\n"
    "import django\n"
    "django.setup()\n"
    "from django.db import connection, connections, transaction\n"
    "with connection.cursor() as c:\n"
    "    c.execute('CREATE TABLE deliveries (n integer)')\n"
    "errors = []\n"
    "def deliver():\n"
    "    try:\n"
    "        with transaction.atomic():\n"
    "            with connection.cursor() as c:\n"
    "                c.execute('SELECT count(*) FROM deliveries')\n"
    "                seen = c.fetchone()[0]\n"
    "                time.sleep(0.2)\n"
    "                c.execute('INSERT INTO deliveries VALUES (%s)', [seen])\n"
    "    except Exception as exc:\n"
    "        errors.append(repr(exc))\n"
    "    finally:\n"
    "        connections.close_all()\n"
    "threads = [threading.Thread(target=deliver) for _ in range(4)]\n"
    "[t.start() for t in threads]\n"
    "[t.join() for t in threads]\n"
    "with connection.cursor() as c:\n"
    "    c.execute('SELECT n FROM deliveries ORDER BY n')\n"
    "    print(json.dumps({'errors': errors, 'seen': [row[0] for row in c.fetchall()]}))\n"
)


def test_the_demo_database_lets_read_then_write_transactions_take_turns(tmp_path):
    """The demo runs on SQLite: concurrent transactions that read, then write (a webhook delivery:
    replay and idempotency checks, then the run) must wait for each other, not fail with "database is
    locked" (which answered 500 to concurrent deliveries), and each must see the ones before it."""
    env = clean_env(tmp_path, TOLLGATE_DEMO="1")
    env.pop("DATABASE_URL", None)  # the demo's default: var/tollgate.sqlite3
    (tmp_path / "var").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", SQLITE_TURNS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"errors": [], "seen": [0, 1, 2, 3]}
