"""Commands that other packages add to ``oma``, found through the ``oma_actors.cli`` entry points.

A distribution adds a command by declaring an entry point in that group, named after the command
and pointing at an object (usually a module) that has the two functions of ``CommandPlugin``::

    [project.entry-points."oma_actors.cli"]
    serve = "sidecar.cli"

This is how ``oma serve`` reaches the gRPC sidecar: ``oma_actors`` never imports ``sidecar`` or
grpc (the layering contract forbids it), and no module is looked up by a name hidden from
import-linter. ``add_parser`` runs on every ``oma`` invocation, even ``oma --help``, so a plugin
imports its heavy dependencies only in ``run``. A dependency that is missing there (an extra that
was not installed) becomes a ``ConfigurationError`` that says what to install, not a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Protocol

from oma_actors import ConfigurationError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Coroutine, Iterable

    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]

COMMAND_GROUP = "oma_actors.cli"
"""The entry-point group that ``oma`` reads its extra commands from."""

PLUGIN_DEST = "oma_plugin"
"""The ``argparse`` attribute that tells which plugin a parsed command belongs to."""


class CommandPlugin(Protocol):
    """What an ``oma_actors.cli`` entry point loads: a sub-parser and the command's coroutine."""

    def add_parser(self, commands: Subcommands) -> None:
        """Add the command's sub-parser to ``commands`` (must stay cheap to import and call)."""
        ...

    def run(self, args: argparse.Namespace) -> Coroutine[Any, Any, int]:
        """The coroutine that carries out the parsed command; it returns the exit code."""
        ...


@dataclass(frozen=True, slots=True)
class LoadedCommand:
    """A plugin command added to the parser: its entry point and what it loaded."""

    entry: EntryPoint
    plugin: CommandPlugin | None
    missing: ModuleNotFoundError | None = None

    async def run(self, args: argparse.Namespace) -> int:
        """Run the plugin's command; a missing dependency raises ``ConfigurationError``.

        Raises:
            ConfigurationError: the plugin, or what its command imports, needs a module of
                another distribution that is not installed.
        """
        if self.plugin is None:
            assert self.missing is not None
            raise missing_dependency(self.entry, self.missing)
        try:
            return await self.plugin.run(args)
        except ModuleNotFoundError as exc:
            if _top(exc.name) == _top(self.entry.module):
                raise  # a module of the plugin itself is missing: a bug, not a missing extra
            raise missing_dependency(self.entry, exc) from exc


def discover(group: str = COMMAND_GROUP) -> list[EntryPoint]:
    """The installed entry points of ``group``, first one of each name only, sorted by name."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=group):
        found.setdefault(entry.name, entry)
    return [found[name] for name in sorted(found)]


def add_plugin_parsers(commands: Subcommands, entries: Iterable[EntryPoint]) -> None:
    """Add each plugin's sub-parser; a built-in command of the same name wins.

    A plugin that cannot be imported for want of another distribution still gets a sub-parser,
    so that running it explains what to install instead of ``invalid choice``.

    Args:
        commands: the sub-parsers of the top-level ``oma`` parser.
        entries: the entry points to load (see ``discover``).
    """
    for entry in entries:
        if entry.name in commands.choices:
            continue
        try:
            plugin: CommandPlugin = entry.load()
        except ModuleNotFoundError as exc:
            if _top(exc.name) == _top(entry.module):
                raise
            commands.add_parser(entry.name, help=f"unavailable: {exc.name} is not installed")
            loaded = LoadedCommand(entry, None, exc)
        else:
            plugin.add_parser(commands)
            if entry.name not in commands.choices:
                raise ConfigurationError(
                    f"the {COMMAND_GROUP} entry point {entry.name!r} ({entry.value}) did not "
                    f"add a command named {entry.name!r}"
                )
            loaded = LoadedCommand(entry, plugin)
        commands.choices[entry.name].set_defaults(**{PLUGIN_DEST: loaded})


def missing_dependency(entry: EntryPoint, exc: ModuleNotFoundError) -> ConfigurationError:
    """The error for a plugin command whose dependency ``exc.name`` is not installed.

    The hint names the extra of the plugin's distribution that is called like the plugin's
    package (``oma-actors[sidecar]`` for ``sidecar.cli``), when the distribution declares one.
    """
    hint = f"install the distribution that provides {exc.name!r}"
    dist = entry.dist
    extra = _top(entry.module)
    if dist is not None and extra in (dist.metadata.get_all("Provides-Extra") or []):
        hint = f"pip install '{dist.name}[{extra}]'"
    return ConfigurationError(
        f"oma {entry.name} needs {exc.name!r}, which is not installed: {hint}"
    )


def _top(module: str | None) -> str:
    return (module or "").partition(".")[0]


__all__ = [
    "COMMAND_GROUP",
    "PLUGIN_DEST",
    "CommandPlugin",
    "LoadedCommand",
    "add_plugin_parsers",
    "discover",
    "missing_dependency",
]
