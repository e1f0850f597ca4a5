"""A number-guessing env laid out as OpenEnv's env packages are (``openenv.yaml``,
``models.py``, ``server/app.py``)."""
