"""Content hashes sort object keys as JavaScript does: by UTF-16 code unit, not by code point.

The two orders differ once a key holds a character past U+FFFF (stored by JavaScript as a
surrogate pair, 0xD800..0xDFFF) next to one in U+E000..U+FFFF: JavaScript puts "\U0001f600"
before "\ue000" and "\uffff", Python's default ``sorted`` puts it after them. Node, when it is
installed, hashes the same values to prove the digests are OMA's.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any

from service_kit import require_executable

from oma_actors.domain.messages import ToolUseBlock
from oma_actors.journal import canonical_content_hash
from oma_actors.journal.jsjson import js_dumps

# Code point order: a < é < \uE000 < \uFFFF < \U0001F600; UTF-16 order puts the emoji (D83D DE00)
# before \uE000.
KEYS = ["\uffff", "\U0001f600", "é", "a", "\ue000"]
JS_ORDER = ["a", "é", "\U0001f600", "\ue000", "\uffff"]

VALUES: list[Any] = [
    dict.fromkeys(KEYS, 1),
    {"outer": {key: [key, {key: None}] for key in reversed(KEYS)}, "\U0001f600x": True},
    {"type": "tool_use", "id": "c1", "name": "n", "input": {k: k for k in KEYS}},
    {"\U00010000": 1, "\ud7ff": 2, "\uff61": 3, "z": {"\U0010ffff": 4, "\uffef": 5}},
]

# The canonical form OMA hashes: object keys sorted by Array.prototype.sort's default order
# (UTF-16 code units), arrays in order, compact JSON.stringify text, sha256 hex of its UTF-8.
_NODE_HASH = r"""
const crypto = require("crypto");
const canon = (v) => {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
};
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  for (const line of input.split("\n").filter(Boolean)) {
    const text = canon(JSON.parse(line));
    console.log(JSON.stringify([text, crypto.createHash("sha256").update(text, "utf8").digest("hex")]));
  }
});
"""


def test_keys_are_sorted_by_utf16_code_units() -> None:
    text = js_dumps(dict.fromkeys(KEYS, 0), sort_keys=True)
    assert list(json.loads(text)) == JS_ORDER
    assert sorted(KEYS) != JS_ORDER  # the case where code point order would differ


def test_a_block_hash_takes_the_utf16_order() -> None:
    block = ToolUseBlock(id="c1", name="n", input=dict.fromkeys(KEYS, 0))
    inner = ",".join(f"{json.dumps(key, ensure_ascii=False)}:0" for key in JS_ORDER)
    text = '{"id":"c1","input":{' + inner + '},"name":"n","type":"tool_use"}'
    assert canonical_content_hash(block) == hashlib.sha256(text.encode()).hexdigest()


def test_hashes_equal_nodes() -> None:
    node = require_executable("node")  # skipped locally without node, FAILS under CI=true
    lines = [json.dumps(value, ensure_ascii=False) for value in VALUES]
    done = subprocess.run(
        [node, "-e", _NODE_HASH],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    expected = [json.loads(line) for line in done.stdout.splitlines()]
    ours = [[js_dumps(value, sort_keys=True), canonical_content_hash(value)] for value in VALUES]
    assert ours == expected
