"""Serves the WSGI application of the module HARNESS_WSGI_MODULE names, under gunicorn.

The services read their configuration with oslo.config, which parses sys.argv: gunicorn's own
arguments there make them exit ("unrecognized arguments"). Cleared before the import.
"""

import importlib
import os
import sys

sys.argv = sys.argv[:1]
application = importlib.import_module(os.environ["HARNESS_WSGI_MODULE"]).application
