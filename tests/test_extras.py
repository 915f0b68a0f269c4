"""A missing extra is a one-line hint naming it, never a traceback.

Each case runs `helikon.cli.main` in a subprocess where the package is made unimportable
(`sys.modules[name] = None`, what Python does for a package that is not installed), or
where Graphviz's `dot` is not on PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helikon.cli import main

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = ROOT / "charts" / "triage.py"


def without(
    packages: list[str], argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`helikon ARGV` in a fresh interpreter in which `packages` cannot be imported."""
    hidden = "".join(f"sys.modules[{name!r}] = None; " for name in packages)
    code = f"import sys; {hidden}from helikon.cli import main; sys.exit(main({argv!r}))"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean, "PYTHONIOENCODING": "utf-8", **(env or {})},
        timeout=120,
    )


def assert_hint(done: subprocess.CompletedProcess[str], hint: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"helikon: {hint}\n", done.stderr
    assert done.stdout == ""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("extras") / "run.jsonl"
    code = main(["run", str(TRIAGE), "--offline", "--approve", "all", "--trace", str(path)])
    assert code == 0
    return path


def test_an_html_trace_without_jinja2_names_the_render_extra(trace: Path, capsys: object) -> None:
    done = without(["jinja2"], ["trace", str(trace), "-f", "html", "-o", "out.html"])
    assert_hint(done, "rendering HTML needs jinja2: pip install 'helikon[render]'")


def test_a_real_model_without_openai_names_the_openai_extra() -> None:
    done = without(["openai"], ["run", str(TRIAGE)], env={"OPENAI_API_KEY": "sk-none"})
    assert_hint(
        done,
        "a real model needs the openai package: pip install 'helikon[openai]' "
        "(or run with --offline)",
    )


def test_importing_openai_model_without_openai_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "try:\n"
        "    from helikon import OpenAIModel\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout == (
        "ModuleNotFoundError|openai|"
        "OpenAIModel needs the openai package: pip install 'helikon[openai]'\n"
    ), done.stderr
    # The rest of helikon still imports without it.
    code = "import sys; sys.modules['openai'] = None; import helikon; print(helikon.Agent.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, "Agent\n"), done.stderr


def test_a_postgres_store_without_psycopg_names_the_postgres_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import helikon\n"
        "from helikon.durable import StoreError, open_store\n"
        "try:\n"
        "    open_store('postgresql://nobody@127.0.0.1:1/none')\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
        "try:\n"
        "    from helikon.durable import PostgresRunStore\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    hint = "PostgresRunStore needs the psycopg package: pip install 'helikon[postgres]'"
    assert done.stdout == f"{hint}\nModuleNotFoundError|psycopg|{hint}\n", done.stderr


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_a_diagram_without_graphviz_names_the_render_extra(fmt: str, tmp_path: Path) -> None:
    done = without(["graphviz"], ["diagram", "default", "-f", fmt, "-o", str(tmp_path / "d")])
    assert_hint(
        done, "rendering a diagram needs the graphviz package: pip install 'helikon[render]'"
    )


def test_a_diagram_without_dot_says_how_to_install_it(tmp_path: Path) -> None:
    pytest.importorskip("graphviz")
    done = without(
        [],
        ["diagram", "default", "-f", "png", "-o", str(tmp_path / "d")],
        env={"PATH": str(tmp_path)},
    )
    assert_hint(
        done,
        "rendering a diagram needs Graphviz's `dot` executable on PATH "
        "(e.g. apt-get install graphviz, brew install graphviz)",
    )


def test_a_schema_tool_without_jsonschema_names_the_mcp_extra() -> None:
    code = (
        "import sys; sys.modules['jsonschema'] = None\n"
        "from helikon import Tool\n"
        "try:\n"
        "    Tool.from_schema('t', '', {'type': 'object'}, lambda arguments: None)\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout == (
        "ModuleNotFoundError|jsonschema|a tool built from a JSON schema needs the jsonschema "
        "package: pip install 'helikon[mcp]'\n"
    ), done.stderr


def test_helikon_mcp_without_the_mcp_package_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import helikon\n"
        "try:\n"
        "    from helikon.mcp import MCPServer\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout == (
        "ModuleNotFoundError|mcp|helikon.mcp needs the mcp package: pip install 'helikon[mcp]'\n"
    ), done.stderr


def test_temporal_commands_without_temporalio_name_the_temporal_extra() -> None:
    hint = "--temporal needs the temporal extra: pip install 'helikon[temporal]'"
    worker = ["worker", str(TRIAGE), "--temporal", "127.0.0.1:1", "--store", "none"]
    assert_hint(without(["temporalio"], worker), hint)
    run = ["run", str(TRIAGE), "--offline", "--temporal", "127.0.0.1:1", "--store", "none"]
    assert_hint(without(["temporalio"], run), hint)
