"""The Godot protocol (GymGodot's JSON commands over WebSocket text frames), sans-IO: the
messages (:mod:`.messages`) and how spaces travel as flat JSON lists (:mod:`.spaces`)."""
