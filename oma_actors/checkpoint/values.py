"""Deprecated location of the JSON forms; they live in ``oma_actors.domain.jsonforms``."""

from oma_actors.domain.jsonforms import *  # noqa: F403
from oma_actors.domain.jsonforms import task_to_json as task_to_json
