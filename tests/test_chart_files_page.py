"""docs/howto/chart-files.md: its complete chart file is one, as the commands read it.

The page's first Python block is written to a file of its own and given to `helikon run
--offline`, `helikon test` and `helikon diagram`, as the page says to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_doc_examples import blocks

from helikon.cli import main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "howto" / "chart-files.md"


@pytest.fixture
def chart_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # helikon run keeps its run in ./.helikon
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    first = next(block for block in blocks(PAGE) if block.skipped is None)
    path = tmp_path / "faq.py"
    path.write_text(first.code, encoding="utf-8")
    return path


def test_the_pages_chart_file_runs_offline(
    chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(chart_file), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "Refunds take up to 5 working days; order A-17 shipped on Monday." in out


def test_the_pages_chart_file_is_covered_by_helikon_test(
    chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["test", str(chart_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{chart_file}: chart FaqChart (")
    assert "gaps: none" in out.splitlines()


def test_the_pages_chart_file_draws_its_agents_chart(
    chart_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagram", str(chart_file), "-f", "mermaid"]) == 0
    assert "LookingUp --> CallingModel" in capsys.readouterr().out
