"""The plugin interface of the AISysProj server, for envs written against it.

An env written for that server's plugin interface imports ``aisysprojserver.env_interface``,
``aisysprojserver.env_settings``, ``aisysprojserver.env_mixins`` and sometimes
``aisysprojserver.website``. When that server is not installed, :mod:`envwire.arena.aisys.plugins`
makes those names resolve to the modules of this package, which define the same classes and
fields (this is a description of the interface, written for envwire; see ``docs/arena/index.md``):

- :mod:`.env_interface`: ``GenericEnvironment`` (what a plugin subclasses), ``RunData``,
  ``ActionResult``, ``ActionRequest``, ``ActionHistoryEntry``, ``EnvInfo`` and the summaries
  the page methods receive;
- :mod:`.env_settings`: ``EnvSettings``, the class attributes an env sets (ratings, requests
  per reply, abandoning);
- :mod:`.env_mixins`: ``SimpleViewEnv`` and ``SimpleViewAgent``, default pages;
- :mod:`.website`: ``AISYSPROJ_TEMPLATES`` (a Jinja2 template folder with a ``base.html``) and
  ``TEMPLATE_STANDARD_KWARGS``, for envs that render their own run pages.

When the server is installed, its own modules win and the adapter works with them unchanged.
"""

from envwire import __version__

__all__ = ["__version__"]
