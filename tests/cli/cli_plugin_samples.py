"""Sample ``oma_actors.cli`` plugins for the plugin tests (loaded through ``EntryPoint``s)."""

from __future__ import annotations

import argparse
from typing import Any

RAN: list[str] = []


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hello = commands.add_parser("hello", help="say hello")
    hello.add_argument("--name", default="world")


async def run(args: argparse.Namespace) -> int:
    RAN.append(args.name)
    return 7


class NeedsAnExtra:
    """A plugin whose command imports a module that is not installed."""

    @staticmethod
    def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        commands.add_parser("needy")

    @staticmethod
    async def run(args: argparse.Namespace) -> int:
        import oma_no_such_extra_module  # noqa: F401

        return 0


class MissesItsOwnModule:
    """A plugin whose command imports a missing module of its own package (a bug)."""

    @staticmethod
    def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        commands.add_parser("buggy")

    @staticmethod
    async def run(args: argparse.Namespace) -> int:
        import cli_plugin_samples.no_such_submodule  # noqa: F401

        return 0


class NamesItsCommandWrongly:
    """A plugin that adds a command under another name than its entry point's."""

    @staticmethod
    def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        commands.add_parser("something-else")

    @staticmethod
    async def run(args: argparse.Namespace) -> Any:
        return 0
