"""A sample plugin module that cannot be imported: its extra is not installed."""

import oma_no_such_extra_module  # noqa: F401


def add_parser(commands: object) -> None:
    raise AssertionError("never reached: the import above fails")
