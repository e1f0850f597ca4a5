"""A GymGodot-style game written in Python, for tests that need a misbehaving game.

Launched like a Godot game (``python fake_game.py --mode=MODE --fixed-fps 60
--serverIP=... --serverPort=... --renderPath=...``), it connects to the server and plays a
counter game: the observation is ``[steps taken]``, the reward 1.0, done after 3 steps.

Modes: ``normal``; ``exit-on-step`` (exits with code 7 on the first step); ``silent-step``
(never answers a step); ``bad-json`` (answers a step with broken JSON); ``wrong-reply`` (answers
a step with an init_observation); ``hang-up`` (closes the connection on a step); ``no-connect``
(prints a line and sleeps without connecting); ``exit-early`` (prints a line and exits with code
5); ``ignore-term`` (ignores SIGTERM, never connects).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
from PIL import Image
from websockets.sync.client import connect

from envwire.protocols.godot.messages import (
    CloseCommand,
    GameSide,
    InitObservation,
    RenderCommand,
    RenderResult,
    ResetCommand,
    StepCommand,
    StepResult,
)

__all__ = ["main"]


def main(argv: list[str]) -> int:
    args = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    mode = args.get("mode", "normal")
    if mode in ("no-connect", "exit-early", "ignore-term"):
        if mode == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"fake game: mode {mode}", flush=True)
        if mode == "exit-early":
            return 5
        time.sleep(60)
        return 0
    uri = f"ws://{args['serverIP']}:{args['serverPort']}/"
    codec = GameSide()
    steps = frame = 0
    with connect(uri, open_timeout=10, proxy=None) as ws:
        while True:
            command = codec.receive(ws.recv(timeout=30))
            match command:
                case ResetCommand():
                    steps = frame = 0
                    ws.send(codec.send(InitObservation([0.0])))
                case StepCommand():
                    if mode == "exit-on-step":
                        os._exit(7)
                    if mode == "silent-step":
                        continue
                    if mode == "bad-json":
                        ws.send('{"observation": [1.0], "reward": ')
                        continue
                    if mode == "wrong-reply":
                        ws.send('{"init_observation": [0.0]}')
                        continue
                    if mode == "hang-up":
                        return 0
                    steps += 1
                    ws.send(codec.send(StepResult([float(steps)], 1.0, steps >= 3)))
                case RenderCommand():
                    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
                    pixels[0, 0] = (255, 0, 0)
                    Image.fromarray(pixels).save(f"{args['renderPath']}{frame}.png")
                    frame += 1
                    ws.send(codec.send(RenderResult(0)))
                case CloseCommand():
                    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
