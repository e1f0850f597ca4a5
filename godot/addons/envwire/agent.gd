# envwire agent node (Godot 3.x): turns the scene it lives in into an environment that speaks
# the GymGodot protocol (envwire seed 001) to a Python side acting as the WebSocket server.
#
# Usage: add a Node to your scene, attach this script, and point `env_node` at the node that
# implements the environment hooks:
#
#   apply_action(action: Array) -> void   called once per physics frame while a step runs
#   get_observation() -> Array            the observation after a reset or a step
#   get_reward() -> float                 the reward of the step that just ended
#   is_done() -> bool                     true when the episode is over
#   reset() -> void                       start a new episode
#   set_seed(seed: int) -> void           optional: called before reset() when a seed is sent
#   get_render_image() -> Image           optional: the frame to save on render; without it
#                                         the root viewport is captured
#
# Between commands the scene tree is paused; a step unpauses it for `frames_per_step` physics
# frames, then pauses it again and replies. This node runs first in every frame
# (process_priority) and keeps running while the tree is paused.
#
# Command line (read from OS.get_cmdline_args(), `--key=value`):
#   --serverIP=<ip> --serverPort=<port> --renderPath=<dir/>   (the GymGodot contract)
#   --framesPerStep=<n> --connectTimeout=<seconds>            (envwire extensions)
#
# Exit codes: 0 after a close command, 2 when `env_node` is missing or lacks a hook, 3 when the
# server could not be reached within `connect_timeout` seconds, 4 when the connection was lost.
extends Node

const JsonWriter = preload("json_writer.gd")

const HOOKS := ["apply_action", "get_observation", "get_reward", "is_done", "reset"]

const EXIT_CLOSED := 0
const EXIT_BAD_SETUP := 2
const EXIT_NO_SERVER := 3
const EXIT_CONNECTION_LOST := 4

export(bool) var enabled := true
export(NodePath) var env_node
export(int) var frames_per_step := 2
export(String) var server_ip := "127.0.0.1"
export(int) var server_port := 8000
export(String) var render_path := "./render_frames/"
# Seconds to keep retrying the first connection before giving up.
export(float) var connect_timeout := 10.0
# While waiting for a command the main loop would otherwise spin at full speed.
export(int) var idle_sleep_usec := 100
export(bool) var debug := false

var _client := WebSocketClient.new()
var _env: Node
var _connected := false
var _connect_deadline_msec := 0
var _retry_at_msec := -1
var _action: Array = []
var _frames_left := 0
var _stepping := false
var _render_counter := 0
var _received := false
var _quitting := false


func _ready() -> void:
	if not enabled:
		set_process(false)
		set_physics_process(false)
		return
	pause_mode = PAUSE_MODE_PROCESS
	process_priority = -1000
	_env = get_node_or_null(env_node)
	if _env == null:
		push_error("envwire: env_node is not set or does not exist")
		_quit(EXIT_BAD_SETUP, "no env node")
		return
	for hook in HOOKS:
		if not _env.has_method(hook):
			push_error("envwire: the env node %s has no %s() method" % [_env.name, hook])
			_quit(EXIT_BAD_SETUP, "missing hook " + hook)
			return
	_apply_arguments(_parse_arguments())
	get_tree().paused = true
	_client.connect("connection_established", self, "_on_connected")
	_client.connect("connection_error", self, "_on_connection_error")
	_client.connect("connection_closed", self, "_on_connection_closed")
	# Commands are handled as poll() delivers them, in order: a close command that arrives with
	# the server's closing handshake is handled before the connection_closed signal.
	_client.connect("data_received", self, "_on_data_received")
	_connect_deadline_msec = OS.get_ticks_msec() + int(connect_timeout * 1000.0)
	_open()


func _parse_arguments() -> Dictionary:
	var parsed := {}
	for argument in OS.get_cmdline_args():
		if argument.begins_with("--") and argument.find("=") > 0:
			var pair: PoolStringArray = argument.substr(2).split("=", true, 1)
			parsed[pair[0]] = pair[1]
	return parsed


func _apply_arguments(arguments: Dictionary) -> void:
	if arguments.has("serverIP"):
		server_ip = arguments["serverIP"]
	if arguments.has("serverPort"):
		server_port = int(arguments["serverPort"])
	if arguments.has("renderPath"):
		render_path = arguments["renderPath"]
	if arguments.has("framesPerStep"):
		frames_per_step = max(1, int(arguments["framesPerStep"]))
	if arguments.has("connectTimeout"):
		connect_timeout = float(arguments["connectTimeout"])


func _log(text: String) -> void:
	if debug:
		print("envwire: ", text)


