"""A run's definition: its options (RunSpec), the engine's config and messages, process names and
quotas."""
