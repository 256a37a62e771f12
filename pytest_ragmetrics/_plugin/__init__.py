"""pytest glue behind ``plugin.py``: options, the session state, items, deadlines."""
