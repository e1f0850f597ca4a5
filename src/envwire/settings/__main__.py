"""``python -m envwire.settings``: print the settings table of ``docs/guides/serving.md``."""

from envwire.settings import markdown

print(markdown(), end="")
