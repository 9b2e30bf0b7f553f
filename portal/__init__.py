"""Tollgate's portal: stores runs and shows them. It enqueues work through ``portal.runs.dispatch``
and never imports the worker side (``workers.runner``, the engine, the probes)."""

__version__ = "0.5.0"
