"""One front end per protocol, each serving the session table over its wire: :mod:`.gymsocket`,
:mod:`.openenv`, :mod:`.dmenvrpc` and :mod:`.godot` (the bridge to a GymGodot Python side)."""
