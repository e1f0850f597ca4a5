"""What can be served, each made a ``gymnasium.Env`` (its ``gymenv.py``).

- :mod:`.typed`: typed (OpenEnv-style) envs: pydantic actions, observations and state;
- :mod:`.dm_env`: DeepMind's ``dm_env.Environment``s, dm_control's suite by name;
- :mod:`.openenv_core`: envs written for openenv-core, read from their app modules and hosted
  as openenv-core's own server hosts them;
- :mod:`.godot`: a game made in Godot, launched and driven over the Godot protocol.
"""
