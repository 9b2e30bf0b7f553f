"""The API's JSON parser: DRF's, with one more refusal. ``[[[[…`` nested deeper than Python's
``json`` goes raises RecursionError, which DRF's parser does not catch (a 500); here it is a 400
in the API's error shape like any other malformed body."""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
