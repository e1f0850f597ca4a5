"""The front ends' rows (``envwire.ports``): what each floor derives from them is true of the
server it describes."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from envwire import app
from envwire.adapters.connect import SCHEMES, VECTOR_SCHEMES
from envwire.app import Server
from envwire.cli import _parser
from envwire.client.probe import Found, probe
from envwire.errors import ConfigError
from envwire.ports import DMENVRPC, FRONT_ENDS, PortRow
from envwire.registry import Catalog, parse_env_arg
from envwire.settings import SECTIONS, Settings, load
from envwire.settings.config import read
from envwire.settings.sections import metas


def _port_meta(row: PortRow) -> tuple[object, str, str, object]:
    """The row's section's ``port`` field: (default, key, flag, the section class)."""
    section = type(getattr(Settings(), row.section))
    assert section in SECTIONS
    meta = dict(metas(section))["port"]
    return section().port, meta.key, meta.flag, section


@pytest.mark.parametrize("row", FRONT_ENDS, ids=lambda row: row.name)
def test_each_row_names_its_settings_section_and_its_port(row: PortRow) -> None:
    default, key, flag, _ = _port_meta(row)
    assert (default, key, flag) == (row.default_port, row.key, row.flag)
    assert Settings().ports()[row.name] == row.default_port
    assert Settings.of(**{row.key: 0}).ports()[row.name] == 0


def test_the_rows_do_not_share_a_name_a_section_a_scheme_or_an_answer() -> None:
    for field in ("name", "section", "answer"):
        values = [getattr(row, field) for row in FRONT_ENDS]
        assert len(set(values)) == len(values), field
    schemes = [scheme for row in FRONT_ENDS for pair in row.schemes for scheme in pair]
    assert len(set(schemes)) == len(schemes)


def test_every_flag_of_a_port_is_on_the_command_line() -> None:
    parser = _parser()
    for row in FRONT_ENDS:
        args = parser.parse_args(["serve", row.flag, "off"])
        assert isinstance(args, argparse.Namespace)
        assert getattr(args, row.key) is None
    # --grpc stays the dm_env_rpc port's flag, and grpc its key; the code calls it dmenvrpc
    args = parser.parse_args(["serve", "--grpc", "0"])
    assert args.grpc == 0
    assert Settings.of(grpc=7000).dmenvrpc.port == 7000


def test_every_front_end_off_names_every_key() -> None:
    with pytest.raises(ConfigError, match="every front end is off") as raised:
        Settings.of(**{row.key: "off" for row in FRONT_ENDS})
    for row in FRONT_ENDS:
        assert row.key in str(raised.value)


def test_each_scheme_opens_with_its_rows_opener_and_the_opener_exists() -> None:
    for row in FRONT_ENDS:
        for scheme in (s for pair in row.schemes for s in pair):
            assert SCHEMES.get(scheme) == row.opener
            assert VECTOR_SCHEMES.get(scheme) == row.vector_opener
    for entry in {*SCHEMES.values(), *VECTOR_SCHEMES.values()}:
        module, _, name = entry.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), entry


def test_each_answer_is_a_finding_of_the_probe() -> None:
    assert all(isinstance(Found[row.answer], Found) for row in FRONT_ENDS)


def test_every_row_has_a_builder_and_nothing_else_does() -> None:
    assert set(app._BUILDERS) == {row.name for row in FRONT_ENDS}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    catalog = Catalog([parse_env_arg("CartPole-v1")])
    running = Server(catalog, Settings.of(**{row.key: 0 for row in FRONT_ENDS}))
    running.start()
    try:
        yield running
    finally:
        running.shutdown()


def test_a_server_listens_on_each_row_under_its_name_and_answers_as_the_row_says(
    server: Server,
) -> None:
    """The rows are true of the server: a front end per row, named as the row names its port,
    whose port answers a stranger as the clients' probe expects of it."""
    assert list(server.addresses) == [row.name for row in FRONT_ENDS]
    for row in FRONT_ENDS:
        host, port = server.addresses[row.name]
        assert probe(host, port, tls=False, timeout=30).found is Found[row.answer], row.name


def test_a_port_left_off_is_not_built() -> None:
    catalog = Catalog([parse_env_arg("CartPole-v1")])
    settings = Settings.of(**{row.key: 0 if row is DMENVRPC else "off" for row in FRONT_ENDS})
    built = Server(catalog, settings)._front_ends()
    assert [front.name for front in built] == [DMENVRPC.name]


def test_a_config_file_sets_dm_env_rpcs_port_by_its_key_and_names_it_for_the_codes_name(
    tmp_path: Path,
) -> None:
    """The config file's key is grpc, as the flag is --grpc; a user who writes the protocol's
    name in the code, dmenvrpc, is pointed at it."""
    config = tmp_path / "envwire.toml"
    config.write_text("[server]\ngrpc = 7000\ngrpc_max_num_envs = 8\n")
    chosen = load([read(config).server])
    assert (chosen.dmenvrpc.port, chosen.dmenvrpc.grpc_max_num_envs) == (7000, 8)
    assert chosen.ports()[DMENVRPC.name] == 7000
    config.write_text("[server]\ndmenvrpc = 7000\n")
    with pytest.raises(ConfigError, match="unknown key 'dmenvrpc' \\(did you mean 'grpc'\\?\\)"):
        load([read(config).server])
