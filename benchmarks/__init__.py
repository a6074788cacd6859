"""The project's benchmark: ``analyst-env bench`` (see ``run.py``)."""
