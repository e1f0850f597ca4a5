"""The AISysProj server itself, and a course played on it, for the migration check.

    python migration.py serve DIR PORT          the original server, its files in DIR
    python migration.py play URL DIR            a small course on it; its answers saved in DIR
    python migration.py continue URL CONFIG N   an agent goes on playing with its config file

Run in that server's interpreter, with its checkout as the working directory (see
aisys_compat.py). ``play`` uploads the server's example plugin (``simple_nim``), makes the env
``test-nim``, and has five agents play it with the course client (``client.run``): three fully
evaluated, two not, one named with spaces and brackets, and runs left unfinished (the client
stops with runs open). It saves ``/results/test-nim`` as ``results.json``, the leaderboard page
``/env/test-nim`` as ``leaderboard.html``, and the agents' config files under ``configs/``.
``continue`` plays N more runs with a config file whose ``url`` is URL, and prints
``CONTINUE ok|FAILED ...``: its total runs must grow by exactly the runs reported finished.
"""

import json
import random
import sys
from pathlib import Path

import requests

ENV = "test-nim"
ADMIN_PASSWORD = "test-admin-password"  # the suite's TestConfig's
STRATEGIES = {  # agent: (its move for a number of objects left, runs it plays)
    "strong": (lambda left: max(left % 4, 1), 15),
    "random": (lambda left: random.randint(1, min(3, left)), 14),
    "team [7]": (lambda left: max(left % 4, 1) if random.random() < 0.7 else 1, 12),
    "ones": (lambda left: 1, 5),
    "late": (lambda left: max(left % 4, 1), 3),
}


def serve(folder: str, port: str) -> None:
    from aisysprojserver.app import create_app
    from aisysprojserver.config import TestConfig

    class Config(TestConfig):
        PERSISTENT = Path(folder)
        PROMETHEUS_PORT = None

    create_app(Config()).run(host="127.0.0.1", port=int(port))


def play(url: str, folder: str) -> None:
    from aisysprojserver_clienttools import client
    from aisysprojserver_clienttools.admin import AdminClient

    admin = AdminClient(url, ADMIN_PASSWORD)
    code, content = admin.upload_plugin(Path("example_envs/simple_nim"))
    assert code == 200, content
    code, content = admin.make_env(
        "simple_nim.environment:Environment",
        ENV,
        "Nim",
        config={"strong": True, "random_start": True},
    )
    assert code == 200, content
    configs = Path(folder, "configs")
    configs.mkdir()
    for number, (name, (strategy, runs)) in enumerate(STRATEGIES.items()):
        code, config = admin.new_user(ENV, name)
        assert code == 200, config
        config["url"] = url
        (configs / f"agent{number}.json").write_text(json.dumps(config))
        client.run(config, lambda left, _info, s=strategy: s(left), run_limit=runs)
    results = requests.get(f"{url}results/{ENV}", timeout=30)
    Path(folder, "results.json").write_text(results.text)
    page = requests.get(f"{url}env/{ENV}", timeout=30)
    Path(folder, "leaderboard.html").write_text(page.text)
    print(results.status_code, page.status_code)


def go_on(url: str, config_file: str, runs: str) -> None:
    from aisysprojserver_clienttools import client

    config = {**json.loads(Path(config_file).read_text()), "url": url}
    finished: set[str] = set()
    put = requests.put

    def recording_put(*args, **kwargs):  # records what the client is told; changes nothing
        response = put(*args, **kwargs)
        if response.status_code == 200:
            finished.update(response.json()["finished_runs"])
        return response

    def total() -> int:
        results = requests.get(f"{url}results/{ENV}", timeout=30).json()
        return int(results[config["agent"]]["total-runs"])

    before = total()
    requests.put = recording_put
    client.run(config, lambda left, _info: max(left % 4, 1), run_limit=int(runs))
    after = total()
    ok = after - before == len(finished) >= int(runs)
    print(
        f"CONTINUE {'ok' if ok else 'FAILED'} {config['agent']}: {before} runs before, "
        f"{len(finished)} reported finished, {after} after"
    )


if __name__ == "__main__":
    {"serve": serve, "play": play, "continue": go_on}[sys.argv[1]](*sys.argv[2:])
