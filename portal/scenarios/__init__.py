"""Saved scenarios in the portal: list, edit (each edit a new version), budgets, run."""
