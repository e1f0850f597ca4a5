"""OpenEnv-style envs written for these tests from openenv-core's public interfaces.

They stand in for the envs of OpenEnv's own repository (nothing is fetched at test time):

- :mod:`.notes`: an ``MCPEnvironment`` whose tools are FastMCP tools, served by ``create_app``
  with openenv-core's MCP action and observation (as OpenEnv's echo env is);
- :mod:`.guess_env`: an env directory with an ``openenv.yaml`` manifest, whose
  ``server/app.py`` gives an untyped ``Environment`` subclass and its models to
  ``create_app`` (as OpenEnv's connect4 env does);
- :mod:`.walk`: an ``Environment[Act, Obs, State]`` subclass with type arguments and no app;
- :mod:`.sleepy`: the same shape, whose step sleeps as long as its action asks;
- :mod:`.faulty`: a ``create_app`` app whose env raises on request.
"""
