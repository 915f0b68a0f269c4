"""A `ChartSpec` as JSON-able data and back: the form the kept chart versions are stored in,
and the start of chart documents (JSON now; YAML and SCXML read into the same spec later).

The data names guards, actions and effects; it holds no code. A spec read back resolves
those names against the registries when it compiles (`compile_chart`), so the functions a
chart registers itself (`ChartSpec.guards`, `.actions`) are not part of the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from helikon.core.chart.spec import ChartSpec, EverywhereRow
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import GuardRef, Phase, Row

DOCUMENT_VERSION = 1


def spec_data(spec: ChartSpec) -> dict[str, Any]:
    """`spec` as plain data (stable key order); `spec_from_data` reads it back.
    `checks_input` is written only when set, so a document of a chart without it reads as
    it was written before the field existed."""
    data: dict[str, Any] = {
        "helikon_chart": DOCUMENT_VERSION,
        "name": spec.name,
        "initial": spec.initial,
        "phases": [{"name": p.name, "final": p.final, "custom": p.custom} for p in spec.phases],
        "rows": [
            {"source": r.source, "input": r.input_kind, **_row(r.guards, r.target, r.action)}
            for r in spec.rows
        ],
        "everywhere": [
            {"input": e.input_kind, **_row(e.guards, e.target, e.action)} for e in spec.everywhere
        ],
        "awaits": {phase: list(kinds) for phase, kinds in spec.awaits.items()},
        "prompts": dict(spec.prompts),
        "effects": dict(spec.effects),
        "parents": dict(spec.parents),
        "regions": {phase: list(regions) for phase, regions in spec.regions.items()},
        "history": dict(spec.history),
    }
    if spec.checks_input:
        data["checks_input"] = True
    return data


def _row(guards: tuple[GuardRef, ...], target: str, action: str) -> dict[str, Any]:
    return {"guards": [str(g) for g in guards], "target": target, "action": action}


def spec_from_data(data: Mapping[str, Any]) -> ChartSpec:
    """The spec `data` describes (as `spec_data` writes it).

    Raises:
        ChartDefinitionError: the data is not a chart document of a version this helikon
            reads, or lacks a field (the message names it).
    """
    if data.get("helikon_chart") != DOCUMENT_VERSION:
        raise ChartDefinitionError(
            f"not a helikon chart document of version {DOCUMENT_VERSION}: "
            f"helikon_chart is {data.get('helikon_chart')!r}"
        )
    try:
        return ChartSpec(
            str(data["name"]),
            str(data["initial"]),
            tuple(Phase(p["name"], bool(p["final"]), bool(p["custom"])) for p in data["phases"]),
            tuple(
                Row(at, r["source"], r["input"], _guards(r), r["target"], r["action"])
                for at, r in enumerate(data["rows"])
            ),
            _frozen({k: tuple(v) for k, v in data["awaits"].items()}),
            _frozen(data["prompts"]),
            _frozen(data["effects"]),
            tuple(
                EverywhereRow(e["input"], _guards(e), e["target"], e["action"])
                for e in data["everywhere"]
            ),
            parents=_frozen(data["parents"]),
            regions=_frozen({k: tuple(v) for k, v in data["regions"].items()}),
            history=_frozen(data["history"]),
            checks_input=bool(data.get("checks_input", False)),
        )
    except (KeyError, TypeError) as exc:
        raise ChartDefinitionError(f"chart document: missing or malformed field {exc}") from None


def _guards(row: Mapping[str, Any]) -> tuple[GuardRef, ...]:
    """Guards as written (`name`, or `not name` for one that must not hold)."""
    return tuple(
        GuardRef(text[4:], False) if text.startswith("not ") else GuardRef(text)
        for text in row["guards"]
    )


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))
