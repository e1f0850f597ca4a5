"""HTTP/1.1 (:mod:`.http11`), WebSocket framing (:mod:`.websocket`) and the HTTP status of every
envwire error (:mod:`.status`), sans-IO, shared by every protocol that travels over HTTP
(OpenEnv, the arena, the dashboard, Godot)."""
