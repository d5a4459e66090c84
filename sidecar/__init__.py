"""The gRPC sidecar of oma-actors: ``oma serve`` (package ``oma.v1``).

A separate top-level package that drives ``oma_actors`` through its public API only, so that Go,
Node or any gRPC host can start, watch, restore and approve runs and implement tools. Nothing in
``oma_actors`` imports it (or grpc).
"""

__version__ = "0.1.0"
