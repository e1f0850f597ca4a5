"""The step: the one function every way into an OpenEnv step calls.

HTTP ``POST /step`` (stateful or, in strict mode, on a fresh env), the WebSocket's ``step``
message and MCP clients' tool actions all take a step through :func:`step`: an envwire typed
env with tools also takes openenv-core's MCP actions as steps (:func:`.tools.tool_step`);
every other action is the service's step (validated by the env's binding, run under the
record's lock, the reply written by the binding).
"""

from __future__ import annotations

from typing import Any

from envwire.frontends.openenv.service import Hang, OpenEnvService, Record
from envwire.frontends.openenv.tools import tool_step

__all__ = ["step"]


def step(
    service: OpenEnvService,
    record: Record,
    data: dict[str, Any],
    prefix: tuple[str, ...] = (),
    *,
    on_hang: Hang = None,
    kwargs: dict[str, Any] | None = None,
    http: bool = False,
) -> str:
    """One step with the action ``data`` describes; the ``{"observation", "reward", "done"}``
    payload as JSON text (``kwargs``: the HTTP body's other keys; ``http``: for an HTTP
    response).

    Raises:
        ActionRejected: ``data`` is no action of the env (``loc`` prefixed with ``prefix``).
        EnvwireError: as :meth:`OpenEnvService.step` raises.
    """
    if "type" in data and not record.binding.native:
        answered = tool_step(service, record, data)
        if answered is not None:
            return answered
    return service.step(record, data, prefix, on_hang=on_hang, kwargs=kwargs, http=http)
