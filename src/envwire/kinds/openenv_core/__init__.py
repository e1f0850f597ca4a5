"""Envs written for openenv-core: what their app module gave ``create_app`` (:mod:`.app`), and
one env hosted as openenv-core's server hosts it (:mod:`.gymenv`)."""
