"""The demo's embedded broker: kombu's filesystem transport, each message written whole before any
consumer can take it.

kombu's own ``_put`` opens the message file under its final name, then locks and writes it; its
``_get`` lists the folder, moves any file of that name away and reads it, without the writer's lock.
A consumer polling between the two reads an empty or partial message and dies on the JSON: the
demo's maintenance worker did (``JSONDecodeError: Expecting value``), which stops the whole demo.
Here a message is written under a name ``_get`` never takes (``….msg.part``: its queue part does
not end in ``.msg``) and renamed into place; a rename within one folder is atomic, so a consumer
finds the whole message or none.

``portal/settings.py`` names this transport (``CELERY_BROKER_TRANSPORT``) whenever the broker is
``filesystem://``, with its folders from ``portal.lib.demo.broker.folder_options``. It overrides
kombu's private ``Channel._put``, checked on the kombu version below (``tests/workers/test_broker_fs.py``
fails on any other until it is checked again).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PRIVATE_API_CHECKED_ON = "5.7.0"  # kombu
PARTIAL = ".part"  # a message being written: its name ends so, which ``_get`` never takes


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: written under a partial name, then renamed into place (the
        name kombu's own ``_put`` gives: its time in ms first, so ``_get`` takes messages in order)."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL
        data = str_to_bytes(dumps(payload))  # before the file exists: a payload that fails leaves none
        try:
            with open(partial, "wb") as f:
                f.write(data)
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)  # a message that could not be written whole leaves nothing behind
            raise ChannelError(f"Cannot add file {final!r} to directory: {exc}") from exc


class Transport(filesystem.Transport):
    Channel = Channel
