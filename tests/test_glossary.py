"""docs/concepts/glossary.md: one meaning for each word, and the names it cites exist.

The words that had several meanings ("effect", "Session", "pending", "settled") each have
an entry that gives the one meaning ("Only this: ..."); only the conversation memory is a
class named `Session`; and every helikon name the glossary cites in backticks is a name
helikon offers, so the page cannot drift from the code.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import helikon
from helikon import Agent, Run, ScriptedModel
from helikon._moved import RENAMED
from helikon.core import CallModel, Terminate
from helikon.debug.steps import Frame

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "concepts" / "glossary.md"
SUBPACKAGES = ("core", "run", "models", "tools", "durable", "trace", "debug", "studio")
CODE = re.compile(r"`([^`]+)`")


def entries() -> dict[str, str]:
    """term -> its text, for every `- **term**: text` entry of the page."""
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=- \*\*)", PAGE.read_text(encoding="utf-8")):
        head = re.match(r"- \*\*([^*]+)\*\*(?: \([^)]*\))?: ", block)
        if head:
            found[head.group(1)] = block[head.end() :].split("\n\n")[0]
    return found


def offered() -> dict[str, object]:
    """Every name helikon or one of its subpackages offers (`__all__`)."""
    names: dict[str, object] = {name: getattr(helikon, name) for name in helikon.__all__}
    for package in SUBPACKAGES:
        module = importlib.import_module(f"helikon.{package}")
        names.update({name: getattr(module, name) for name in module.__all__})
    return names


def resolves(token: str, names: dict[str, object]) -> bool:
    """True when a cited `Name`, `Name.attribute` or `helikon.path.Name` exists."""
    parts = token.split("(")[0].split(".")
    if parts[0] == "helikon":
        for end in range(len(parts), 0, -1):
            try:
                target: object = importlib.import_module(".".join(parts[:end]))
            except ImportError:
                continue
            return all_attributes(target, parts[end:])
        return False
    return parts[0] in names and all_attributes(names[parts[0]], parts[1:])


def all_attributes(target: object, attributes: list[str]) -> bool:
    for attribute in attributes:
        fields = getattr(target, "__dataclass_fields__", {})
        if attribute in fields:
            return True  # a field's value is data, not a further name
        if not hasattr(target, attribute):
            return False
        target = getattr(target, attribute)
    return True


def test_the_glossary_is_in_the_nav() -> None:
    assert "concepts/glossary.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize("word", ["effect", "Session", "pending", "settled"])
def test_each_word_that_had_several_meanings_has_one(word: str) -> None:
    assert entries()[word].startswith("Only this: ")


@pytest.mark.parametrize(
    "word", ["action", "perform", "next action", "side effect", "event record", "browser session"]
)
def test_the_other_meanings_have_words_of_their_own(word: str) -> None:
    assert word in entries()


def test_every_name_the_glossary_cites_exists() -> None:
    names = offered()
    cited = {
        token
        for token in CODE.findall(PAGE.read_text(encoding="utf-8"))
        if re.fullmatch(r"[A-Za-z_][\w.]*(\(.*\))?", token)
        and (token[0].isupper() or token.startswith("helikon."))
    }
    assert len(cited) > 30
    missing = sorted(token for token in cited if not resolves(token, names))
    assert not missing, f"the glossary cites names helikon does not offer: {missing}"


def test_the_citation_check_can_fail() -> None:
    names = offered()
    assert resolves("NeedsApproval.settled", names)
    assert resolves("helikon.durable.Session", names)
    assert not resolves("NeedsApproval.nothing", names)
    assert not resolves("Nothing", names)
    assert not resolves("helikon.durable.Nothing", names)


def test_only_the_conversation_memory_is_a_class_named_session() -> None:
    found = []
    for module in pkgutil.walk_packages(helikon.__path__, "helikon."):
        if module.name.endswith("__main__"):
            continue
        try:
            loaded = importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed
            continue
        found += [
            f"{value.__module__}.{value.__name__}"
            for value in vars(loaded).values()
            if inspect.isclass(value) and value.__name__ == "Session"
        ]
    assert set(found) == {"helikon.durable.views.Session"}


def test_the_studios_old_session_name_warns_and_gives_the_threaded_debugger() -> None:
    import helikon.studio

    with pytest.warns(DeprecationWarning, match="use helikon.studio.ThreadedDebugger"):
        old = helikon.studio.Session  # type: ignore[attr-defined]
    assert old is helikon.studio.ThreadedDebugger


# ---------------------------------------------------------------- "pending" is an approval's


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_renamed_name_still_imports_with_a_warning_naming_the_new_one(old: str) -> None:
    package, name = old.rsplit(".", 1)
    home, now = RENAMED[old].rsplit(".", 1)
    with pytest.warns(DeprecationWarning) as caught:
        namespace: dict[str, object] = {}
        exec(f"from {package} import {name}", namespace)
    assert namespace[name] is getattr(importlib.import_module(home), now)
    assert [str(w.message) for w in caught] == [
        f"{old} was renamed {RENAMED[old]}: import it as `from {home} import {now}`"
    ]


def test_an_old_name_is_not_offered_and_an_unknown_one_is_an_attribute_error() -> None:
    import helikon.core

    assert "pending_action" not in helikon.core.__all__
    assert "next_action_of" in helikon.core.__all__
    with pytest.raises(AttributeError, match=r"module 'helikon\.core' has no attribute 'nope'"):
        helikon.core.nope  # type: ignore[attr-defined]  # noqa: B018


async def test_a_runs_and_a_frames_pending_warn_and_give_the_next_action() -> None:
    run = Run(Agent("echo", ScriptedModel(["hi"])), input="hello")
    await run.apply()  # Start applied: the model is called next
    assert isinstance(run.next_action, CallModel)
    with pytest.warns(DeprecationWarning, match=r"^Run.pending was renamed Run.next_action$"):
        assert run.pending is run.next_action  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="Run.next_action"):
        run.pending = Terminate()  # type: ignore[attr-defined]
    assert run.next_action == Terminate()
    frame = Frame(1, run.state, 0, None, Terminate())
    with pytest.warns(DeprecationWarning, match=r"^Frame.pending was renamed Frame.next_action$"):
        assert frame.pending == Terminate()


def test_the_changelog_lists_every_renamed_name() -> None:
    changelog = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([\w.]+)`[^|]* \| `([\w.]+)` \|", changelog, flags=re.MULTILINE))
    assert set(RENAMED.items()) <= rows
    assert {("Run.pending", "Run.next_action"), ("Frame.pending", "Frame.next_action")} <= rows
