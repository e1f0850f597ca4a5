"""``EnvSettings``: how an env of the plugin interface wants to be hosted.

An env sets these as attributes of an ``EnvSettings`` instance (or subclass) held in its class
attribute ``settings``. envwire reads them into the arena env's settings
(:func:`envwire.arena.aisys.plugins.arena_settings`):

=================================  ==================================  =======================
attribute                          meaning                             arena setting
=================================  ==================================  =======================
``INITIAL_RATING`` (0.0)           rating of an agent without runs     ``initial_rating``
``RATING_STRATEGY`` ("average")    the only strategy there is          (checked)
``MIN_RUNS_FOR_FULLY_EVALUATED``   runs a rating averages (50)         ``rating_runs``
``RATING_OBJECTIVE`` ("max")       "max" or "min"                      ``rating_objective``
``NUMBER_OF_ACTION_REQUESTS`` (5)  action requests per reply           ``requests_per_reply``
``CAN_ABANDON_RUNS`` (False)       clients may abandon runs            ``can_abandon``
``STORE_ACTION_HISTORY`` (True)    (the history is always stored)
``DESCRIPTION`` ("")               HTML shown on the env's page        the env's description
=================================  ==================================  =======================
"""

from __future__ import annotations

__all__ = ["EnvSettings"]


class EnvSettings:
    """Hosting settings of a plugin env; envs change the attributes they need."""

    INITIAL_RATING: float = 0.0
    RATING_STRATEGY: str = "average"
    MIN_RUNS_FOR_FULLY_EVALUATED: int = 50
    RATING_OBJECTIVE: str = "max"
    NUMBER_OF_ACTION_REQUESTS: int = 5
    CAN_ABANDON_RUNS: bool = False
    STORE_ACTION_HISTORY: bool = True
    DESCRIPTION: str = ""
