"""The demo's embedded broker: where kombu's filesystem transport keeps its messages
(``portal/settings.py`` with ``filesystem://``; the transport itself is ``workers/broker_fs.py``)."""

from __future__ import annotations

from pathlib import Path


def folder_options(folder: Path) -> dict:
    """The transport's options for a broker in ``folder``: its messages there, the processed ones and
    the control files each in a folder of their own."""
    return {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "processed_folder": str(folder / "processed"),
        # Without this kombu writes its control (broadcast) files into the working directory.
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }
