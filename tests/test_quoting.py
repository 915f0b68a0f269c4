"""A value helikon did not write is quoted cut short (`helikon.core.quoting`), wherever it is
read: a megabyte in a trace line, a store row, a chart file or an HTTP request makes an error
line of under 300 characters, never a megabyte line.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_support import KEY, Backend
from test_studio import Client, budget_session, raw, raw_request, serve

from helikon import Agent, ScriptedModel, Tool
from helikon.cli import main
from helikon.cli.loading import LoadError, load
from helikon.core.codec import dumps
from helikon.core.quoting import LIMIT, cut, quoted
from helikon.durable import RunLeased, RunNotFound, RunStore, StoreCorrupt
from helikon.durable.signing import sign
from helikon.trace import TraceError, read_trace

ROOT = Path(__file__).resolve().parent.parent
BIG = "x" * 2**20  # a megabyte
TTL = 60.0


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Files are named relative to `tmp_path`: an error names them, and they are short."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_short(message: str) -> None:
    assert "\n" not in message, message[:400]
    assert len(message) < 300, message[:400]
    assert "(1048576 characters)" in message or "…" in message, message


def test_quoted_cuts_a_long_value_and_says_how_long_it_was() -> None:
    assert quoted("short") == "'short'"
    assert quoted(BIG) == repr("x" * LIMIT) + "… (1048576 characters)"
    assert quoted(b"y" * 1000) == repr(b"y" * LIMIT) + "… (1000 bytes)"
    assert quoted("a\nb") == "'a\\nb'"
    assert len(quoted([BIG] * 10)) <= LIMIT + 1
    assert cut("a library's\nmessage") == "a library's\\nmessage"
    assert cut(BIG) == "x" * LIMIT + "… (1048576 characters)"


# -- traces -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("recorded") / "triage.jsonl"
    code = main(["run", str(ROOT / "charts" / "triage.py"), "--offline", "--trace", str(path)])
    assert code == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def transition(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(line for line in lines if line.get("kind") == "transition")


TRACE_EDITS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "a version": lambda lines: lines[0].update(version=BIG),
    "a run id never opened": lambda lines: transition(lines).update(run_id=BIG),
    "a line's kind": lambda lines: transition(lines).update(kind=BIG),
    "a row's source": lambda lines: transition(lines)["row"].update(source=BIG),
    "a state's phase": lambda lines: transition(lines)["state_after"].update(phase=BIG),
    "a chart's initial phase": lambda lines: lines[0]["table"].update(initial=BIG),
}


@pytest.mark.parametrize("edit", TRACE_EDITS, ids=list(TRACE_EDITS))
def test_a_megabyte_in_a_trace_line_is_quoted_cut_short(
    recorded: list[dict[str, Any]], here: Path, edit: str
) -> None:
    lines = json.loads(json.dumps(recorded))
    TRACE_EDITS[edit](lines)
    Path("trace.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(TraceError) as refused:
        read_trace("trace.jsonl")
    assert_short(str(refused.value))


# -- stores -------------------------------------------------------------------------------------


async def stored_run(store: RunStore) -> None:
    await Agent("a", ScriptedModel(["hi"])).run("go", store=store, run_id="r1").collect()


async def test_a_megabyte_run_id_asked_of_a_store_is_quoted_cut_short(store: RunStore) -> None:
    with pytest.raises(RunNotFound) as refused:
        store.get(BIG)
    assert_short(str(refused.value))


async def test_a_megabyte_in_a_header_row_is_quoted_cut_short(
    store: RunStore, backend: Backend
) -> None:
    await stored_run(store)
    forged = dumps(dataclasses.replace(store.header("r1"), run_id=BIG))
    backend.sql(
        "UPDATE runs SET header = ?, header_mac = ?", forged, sign(KEY, "header", "r1", forged)
    )
    with pytest.raises(StoreCorrupt) as refused:
        store.get("r1")
    assert_short(str(refused.value))


async def test_a_megabyte_lease_owner_is_quoted_cut_short(store: RunStore) -> None:
    await stored_run(store)
    await store.claim("r1", BIG, TTL)
    with pytest.raises(RunLeased) as refused:
        await store.claim("r1", "another", TTL)
    assert_short(str(refused.value))


# -- chart files --------------------------------------------------------------------------------


def test_a_chart_file_that_fails_with_a_megabyte_is_cut_short(here: Path) -> None:
    path = Path("chart.py")
    path.write_text(f"raise ValueError('x' * {2**20})\n")
    with pytest.raises(LoadError) as refused:
        load(str(path))
    assert_short(str(refused.value))


def test_a_megabyte_attribute_of_a_chart_file_is_quoted_cut_short(here: Path) -> None:
    path = Path("chart.py")
    path.write_text("pass\n")
    with pytest.raises(LoadError) as refused:
        load(f"{path}:{BIG}")
    assert_short(str(refused.value))


# -- tool schemas (an MCP server's listing) -----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        (BIG, {"type": "object"}),
        ("t", {"type": BIG}),
        ("t", {"type": "object", "properties": {"a": {"type": BIG}}}),
        ("t", {"type": "object", "properties": {"a": {"pattern": BIG + "\\1"}}}),
    ],
)
def test_a_megabyte_in_a_tool_schema_is_quoted_cut_short(name: str, schema: Any) -> None:
    with pytest.raises(ValueError) as refused:
        Tool.from_schema(name, "d", schema, lambda arguments: "ok")
    assert_short(str(refused.value))


@pytest.mark.parametrize(
    "schema",
    [{"type": "array"}, "no schema", {"properties": {"a": {"pattern": "(a)\\1"}}}],
)
def test_a_megabyte_tool_name_with_a_bad_output_schema_is_quoted_cut_short(schema: Any) -> None:
    # The output schema is checked before the tool's name (helikon.mcp.listing._tool), so a
    # server's huge name reaches that message first.
    from mcp import types

    from helikon.mcp.output import output_check

    listed = types.Tool.model_construct(name=BIG, input_schema={}, output_schema=schema)
    with pytest.raises(ValueError) as refused:
        output_check(listed)
    assert_short(str(refused.value))


# -- HTTP ---------------------------------------------------------------------------------------

SIXTY_KB = "x" * 60_000  # a body is at most 64 KB


@pytest.fixture
def client() -> Any:
    server = serve(budget_session())
    yield Client(server)
    server.close()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/break", {"kind": SIXTY_KB, "value": "x"}),
        ("/api/fork", {"at": SIXTY_KB, "kind": "text", "value": "x"}),
        ("/api/back", {"steps": SIXTY_KB}),
        ("/api/rewind", {"to": SIXTY_KB}),
        ("/api/break/" + SIXTY_KB, None),
        ("/api/" + SIXTY_KB, None),
    ],
)
def test_a_long_value_in_a_request_is_quoted_cut_short(
    client: Client, path: str, body: Any
) -> None:
    status, data = client.request("POST", path, body)
    assert 400 <= status < 500
    assert_short(data["error"])


def test_a_long_host_header_is_quoted_cut_short(client: Client) -> None:
    request = raw(client, "GET /api/state HTTP/1.1", "X: y").replace(
        f"Host: 127.0.0.1:{client.server.port}".encode(), f"Host: {SIXTY_KB}".encode()
    )
    status, data = raw_request(client, request)
    assert status == 403
    assert_short(data["error"])
