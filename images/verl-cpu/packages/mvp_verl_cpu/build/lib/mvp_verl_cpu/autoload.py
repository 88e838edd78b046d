"""Entry point module of the ``verl.plugins`` group: importing it registers the plugin.

verl's loader (``verl/__init__.py``) calls ``entry_point.load()``, which imports
the target and returns it without calling it, so registration happens here,
at import time.
"""

from . import register

register()
