"""The WSGI application Gunicorn serves (``portal.wsgi:application``).

A request body sent with ``Transfer-Encoding: chunked`` has no Content-Length, and Django reads a body
without one as empty: an API call from curl reading stdin (or many CI tools) would arrive with no JSON
at all. Gunicorn takes the chunks apart and ends ``wsgi.input`` at the last one, so ``whole_bodies``
reads such a body first, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (413 above, after reading and
dropping up to as much again so the client reads the answer), and hands Django a body with its length,
the same for every view (API, webhooks, forms).
"""

import io
import json
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def whole_bodies(app, limit_bytes: int):
    def wrapped(environ, start_response):
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            stream, parts, left = environ["wsgi.input"], [], limit_bytes + 1
            while left > 0 and (part := stream.read(min(left, 65536))):
                parts.append(part)
                left -= len(part)
            body = b"".join(parts)
            if len(body) > limit_bytes:
                _drain(stream, limit_bytes)
                detail = f"The body is larger than {limit_bytes} bytes."
                answer = json.dumps({"detail": detail}).encode()
                headers = [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))]
                start_response("413 Request Entity Too Large", headers + [("Connection", "close")])
                return [answer]
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        return app(environ, start_response)

    return wrapped


def _drain(stream, most_bytes: int) -> None:
    """Read and drop what is left of a refused body, up to ``most_bytes`` more: a client still sending
    then reads the 413 (closing with its bytes unread makes the kernel reset the connection, and the
    client sees a broken pipe instead). A body bigger than that is cut off, reset and all."""
    while most_bytes > 0 and (part := stream.read(min(most_bytes, 65536))):
        most_bytes -= len(part)


def _application():
    from django.conf import settings

    django_app = get_wsgi_application()
    return whole_bodies(django_app, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440)


application = _application()
