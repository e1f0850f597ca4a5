# A 1-D "reach the target" environment for the envwire addon.
#
# A point starts at 0 on the segment [-1, 1] and must reach a target drawn at random on reset.
#   action space:       Discrete(3) sent as [a]: 0 = move left, 1 = stay, 2 = move right
#   observation space:  Box(-1, 1, shape=(2,), float32): [position, target]
#   reward:             progress towards the target during the step, +1 when it is reached
#   done:               the target is reached, or `max_seconds` of game time have passed
# Each physics frame moves the point by SPEED * delta in the chosen direction.
extends Node2D

const SPEED := 1.5
const TOLERANCE := 0.03
const IMAGE_WIDTH := 64
const IMAGE_HEIGHT := 8

export(float) var max_seconds := 5.0

var position_x := 0.0
var target := 0.5
var direction := 0
var elapsed := 0.0
var last_distance := 0.0


func _ready() -> void:
	reset()


func _physics_process(delta: float) -> void:
	position_x = clamp(position_x + direction * SPEED * delta, -1.0, 1.0)
	elapsed += delta
	update()


func apply_action(action: Array) -> void:
	direction = int(clamp(int(action[0]), 0, 2)) - 1


func get_observation() -> Array:
	return [position_x, target]


func get_reward() -> float:
	# Called once after each step: the reward is the progress made since the previous call.
	var distance := abs(target - position_x)
	var reward := last_distance - distance
	last_distance = distance
	if _reached():
		reward += 1.0
	return reward


func is_done() -> bool:
	return _reached() or elapsed >= max_seconds


func reset() -> void:
	position_x = 0.0
	direction = 0
	elapsed = 0.0
	var side := 1.0 if randf() < 0.5 else -1.0
	target = side * rand_range(0.3, 0.9)
	last_distance = abs(target - position_x)
	update()


func get_render_image() -> Image:
	# Drawn by hand so that rendering works in headless builds, which have no viewport image.
	var image := Image.new()
	image.create(IMAGE_WIDTH, IMAGE_HEIGHT, false, Image.FORMAT_RGB8)
	image.fill(Color(0.1, 0.1, 0.1))
	image.lock()
	for y in range(IMAGE_HEIGHT):
		image.set_pixel(_column(target), y, Color(0.0, 1.0, 0.0))
		image.set_pixel(_column(position_x), y, Color(1.0, 0.0, 0.0))
	image.unlock()
	return image


func _reached() -> bool:
	return abs(target - position_x) < TOLERANCE


func _column(x: float) -> int:
	return int(round((x + 1.0) / 2.0 * (IMAGE_WIDTH - 1)))


func _draw() -> void:
	var pixels := 200.0
	draw_rect(Rect2(Vector2(-pixels, -2), Vector2(2 * pixels, 4)), Color(0.5, 0.5, 0.5))
	draw_circle(Vector2(target * pixels, 0), 8, Color(0.0, 1.0, 0.0))
	draw_circle(Vector2(position_x * pixels, 0), 6, Color(1.0, 0.0, 0.0))
