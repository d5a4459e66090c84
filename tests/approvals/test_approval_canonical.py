"""Canonical JSON, request hashes and ids (AP-07..AP-10, T-46, T-47)."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import random
import subprocess
from datetime import UTC, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest
from approval_helpers import REQUESTED_AT, task_json
from service_kit import require_executable

from oma_actors.approvals import (
    APPROVAL_KEY_PREFIX,
    approval_hash_input,
    approval_key,
    approval_request_id,
    create_approval_request,
    dispatch_content,
    hash_approval_request,
    stable_json,
    tool_call_content,
)
from oma_actors.errors import DurableApprovalError

VALIDATION = "APPROVAL_VALIDATION_ERROR"


def _refused(value: object) -> str:
    with pytest.raises(DurableApprovalError) as caught:
        stable_json(value)
    assert caught.value.code == VALIDATION
    return str(caught.value)


def test_t46_approval_key() -> None:
    assert approval_key("apr_test") == "__oma_approval__/apr_test"
    assert APPROVAL_KEY_PREFIX == "__oma_approval__/"


def test_key_order_never_changes_the_text() -> None:
    one = {"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": None}}
    two = {"a": {"x": None, "y": [1, {"p": 3, "q": 2}]}, "b": 1}
    assert stable_json(one) == stable_json(two) == '{"a":{"x":null,"y":[1,{"p":3,"q":2}]},"b":1}'


def test_keys_sort_by_utf16_code_units_like_javascript() -> None:
    # Code-point order would put U+FFFF before U+1F600; UTF-16 (D83D DE00) puts it after.
    value = {"\uffff": 1, "\U0001f600": 2, "a": 3, "B": 4}
    assert stable_json(value) == '{"B":4,"a":3,"\U0001f600":2,"\uffff":1}'


def test_arrays_keep_their_order_and_tuples_and_mapping_proxies_are_plain() -> None:
    value = MappingProxyType({"list": [3, 1, 2], "tuple": (True, False, None)})
    assert stable_json(value) == '{"list":[3,1,2],"tuple":[true,false,null]}'


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1"),
        (2.0, "2"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (-2.5e-10, "-2.5e-10"),
        (1.5e-7, "1.5e-7"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (0.000123, "0.000123"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (2.0**53, "9007199254740992"),
        (1.2345678901234568e18, "1234567890123456800"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (7, "7"),
        (-12, "-12"),
        (True, "true"),
    ],
)
def test_numbers_print_as_javascript_prints_them(number: float, text: str) -> None:
    assert stable_json(number) == text
    # Reading the text back gives the same number (an int stays an exact int).
    parsed = json.loads(text)
    assert parsed == number if isinstance(number, int) else float(parsed) == number


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (2**53 - 1, "9007199254740991"),
        (-(2**53 - 1), "-9007199254740991"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),  # not a double: rounds to even, as JSON.parse does
        (-(2**53 + 1), "-9007199254740992"),
        (2**53 + 3, "9007199254740996"),
        (2**63, "9223372036854776000"),
        (10**21 - 1, "1e+21"),
        (10**21, "1e+21"),
        (10**30, "1e+30"),
        (-(10**30), "-1e+30"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
        pytest.param(2**1023, "8.98846567431158e+307", id="2**1023"),
    ],
)
def test_integers_beyond_2_53_print_as_the_double_javascript_reads(number: int, text: str) -> None:
    # JSON.stringify(10**30) === "1e+30": JavaScript has only doubles, so an OMA hash over a
    # large integer is a hash over the double's text, and ours must be too.
    assert stable_json(number) == text
    assert stable_json({"n": number}) == stable_json({"n": float(number)})
    assert hash_approval_request("plan", "b", {"n": number}) == hash_approval_request(
        "plan", "b", {"n": float(number)}
    )


def test_an_integer_too_large_for_a_double_is_refused() -> None:
    # JavaScript reads it as Infinity, which JSON cannot carry (like math.inf here).
    assert "$.n is too large" in _refused({"n": 2**1024})
    assert "$.n is too large" in _refused({"n": -(10**400)})
    assert "$.n is too large" in _refused({"n": 10**5000})  # beyond int_max_str_digits too


def test_an_integral_float_hashes_like_the_int() -> None:
    assert hash_approval_request("plan", "b", {"n": 2.0}) == hash_approval_request(
        "plan", "b", {"n": 2}
    )


def test_strings_escape_like_json_stringify() -> None:
    assert stable_json('q"\\\n\t\x1f\x7f\u2028é') == '"q\\"\\\\\\n\\t\\u001f\x7f\u2028é"'
    # A lone surrogate cannot be UTF-8; JSON.stringify escapes it, and hashing still works.
    assert stable_json("x\ud800") == '"x\\ud800"'
    assert len(hash_approval_request("plan", "b", {"s": "x\ud800"})) == 64


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"rawInput": {"amount": math.nan}}, "$.rawInput.amount is not a finite number"),
        ({"a": [1, math.inf]}, "$.a[1] is not a finite number"),
        ({"a": -math.inf}, "$.a is not a finite number"),
        ({"when": datetime(2026, 1, 1, tzinfo=UTC)}, "$.when is a datetime"),
        ({"n": Decimal("1")}, "$.n is a Decimal"),
        ({"s": {1, 2}}, "$.s is a set"),
        ({"b": b"x"}, "$.b is a bytes"),
        ({"o": object()}, "$.o is a object"),
        ({"e": _Color.RED}, "$.e is a _Color"),
        ({"t": _Text("x")}, "$.t is a _Text"),
        ({"a b": [{"c": math.nan}]}, '$["a b"][0].c is not a finite number'),
        ({"x": {1: "one"}}, "object at $.x has a non-string key 1"),
        (print, "$ is a builtin_function_or_method"),
    ],
)
def test_non_json_values_are_refused_with_their_path(value: object, fragment: str) -> None:
    assert fragment in _refused(value)


def test_cycles_are_refused_but_shared_values_are_not() -> None:
    looped: dict[str, Any] = {"a": {}}
    looped["a"]["self"] = looped
    assert "$.a.self is a cycle" in _refused(looped)
    listed: list[Any] = [1]
    listed.append(listed)
    assert "$[1] is a cycle" in _refused(listed)
    shared = [1, 2]
    assert stable_json({"x": shared, "y": shared}) == '{"x":[1,2],"y":[1,2]}'


def test_absurd_nesting_is_a_validation_error_not_a_crash() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert "nested too deeply" in _refused(deep)


def test_hash_is_sha256_of_the_canonical_scope_boundary_content() -> None:
    content = {"kind": "plan", "tasks": [], "continuation": "execute"}
    text = approval_hash_input("plan", "coordinator-plan", content)
    assert text == (
        '{"boundary":"coordinator-plan","content":{"continuation":"execute","kind":"plan",'
        '"tasks":[]},"scope":"plan"}'
    )
    expected = hashlib.sha256(text.encode()).hexdigest()
    assert hash_approval_request("plan", "coordinator-plan", content) == expected
    # Pinned: a change to the canonical form would silently orphan every stored decision.
    assert expected == "9d5f3defaff8bf7b03ca6d4c2bde03634d40e118b6631c075dddb4cb90874676"


def test_hash_excludes_reason_and_requested_at() -> None:
    task = task_json("t1")
    first = create_approval_request(
        run_id="run-1", scope="task_dispatch", boundary="t1", content=dispatch_content(task)
    )
    second = create_approval_request(
        run_id="run-1",
        scope="task_dispatch",
        boundary="t1",
        content=dispatch_content(dict(reversed(task.items()))),
        reason="another reason",
        requested_at=REQUESTED_AT,
    )
    assert first.request_hash == second.request_hash
    assert first.id == second.id


def test_id_is_deterministic_trimmed_and_depends_on_every_input() -> None:
    digest = "a" * 64
    joined = f"run-1\nplan\ncoordinator-plan\n{digest}".encode()
    expected = "apr_" + hashlib.sha256(joined).hexdigest()[:32]
    assert approval_request_id("run-1", "plan", "coordinator-plan", digest) == expected
    base = approval_request_id("run-1", "plan", "coordinator-plan", digest)
    assert approval_request_id(" run-1 ", "plan", " coordinator-plan\n", digest) == base
    others = {
        approval_request_id("run-2", "plan", "coordinator-plan", digest),
        approval_request_id("run-1", "task_round", "coordinator-plan", digest),
        approval_request_id("run-1", "plan", "other", digest),
        approval_request_id("run-1", "plan", "coordinator-plan", "b" * 64),
    }
    assert base not in others
    assert len(others) == 4


def test_same_run_boundary_and_content_give_the_same_request() -> None:
    def make() -> tuple[str, str]:
        content = tool_call_content(
            tool_name="t",
            raw_input={"a": "1"},
            input={"a": 1},
            agent_name="w",
            task_id="t1",
            tool_call_id="c1",
        )
        request = create_approval_request(
            run_id="run", scope="tool_call", boundary="t1:c1", content=content
        )
        return request.id, request.request_hash

    assert make() == make()


_STABLE_JS = r"""
const stable = (v) => {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(stable).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + stable(v[k])).join(",") + "}";
};
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  for (const line of input.split("\n").filter(Boolean)) console.log(stable(JSON.parse(line)));
});
"""


def _javascript_stable_json(lines: list[str]) -> list[str]:
    """Each JSON text of ``lines`` as JSON.parse and then the JavaScript ``stable`` print it."""
    node_path = require_executable("node")  # skipped locally without node, FAILS in CI
    node = subprocess.run(
        [node_path, "-e", _STABLE_JS],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert node.returncode == 0, node.stderr
    return node.stdout.splitlines()


def test_matches_a_javascript_stable_json_on_integers() -> None:
    rng = random.Random(53)
    edges = [0, 1, -1, 7, -12, 2**31, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 2, 2**53 + 3]
    edges += [2**63, 2**64 + 1, 10**21 - 1, 10**21, 10**21 + 1, 10**30, 2**1023]
    integers = [sign * value for value in edges for sign in (1, -1)]
    integers += [
        rng.randint(-(10 ** rng.randint(1, 40)), 10 ** rng.randint(1, 40)) for _ in range(200)
    ]
    integers += [2**53 + rng.randint(-64, 64) for _ in range(50)]
    # Python writes every digit; JSON.parse reads the nearest double, as OMA would hold it.
    lines = [json.dumps(n) for n in integers] + [json.dumps({"n": integers, "f": [1.5, 2.0]})]
    assert _javascript_stable_json(lines) == [stable_json(json.loads(line)) for line in lines]


def test_matches_a_javascript_stable_json_on_random_values() -> None:
    rng = random.Random(7)
    values: list[Any] = []
    for _ in range(300):
        magnitude = 10.0 ** rng.randint(-30, 30)
        values.append(
            {
                "f": rng.uniform(-1, 1) * magnitude,
                "i": float(rng.randint(-(2**60), 2**60)),
                "n": rng.randint(-(10 ** rng.randint(0, 35)), 10 ** rng.randint(0, 35)),
                "k" + chr(rng.randint(0x20, 0x2FFFF)): [
                    rng.random(),
                    "s" + chr(rng.randint(0, 0xFFFF)),
                ],
                "\U0001f600": None,
                "\uffff": True,
            }
        )
    lines = [json.dumps(v, ensure_ascii=True) for v in values]
    assert _javascript_stable_json(lines) == [stable_json(json.loads(line)) for line in lines]