func _open() -> void:
	var url := "ws://%s:%d/" % [server_ip, server_port]
	_log("connecting to " + url)
	var error := _client.connect_to_url(url)
	if error != OK:
		_on_connection_error()


func _on_connected(_protocol: String) -> void:
	_connected = true
	_client.get_peer(1).set_write_mode(WebSocketPeer.WRITE_MODE_TEXT)
	_log("connected")


func _on_connection_error() -> void:
	if _connected:
		_quit(EXIT_CONNECTION_LOST, "connection error")
	elif OS.get_ticks_msec() >= _connect_deadline_msec:
		_quit(EXIT_NO_SERVER, "no server at %s:%d" % [server_ip, server_port])
	else:
		_retry_at_msec = OS.get_ticks_msec() + 200


func _on_connection_closed(_was_clean: bool) -> void:
	if _quitting:
		return
	if _connected:
		_quit(EXIT_CONNECTION_LOST, "connection closed by the server")
	else:
		_on_connection_error()


func _quit(code: int, why: String) -> void:
	if _quitting:
		return
	_quitting = true
	_log("quitting (%d): %s" % [code, why])
	set_process(false)
	set_physics_process(false)
	get_tree().quit(code)


func _process(_delta: float) -> void:
	if _retry_at_msec >= 0 and OS.get_ticks_msec() >= _retry_at_msec:
		_retry_at_msec = -1
		_open()
	_received = false
	_client.poll()
	if _connected and not _received and not _stepping and not _quitting:
		OS.delay_usec(idle_sleep_usec)


func _on_data_received() -> void:
	_received = true
	var peer := _client.get_peer(1)
	while peer.get_available_packet_count() > 0 and not _quitting:
		_handle(peer.get_packet().get_string_from_utf8())


func _physics_process(_delta: float) -> void:
	if not _stepping:
		return
	if _frames_left > 0:
		# Runs before the env node's own physics callbacks in this frame.
		_env.apply_action(_action)
		_frames_left -= 1
		return
	# The step's last frame has fully run (callbacks and physics server): report it.
	_stepping = false
	get_tree().paused = true
	_send({
		"observation": _env.get_observation(),
		"reward": float(_env.get_reward()),
		"done": bool(_env.is_done()),
	})


func _send(message: Dictionary) -> void:
	var text: String = JsonWriter.write(message)
	_log("send " + text)
	_client.get_peer(1).put_packet(text.to_utf8())


func _send_error(text: String) -> void:
	_send({"error": text})


func _handle(text: String) -> void:
	_log("recv " + text)
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		_send_error("malformed JSON at line %d: %s" % [parsed.error_line, parsed.error_string])
		return
	var message = parsed.result
	if typeof(message) != TYPE_DICTIONARY or not message.has("cmd"):
		_send_error("expected a JSON object with a \"cmd\" field, got: " + text)
		return
	if _stepping:
		_send_error("command \"%s\" arrived while a step was running" % str(message["cmd"]))
		return
	match message["cmd"]:
		"reset":
			_reset(message)
		"step":
			_step(message)
		"render":
			_render()
		"close":
			_client.disconnect_from_host()
			_quit(EXIT_CLOSED, "close command")
		_:
			_send_error(
				"unknown cmd \"%s\"; expected reset, step, render or close" % str(message["cmd"])
			)


func _reset(message: Dictionary) -> void:
	if message.has("seed") and typeof(message["seed"]) in [TYPE_INT, TYPE_REAL]:
		var value := int(message["seed"])
		seed(value)
		if _env.has_method("set_seed"):
			_env.set_seed(value)
	_env.reset()
	_render_counter = 0
	_send({"init_observation": _env.get_observation()})


func _step(message: Dictionary) -> void:
	if not message.has("action") or typeof(message["action"]) != TYPE_ARRAY:
		_send_error("step needs an \"action\" array, got: " + JsonWriter.write(message))
		return
	_action = message["action"]
	_frames_left = frames_per_step
	_stepping = true
	get_tree().paused = false


func _render() -> void:
	var image: Image = null
	if _env.has_method("get_render_image"):
		image = _env.get_render_image()
	else:
		VisualServer.force_draw()
		var texture := get_viewport().get_texture()
		if texture != null:
			image = texture.get_data()
			if image != null:
				image.flip_y()
	var error := ERR_UNAVAILABLE
	if image != null and not image.is_empty():
		var directory := render_path
		if not directory.ends_with("/"):
			directory += "/"
		Directory.new().make_dir_recursive(directory)
		error = image.save_png(directory + str(_render_counter) + ".png")
	_render_counter += 1
	_send({"render_error": str(error)})
