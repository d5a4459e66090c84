"""Commands added to ``oma`` through the ``oma_actors.cli`` entry points (``oma serve`` among them)."""

from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import cli_plugin_samples
import pytest
from rich.console import Console

from oma_actors import ConfigurationError
from oma_actors.cli import plugins
from oma_actors.cli.main import build_parser, command

GROUP = plugins.COMMAND_GROUP


def entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


def console() -> Console:
    return Console(file=io.StringIO())


def test_serve_is_declared_as_an_entry_point_of_the_installed_distribution() -> None:
    [serve] = [found for found in plugins.discover() if found.name == "serve"]
    assert serve.value == "sidecar.cli"
    assert serve.dist is not None
    assert serve.dist.name == "oma-actors"


def test_oma_serve_help_comes_from_the_sidecar_plugin() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert top.returncode == 0, top.stderr
    assert "serve" in top.stdout
    serve = subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", "serve", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert serve.returncode == 0, serve.stderr
    assert "--listen" in serve.stdout
    assert "--token-file" in serve.stdout


def test_oma_serve_without_the_sidecar_extra_says_what_to_install(tmp_path: Path) -> None:
    # grpc blocked as if the `sidecar` extra were not installed; the plugin itself still loads.
    code = (
        "import sys; sys.modules['grpc'] = None; "
        "from oma_actors.cli.main import main; "
        "sys.exit(main(['serve', '--store', 'memory://', "
        f"'--generated-token-file', {str(tmp_path / 'token')!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, check=False, env={"COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "oma serve needs 'grpc', which is not installed" in done.stderr
    assert "pip install 'oma-actors[sidecar]'" in done.stderr


async def test_a_plugin_command_is_parsed_and_run_through_its_entry_point() -> None:
    parser = build_parser([entry("hello", "cli_plugin_samples")])
    args = parser.parse_args(["hello", "--name", "ada"])
    assert await command(args, console()) == 7
    assert cli_plugin_samples.RAN[-1] == "ada"


async def test_a_built_in_command_wins_over_a_plugin_of_the_same_name() -> None:
    parser = build_parser([entry("checkpoint", "cli_plugin_samples")])
    args = parser.parse_args(["checkpoint", "show", "--store", "x.json"])
    assert getattr(args, plugins.PLUGIN_DEST, None) is None
    with pytest.raises(SystemExit):
        parser.parse_args(["hello"])  # the plugin was skipped, so its command is unknown


async def test_a_missing_dependency_of_a_command_is_a_configuration_error() -> None:
    parser = build_parser([entry("needy", "cli_plugin_samples:NeedsAnExtra")])
    args = parser.parse_args(["needy"])
    with pytest.raises(ConfigurationError, match="oma needy needs 'oma_no_such_extra_module'"):
        await command(args, console())


async def test_an_unimportable_plugin_still_gets_a_command_that_explains() -> None:
    parser = build_parser([entry("broken", "cli_plugin_unimportable")])
    assert "unavailable: oma_no_such_extra_module is not installed" in parser.format_help()
    args = parser.parse_args(["broken"])
    with pytest.raises(ConfigurationError, match="'oma_no_such_extra_module', which is not"):
        await command(args, console())


async def test_a_missing_module_of_the_plugin_itself_is_not_hidden() -> None:
    parser = build_parser([entry("buggy", "cli_plugin_samples:MissesItsOwnModule")])
    args = parser.parse_args(["buggy"])
    with pytest.raises(ModuleNotFoundError, match="cli_plugin_samples"):
        await command(args, console())


def test_a_plugin_that_adds_no_command_of_its_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="did not add a command named 'wrong'"):
        build_parser([entry("wrong", "cli_plugin_samples:NamesItsCommandWrongly")])


def test_discover_keeps_the_first_entry_point_of_each_name(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [entry("b", "m1"), entry("a", "m2"), entry("b", "m3")]
    monkeypatch.setattr(plugins, "entry_points", lambda group: found if group == GROUP else [])
    assert [(e.name, e.value) for e in plugins.discover()] == [("a", "m2"), ("b", "m1")]


def test_an_entry_point_naming_a_module_that_is_not_there_is_not_hidden() -> None:
    # A typo in the entry point (its own package missing) is the plugin's bug: shown as
    # "unavailable: ... is not installed" it would send the user to install a missing extra.
    with pytest.raises(ModuleNotFoundError, match="oma_no_such_plugin_package"):
        build_parser([entry("ghost", "oma_no_such_plugin_package.cli:Command")])
