"""Rewrite ``from oma_actors import ...`` lines to the names' homes after the API tiers.

Usage::

    python scripts/rewrite_imports.py            # rewrite the tracked files in place
    python scripts/rewrite_imports.py --check    # list what would change, exit 1 if anything
    python scripts/rewrite_imports.py --mapping  # print the mapping, one "Name module" a line

The mapping is ``oma_actors._MOVED`` (the table the package's deprecation ``__getattr__``
serves), so this script and the warnings can never disagree. It is idempotent: once no
``from oma_actors import`` statement names a moved name, a second run changes nothing.

What it rewrites, in Python files, Markdown and text files git tracks:

- every ``from oma_actors import ...`` statement that starts a line (one-line or parenthesized,
  at any indentation: module level, inside functions, ``TYPE_CHECKING`` blocks, docstrings and
  Markdown examples), split into one statement per home, aliases kept;
- the dotted references ``oma_actors.Name`` in text (docstrings, comments, Markdown).

Python files it changed are then sorted and formatted with ruff (which merges two statements
importing from one module). A statement it cannot parse safely (a ``;`` after it, a comment
inside its parentheses) is reported and left alone.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oma_actors import _MOVED  # noqa: E402  (the package must be importable from ROOT)

SUFFIXES = (".py", ".md", ".txt", ".rst")
# These name the old top-level spellings on purpose: the package itself and the test that pins
# the deprecation path.
SKIP = {
    "oma_actors/__init__.py",
    "scripts/rewrite_imports.py",
    "tests/test_public_api_tiers.py",
}
LINE_LIMIT = 99

STATEMENT = re.compile(
    r"^(?P<indent>[ \t]*)from oma_actors import (?P<body>\([^)]*\)|[^\n(][^\n]*)", re.MULTILINE
)
_LONGEST_FIRST = "|".join(sorted(_MOVED, key=len, reverse=True))
DOTTED = re.compile(rf"\boma_actors\.(?P<name>{_LONGEST_FIRST})\b")


def _names(body: str) -> list[ast.alias] | None:
    """The aliases of ``from oma_actors import <body>``, or ``None`` when unsafe to rewrite."""
    if "#" in body.strip("()") and body.startswith("("):
        return None  # a comment inside the parentheses would be lost
    code, _, _comment = body.partition("#")
    try:
        tree = ast.parse(f"from oma_actors import {code.strip()}")
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.ImportFrom):
        return None
    return list(tree.body[0].names)


def _statement(indent: str, module: str, aliases: list[ast.alias], *, compact: bool) -> str:
    """One statement; too long for a line, it is wrapped (ruff formats Python files after)."""
    parts = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases]
    one = f"{indent}from {module} import {', '.join(parts)}"
    if len(one) <= LINE_LIMIT:
        return one
    if not compact:
        inner = "".join(f"{indent}    {part},\n" for part in parts)
        return f"{indent}from {module} import (\n{inner}{indent})"
    # Prose examples keep the compact hanging style, aligned under the parenthesis.
    head = f"{indent}from {module} import ("
    lines, line = [], head
    for index, part in enumerate(parts):
        word = part + (")" if index == len(parts) - 1 else ",")
        if line not in (head,) and len(line) + 1 + len(word) > LINE_LIMIT:
            lines.append(line)
            line = " " * len(head) + word
        else:
            line += ("" if line == head else " ") + word
    return "\n".join([*lines, line])


def rewrite_statement(match: re.Match[str], *, compact: bool = False) -> str | None:
    """The replacement of one matched statement, or ``None`` to leave it as it is."""
    indent, body = match["indent"], match["body"]
    aliases = _names(body)
    if aliases is None:
        return None
    if not any(a.name in _MOVED for a in aliases):
        return match[0]
    comment = ""
    if not body.startswith("(") and "#" in body:
        comment = "  #" + body.partition("#")[2]
    homes: dict[str, list[ast.alias]] = {}
    for alias in aliases:
        homes.setdefault(_MOVED.get(alias.name, "oma_actors"), []).append(alias)
    modules = sorted(homes, key=lambda m: (m != "oma_actors", m))
    lines = [_statement(indent, module, homes[module], compact=compact) for module in modules]
    lines[0] += comment
    return "\n".join(lines)


def rewrite_text(text: str, path: str, problems: list[str]) -> str:
    """``text`` with its statements and dotted references rewritten."""
    out: list[str] = []
    last = 0
    for match in STATEMENT.finditer(text):
        new = rewrite_statement(match, compact=not path.endswith(".py"))
        if new is None:
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path}:{line}: left alone (cannot rewrite safely): {match[0]!r}")
            new = match[0]
        out.append(text[last : match.start()])
        out.append(new)
        last = match.end()
    out.append(text[last:])
    rewritten = "".join(out)
    return DOTTED.sub(lambda m: f"{_MOVED[m['name']]}.{m['name']}", rewritten)


def tracked_files() -> list[Path]:
    """The files git tracks (and the untracked ones it does not ignore) that may hold imports."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [
        ROOT / name
        for name in sorted(set(listed))
        if name.endswith(SUFFIXES) and name not in SKIP and (ROOT / name).is_file()
    ]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or check) every tracked file; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    parser.add_argument("--mapping", action="store_true", help="print the mapping and exit")
    args = parser.parse_args(argv)
    if args.mapping:
        for name, module in sorted(_MOVED.items(), key=lambda item: (item[1], item[0])):
            print(name, module)
        return 0
    problems: list[str] = []
    changed: list[Path] = []
    for path in tracked_files():
        text = path.read_text(encoding="utf-8")
        new = rewrite_text(text, str(path.relative_to(ROOT)), problems)
        if new != text:
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for problem in problems:
        print(problem, file=sys.stderr)
    for path in changed:
        print(("would rewrite " if args.check else "rewrote ") + str(path.relative_to(ROOT)))
    python = [str(p) for p in changed if p.suffix == ".py"]
    if python and not args.check:
        ruff = str(Path(sys.executable).with_name("ruff"))
        subprocess.run([ruff, "check", "--select", "I", "--fix", "--quiet", *python], cwd=ROOT)
        subprocess.run([ruff, "format", "--quiet", *python], cwd=ROOT, check=True)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
