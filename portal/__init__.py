# Load the Celery app with Django, so tasks sent from web processes use its broker settings
# (without it, shared_task falls back to Celery's default app and its default broker).
from workers.celery_app import app as celery_app

__version__ = "0.4.0"

__all__ = ("__version__", "celery_app")
