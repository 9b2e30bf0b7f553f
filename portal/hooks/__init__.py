"""Signed webhook triggers of saved scenarios (``/hooks/<id>``) and the signed callbacks sent when
their runs end."""
