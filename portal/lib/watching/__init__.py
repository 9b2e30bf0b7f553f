"""A cost watched over time (docs/watching.md): schedules, judgements against a pinned baseline,
alerts. Each module is the pure half of the app of its name (``portal/schedules``,
``portal/judgements``, ``portal/alerts``)."""
