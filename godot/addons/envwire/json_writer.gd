# JSON text for the envwire agent's replies.
#
# Godot 3's JSON.print writes floats with six decimals (2.5e-7 becomes -0 or 0, 0.000012345 becomes
# 0.000012), which silently corrupts observations. This writer keeps about 16 significant
# digits, writes vectors as arrays, and writes NaN and infinities as the tokens Python's json
# module reads (NaN, Infinity, -Infinity).
extends Reference


static func write(value) -> String:
	match typeof(value):
		TYPE_NIL:
			return "null"
		TYPE_BOOL:
			return "true" if value else "false"
		TYPE_INT:
			return str(value)
		TYPE_REAL:
			return number(value)
		TYPE_STRING:
			return JSON.print(value)
		TYPE_VECTOR2:
			return write([value.x, value.y])
		TYPE_VECTOR3:
			return write([value.x, value.y, value.z])
		TYPE_DICTIONARY:
			var fields := PoolStringArray()
			for key in value:
				fields.append(JSON.print(str(key)) + ":" + write(value[key]))
			return "{" + fields.join(",") + "}"
		TYPE_ARRAY, TYPE_RAW_ARRAY, TYPE_INT_ARRAY, TYPE_REAL_ARRAY, TYPE_STRING_ARRAY, \
		TYPE_VECTOR2_ARRAY, TYPE_VECTOR3_ARRAY:
			var items := PoolStringArray()
			for item in value:
				items.append(write(item))
			return "[" + items.join(",") + "]"
	return JSON.print(str(value))


static func number(x: float) -> String:
	if is_nan(x):
		return "NaN"
	if is_inf(x):
		return "Infinity" if x > 0 else "-Infinity"
	if x == 0.0:
		return "0"
	var exponent := int(floor(log(abs(x)) / log(10.0)))
	if exponent >= -5 and exponent < 15:
		return _trim_zeros(("%." + str(16 - exponent) + "f") % x)
	var mantissa := x / pow(10.0, exponent)
	if abs(mantissa) >= 10.0:
		mantissa /= 10.0
		exponent += 1
	return _trim_zeros("%.16f" % mantissa) + "e" + str(exponent)


static func _trim_zeros(text: String) -> String:
	if text.find(".") < 0:
		return text
	return text.rstrip("0").rstrip(".")
