"""Adapters: remote envs as gymnasium and dm_env environments."""
