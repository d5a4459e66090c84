"""The public test kit: a scripted model and the store contract checks."""

from oma_actors.testing.scripted import RecordedCall, ScriptedAdapter, text_response

__all__ = ["RecordedCall", "ScriptedAdapter", "text_response"]
