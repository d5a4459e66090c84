"""The actor kernel: typed actors, refs, bounded mailboxes, supervision and the system.

The kernel knows nothing about agents or checkpoints. See ``ActorSystem`` for the lifecycle
(drain, then cancel) and ``Supervision`` for failure policies.
"""

from __future__ import annotations

from oma_actors.actors.actor import Actor
from oma_actors.actors.loop import event_loop_factory
from oma_actors.actors.mailbox import Mailbox
from oma_actors.actors.ref import ActorRef
from oma_actors.actors.supervision import Supervision, SupervisionKind
from oma_actors.actors.system import ActorSystem

__all__ = [
    "Actor",
    "ActorRef",
    "ActorSystem",
    "Mailbox",
    "Supervision",
    "SupervisionKind",
    "event_loop_factory",
]
