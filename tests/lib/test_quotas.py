"""portal.lib.runs.quotas: planned requests and the messages of each limit."""

from __future__ import annotations

from portal.lib.runs import quotas

LIMITS = quotas.Limits(
    max_users=10,
    max_arrival_rate=100,
    max_duration_s=60,
    max_warmup_s=10,
    max_rounds=3,
    max_requests_per_run=10_000,
    max_concurrent_runs=2,
    max_runs_per_day=5,
)
ARMS = [{"name": "plain", "url": "http://h/"}, {"name": "tls", "url": "https://h/"}]


def test_planned_requests_open_loop_is_the_schedule_closed_loop_an_upper_bound():
    open_loop = {"arms": ARMS, "arrival_rate": 50, "warmup_s": 2, "duration_s": 8, "rounds": 3}
    assert quotas.planned_requests(open_loop) == 50 * 10 * 2 * 3
    closed = {"arms": ARMS, "users": 4, "warmup_s": 2, "duration_s": 8}
    assert quotas.planned_requests(closed) == 4 * quotas.CLOSED_LOOP_RPS_PER_USER * 10 * 2
    # A think time bounds each user's rate.
    assert quotas.planned_requests({**closed, "think_time_s": 0.5}) == 4 * 2 * 10 * 2


def test_within_the_limits_nothing_is_said():
    config = {"arms": ARMS, "users": 10, "arrival_rate": 100, "warmup_s": 10, "duration_s": 40, "rounds": 1}
    assert quotas.check(LIMITS, config, "Acme") == []
    assert quotas.check_counts(LIMITS, 1, 4, "Acme") == []


def test_each_limit_has_its_message():
    config = {"arms": ARMS, "users": 11, "arrival_rate": 101, "warmup_s": 11, "duration_s": 61, "rounds": 4}
    problems = dict(quotas.check(LIMITS, config, "Acme"))
    assert problems["users"] == "At most 10 users in project Acme (operator limit)."
    assert problems["arrival_rate"] == "At most 100 req/s in project Acme (operator limit)."
    assert problems["duration_s"] == "At most 60 s of measurement per arm in project Acme (operator limit)."
    assert problems["warmup_s"] == "At most 10 s of warm-up per arm in project Acme (operator limit)."
    assert problems["rounds"] == "At most 3 rounds in project Acme (operator limit)."
    # The request budget speaks once the fields are within their limits.
    assert None not in problems
    [(field, message)] = quotas.check(LIMITS, {**config, "users": 10, "arrival_rate": 100, "warmup_s": 10,
                                                "duration_s": 60, "rounds": 3}, "Acme")  # fmt: skip
    assert field is None and message.startswith("This run may send up to 42,000 requests")
    assert "at most 10,000 per run (operator limit)" in message
    concurrent, daily = quotas.check_counts(LIMITS, 2, 5, "Acme")
    assert concurrent.startswith("Project Acme already has 2 run(s) queued or running; at most 2 at a time")
    assert daily.startswith("Project Acme started 5 run(s) in the last 24 hours; at most 5 a day")


def test_a_rate_that_overflows_is_more_than_any_budget_not_an_error():
    """1e308 req/s is valid JSON and a finite float: the plan overflows to infinity, which once made
    int() raise (a 500 from the API and the webhook)."""
    config = {"arms": ARMS, "arrival_rate": 1e308, "warmup_s": 2, "duration_s": 8, "rounds": 1}
    assert quotas.planned_requests(config) > LIMITS.max_requests_per_run
    problems = dict(quotas.check(LIMITS, config, "Acme"))
    assert problems["arrival_rate"] == "At most 100 req/s in project Acme (operator limit)."
