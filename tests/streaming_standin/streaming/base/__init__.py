"""Stand-in for ``streaming.base`` (see ``streaming/__init__.py``)."""
