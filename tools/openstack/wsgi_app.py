"""Serves the WSGI application of the module HARNESS_WSGI_MODULE names, under gunicorn.

The services read their configuration with oslo.config, which parses sys.argv: gunicorn's own
arguments there make them exit ("unrecognized arguments"). They are replaced before the import by
HARNESS_WSGI_ARGS (split as a shell would), for a service that finds its configuration only
through its arguments (Octavia); the others read theirs from a variable of their own.
"""

import importlib
import os
import shlex
import sys

sys.argv = sys.argv[:1] + shlex.split(os.environ.get("HARNESS_WSGI_ARGS", ""))
application = importlib.import_module(os.environ["HARNESS_WSGI_MODULE"]).application
