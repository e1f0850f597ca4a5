"""The guess env's server side."""
