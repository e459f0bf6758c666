import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from trainhub.common.collector import freeze_loaded_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")
application = get_wsgi_application()
# Import every view now (Django would on the first request) so that they too are frozen.
_views = get_resolver().url_patterns
freeze_loaded_objects()
