"""Tests of the Godot protocol, GodotEnv, the GDScript addon and the reverse bridge."""
