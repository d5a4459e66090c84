"""The run timeline: a frozen value of what happened in a run, and its two renderings.

``build_timeline(snapshot, events)`` builds it (``model``); ``render_timeline_text`` prints it
with rich, readable at 80 columns; ``render_timeline_html`` writes one self-contained page.
"""

from oma_actors.timeline.model import build_timeline
from oma_actors.timeline.render_html import render_timeline_html
from oma_actors.timeline.render_text import render_timeline_text
from oma_actors.timeline.values import (
    CallMark,
    Timeline,
    TimelineApproval,
    TimelineCall,
    TimelineFork,
    TimelineLane,
    TimelineTurn,
)

__all__ = [
    "CallMark",
    "Timeline",
    "TimelineApproval",
    "TimelineCall",
    "TimelineFork",
    "TimelineLane",
    "TimelineTurn",
    "build_timeline",
    "render_timeline_html",
    "render_timeline_text",
]
