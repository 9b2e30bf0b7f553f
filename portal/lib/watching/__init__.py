"""Watching a cost over time (docs/watching.md): schedules, judgements against a baseline, alerts."""
