"""The app uvicorn would serve: the env class and its models, handed to ``create_app``."""

from openenv.core.env_server import create_app

from ..models import GuessAction, GuessObservation  # noqa: TID252 (the package may be mounted anywhere)
from .guess_environment import GuessEnvironment

app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess_env")
