"""The AISysProj course clients, with their default settings, against a live server.

    python clients.py URL ADMIN_PASSWORD RUNS      (run with that server's checkout as cwd)

Run in the suite's interpreter, over real HTTP: nothing of the clients is replaced.
``requests.put`` is wrapped only to record each response (and to stop the simple clients,
which play forever); the clients' own code sends every request. One line per client
(``CLIENT ok|FAILED ...``), then ``RESULT clients failed 0``. See aisys_compat.py.
"""

import contextlib
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import requests
from aisysprojserver_clienttools import client, client_simple_v0, client_simple_v1
from aisysprojserver_clienttools.admin import AdminClient

BASE, PASSWORD, RUNS = sys.argv[1], sys.argv[2], int(sys.argv[3])
ENV = "course-nim"
problems = []


class Stop(Exception):
    pass


class Problems(logging.Handler):
    # every warning or error the clients log (server messages of type error, bad statuses)
    def emit(self, record):
        problems.append(f"{record.name}: {record.getMessage()}")


finished, seen, stop_at = {}, {}, [None]
_put = requests.put


def recording_put(*args, **kwargs):
    response = _put(*args, **kwargs)
    if response.status_code == 200:
        body = response.json()
        for run in body.get("finished_runs", {}):
            finished[run] = finished.get(run, 0) + 1
        if "action-requests" in body:
            # v0 names no finished runs: a run it saw that gets no request now has finished
            # (this client answers every request, so every open run gets one each time)
            open_runs = {request["run"].split("#")[0] for request in body["action-requests"]}
            seen.update(dict.fromkeys(open_runs, 1))
            finished.update(dict.fromkeys(set(seen) - open_runs, 1))
    if stop_at[0] is not None and len(finished) >= stop_at[0]:
        raise Stop()
    return response


def move(percept, *_info):
    return max(percept % 4, 1)


class NimAgent(client.Agent):
    def get_action(self, percept, request_info):
        return move(percept)


class Course:
    """The env the clients play, made by the organizer's tools."""

    def __init__(self):
        logging.getLogger().addHandler(Problems(logging.WARNING))
        requests.put = recording_put
        self.admin = AdminClient(BASE, PASSWORD)
        code, content = self.admin.upload_plugin(Path("example_envs/simple_nim"))
        assert code == 200, content
        code, content = self.admin.make_env(
            "simple_nim.environment:Environment",
            ENV,
            "Nim",
            config={"strong": True, "random_start": True},
        )
        assert code == 200, content
        self.work = Path(tempfile.mkdtemp())
        self.auth = self.work / "auth.json"
        self.auth.write_text(json.dumps({"url": BASE, "password": PASSWORD}))

    def new_agent(self, name):
        # the admin CLI, as an organizer runs it
        command = ["-m", "aisysprojserver_clienttools", "new-user", name, ENV, str(self.auth)]
        out = subprocess.run([sys.executable, *command], capture_output=True, text=True, check=True)
        code, config = json.loads(out.stdout.strip().splitlines()[-1])
        assert code == 200, config
        path = self.work / f"{name}.json"
        path.write_text(json.dumps({**config, "url": BASE}))
        return path

    def play(self, name, call, stop):
        config = self.new_agent(name)
        finished.clear()
        seen.clear()
        before = len(problems)
        stop_at[0] = RUNS if stop else None
        with contextlib.suppress(Stop):
            call(config)
        stop_at[0] = None
        counted = self.admin.get_agent_results(ENV).get(name, {}).get("total-runs")
        twice = sorted(run for run, times in finished.items() if times > 1)
        ok = counted == len(finished) >= RUNS and not twice and len(problems) == before
        print(
            f"CLIENT {'ok' if ok else 'FAILED'} {name}: {len(finished)} runs finished "
            f"(the server counts {counted}; reported twice: {twice or 'none'}; "
            f"problems logged: {problems[before:][:3] or 'none'})",
            flush=True,
        )
        return ok


if __name__ == "__main__":
    course = Course()
    plays = [
        ("simple-v0", lambda c: client_simple_v0.run(c, move), True),
        ("simple-v1", lambda c: client_simple_v1.run(c, move), True),
        ("client-run", lambda c: client.run(c, move, run_limit=RUNS), False),
        (
            "client-run-seq",
            lambda c: client.run(c, move, run_limit=RUNS, parallel_runs=False),
            False,
        ),
        ("client-run-2proc", lambda c: client.run(c, move, run_limit=RUNS, processes=2), False),
        ("agent-run", lambda c: NimAgent.run(c, run_limit=RUNS), False),
        ("agent-run-mp", lambda c: NimAgent.run(c, run_limit=RUNS, multiprocessing=True), False),
    ]
    passed = sum(course.play(*p) for p in plays)
    print(f"RESULT {len(plays)} {len(plays) - passed} 0")
