"""What plugin envs take from the AISysProj server's website module to render their own pages.

- ``AISYSPROJ_TEMPLATES``: a Jinja2 template folder holding ``base.html``, a plain page with
  the blocks ``title``, ``extrahead`` and ``body`` for an env's templates to extend;
- ``TEMPLATE_STANDARD_KWARGS``: ``url_for`` (the endpoint names of that server's pages, mapped
  to envwire's paths), ``format`` and ``SERVER_VERSION``.

envwire does not need Jinja2; an env that renders templates brings it as its own dependency.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from envwire import __version__

__all__ = ["AISYSPROJ_TEMPLATES", "TEMPLATE_STANDARD_KWARGS", "url_for"]

AISYSPROJ_TEMPLATES: Path = Path(__file__).parent / "templates"

_PATHS = {
    "website.frontpage": "/arena/",
    "website.group_page": "/group/{group}",
    "website.env_page": "/env/{env}",
    "website.agent_page": "/agent/{env}/{agent}",
    "website.run_page": "/run/{env}/{runid}",
    "static": "/static/{filename}",
}


def url_for(endpoint: str, **values: object) -> str:
    """The path of one of the server's pages, by the endpoint names plugin templates use.

    Raises:
        ValueError: an unknown endpoint or a missing value.
    """
    try:
        template = _PATHS[endpoint]
    except KeyError:
        raise ValueError(f"unknown page {endpoint!r}; known: {', '.join(_PATHS)}") from None
    try:
        return template.format(**{k: quote(str(v), safe="") for k, v in values.items()})
    except KeyError as exc:
        raise ValueError(f"url_for({endpoint!r}) needs {exc.args[0]!r}") from None


TEMPLATE_STANDARD_KWARGS: dict[str, Any] = {
    "url_for": url_for,
    "format": format,
    "SERVER_VERSION": __version__,
}
