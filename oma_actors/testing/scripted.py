"""The scripted model, re-exported from ``oma_actors.llm.scripted`` where it now lives.

Kept so that ``from oma_actors.testing.scripted import ScriptedAdapter`` goes on working; new code
imports it from ``oma_actors`` or ``oma_actors.testing``.
"""

from oma_actors.llm.scripted import RecordedCall, Script, ScriptedAdapter, text_response

__all__ = ["RecordedCall", "Script", "ScriptedAdapter", "text_response"]
