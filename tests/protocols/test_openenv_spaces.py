"""Gymnasium envs over OpenEnv, over the shared catalog of spaces: every space as action and as
observation space, both array forms (base64 objects and plain lists), from the server's binding
through the wire message to the client's transport, bit for bit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gymnasium import spaces

from envwire import messages as m
from envwire.client.openenv import GymTransport
from envwire.frontends.openenv.bindings import GymBinding
from envwire.protocols.openenv import message, parse_server_message
from tests.spaces_catalog import IDS, SPACES, assert_same


class Loopback:
    """The client's connection, answered in process by the server's binding; every reply
    travels as the WebSocket message text the front end sends."""

    url = "loopback"

    def __init__(self, binding: GymBinding, observation: Any) -> None:
        self.binding = binding
        self.observation = observation
        self.actions: list[Any] = []

    def _answer(self, reply: m.ResetReply | m.StepReply) -> dict[str, Any]:
        text = message("observation", json.loads(self.binding.result(reply)))
        event = parse_server_message(text)
        assert event.type == "observation"
        return event.data

    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        return self._answer(m.ResetReply(self.observation, {"n": 1}))

    def step(self, data: dict[str, Any]) -> dict[str, Any]:
        self.actions.append(self.binding.action(json.loads(json.dumps(data))))
        return self._answer(m.StepReply(self.observation, 0.5, False, True, {}))

    def close(self) -> None:
        pass


@pytest.mark.parametrize("arrays", ["base64", "list"])
@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_actions_and_observations_of_every_space_round_trip(
    name: str, space: spaces.Space[Any], arrays: str
) -> None:
    space.seed(0)
    action, observation = space.sample(), space.sample()
    binding = GymBinding("catalog", space, space, arrays)
    connection = Loopback(binding, observation)
    transport = GymTransport(connection, binding.describe())
    assert transport.action_space == space and transport.observation_space == space

    reset = transport.request(m.Reset(seed=0))
    assert isinstance(reset, m.ResetReply) and reset.info == {"n": 1}
    assert_same(observation, reset.observation, f"{name}: reset observation")

    step = transport.request(m.Step(action))
    assert_same(action, connection.actions[0], f"{name}: action")
    assert isinstance(step, m.StepReply) and step.truncated and step.reward == 0.5
    assert_same(observation, step.observation, f"{name}: observation")
