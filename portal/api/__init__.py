"""The JSON API under ``/api/v1/`` (Django REST framework + drf-spectacular) and its per-user,
per-project bearer tokens."""
