"""Read-only share links (``/s/<token>/``) of a run's report or a compare view, for auditors without
an account: expiring, revocable, every view logged."""
