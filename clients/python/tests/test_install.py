"""The package as a user installs it: the README's example, run by the client environment's Python in isolated
mode (-I) from an empty folder, so that only the installed copy can be imported, against `make run`.

AGENT_MEMORY_CLIENT_PYTHON names another interpreter (a fresh virtual environment with the package installed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
PYTHON = os.environ.get("AGENT_MEMORY_CLIENT_PYTHON", sys.executable)


def readme_blocks() -> tuple[str, str]:
    """The README's example and the output it documents."""
    text = (PACKAGE / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    printed = re.search(r"It prints:\n\n```\n(.*?)```", text, re.S)
    assert code and printed
    return code.group(1), printed.group(1)


def run(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_"))}
    return subprocess.run(
        [PYTHON, "-I", "-c", code], cwd=cwd, env=clean | env, capture_output=True, text=True, timeout=120
    )


def test_the_installed_package_is_what_runs(tmp_path: Path) -> None:
    where = run("import agent_memory_client; print(agent_memory_client.__file__)", tmp_path)
    assert where.returncode == 0, where.stderr
    assert "site-packages" in where.stdout and str(PACKAGE / "src") not in where.stdout


def test_the_readme_example(tmp_path: Path, server_url: str, app_name: str) -> None:
    code, expected = readme_blocks()
    # Each test has an app of its own; the example's names it "travel-agent".
    result = run(code.replace('"travel-agent"', repr(app_name)), tmp_path, AGENT_MEMORY_URL=server_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected


@pytest.mark.parametrize("name", ["Client", "AsyncClient"])
def test_the_installed_copy_is_current(tmp_path: Path, name: str) -> None:
    # A stale installation (make did not reinstall) would pass the README yet miss methods.
    source = (PACKAGE / "src" / "agent_memory_client" / "client.py").read_text()
    methods = sorted(set(re.findall(r"\n    (?:async )?def ([a-z]\w*)\(", source)))
    probe = f"import agent_memory_client as m; print(sorted(n for n in dir(m.{name}) if not n.startswith('_')))"
    result = run(probe, tmp_path)
    assert result.returncode == 0, result.stderr
    missing = set(methods) - set(eval(result.stdout))
    assert not missing, f"the installed package lacks {sorted(missing)}: reinstall it (make .venv-client/.installed)"


def test_the_projects_readme_plain_python_example(tmp_path: Path, server_url: str, app_name: str) -> None:
    # The project README's "Plain Python" block, as written, then what it left behind.
    text = (PACKAGE.parents[1] / "README.md").read_text()
    block = re.search(r"\*\*Plain Python\*\*.*?```python\n(.*?)```", text, re.S)
    assert block
    code = block.group(1).replace("http://127.0.0.1:3000", server_url).replace('"travel-agent"', repr(app_name))
    code += "    print(result.version, [m['role'] for m in context.messages], [h.text for h in hits])\n"
    result = run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1 ['user'] [\"I'd like a quiet hotel in Porto\"]\n"


def _readme_block(title: str, server_url: str, app_name: str, old_app: str) -> str:
    text = (PACKAGE.parents[1] / "README.md").read_text()
    block = re.search(rf"\*\*{re.escape(title)}\*\*.*?```python\n(.*?)```", text, re.S)
    assert block, f"the README has no {title} block"
    return block.group(1).replace("http://127.0.0.1:3000", server_url).replace(f'"{old_app}"', repr(app_name))


def test_the_projects_readme_adk_example(tmp_path: Path, server_url: str, app_name: str) -> None:
    # The "Google ADK" block, as written (a whole program: no name left undefined), then one turn of its runner
    # with a scripted model in place of the real one, through the services it built.
    code = _readme_block("Google ADK", server_url, app_name, "travel-agent")
    code += f"""
import sys
sys.path.insert(0, {str(PACKAGE / "examples")!r})
import asyncio, adk_agent
from google.genai import types
agent.model = adk_agent.ScriptedModel(script=[types.Part(text="Lisbon it is.")])
session = asyncio.run(runner.session_service.create_session(app_name={app_name!r}, user_id="ana"))
message = types.Content(role="user", parts=[types.Part(text="Plan a trip")])
events = list(runner.run(user_id="ana", session_id=session.id, new_message=message))
print([p.text for e in events if e.content for p in e.content.parts or []])
"""
    result = run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['Lisbon it is.']\n"


def test_the_projects_readme_langgraph_example(tmp_path: Path, server_url: str, app_name: str) -> None:
    # The "LangGraph / LangChain" block, as written, prints the thread's messages as its comment says.
    code = _readme_block("LangGraph / LangChain", server_url, app_name, "my-app")
    result = run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['hi', 'You said: hi']\n"
