"""HTTP/1.1 (:mod:`.http11`) and WebSocket framing (:mod:`.websocket`), sans-IO, shared by every
protocol that travels over HTTP (OpenEnv, the arena, the dashboard, Godot)."""
