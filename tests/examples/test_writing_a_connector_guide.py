"""docs/writing-a-connector.md stays true to the example it walks through.

* A code block marked ``<!-- snippet: <path> -->`` must appear verbatim in that
  file: the guide quotes the example, it never paraphrases it.
* A block marked ``<!-- run -->`` is executed: it shows API the example does not
  use, so running it is what keeps it correct.
* Every Python block is one or the other, and every ``examples/...`` or
  ``tests/...`` path the guide names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "writing-a-connector.md"
TEXT = GUIDE.read_text()

# An optional marker comment, then a fenced block (maybe indented, in a list):
# (marker, indent, language, body).
BLOCK = re.compile(r"(?:^<!-- (snippet: \S+|run) -->\n)?^( *)```(\w*)\n(.*?)^\2```$",
                   re.M | re.S)
BLOCKS = [(marker, lang, body) for marker, _, lang, body in BLOCK.findall(TEXT)]
SNIPPETS = [(marker.removeprefix("snippet: "), body) for marker, _, body in BLOCKS
            if marker.startswith("snippet: ")]


def test_the_guide_quotes_the_example_a_lot() -> None:
    assert len(SNIPPETS) >= 12, "the snippet markers are not being found"
    files = {path for path, _ in SNIPPETS}
    assert {"examples/http_source/http_source/config.py",
            "examples/http_source/http_source/connector.py",
            "examples/http_source/http_source/task.py",
            "examples/http_source/pyproject.toml",
            "examples/http_source/connect-http-source.json",
            "tests/examples/test_http_source_e2e.py"} <= files


@pytest.mark.parametrize(("path", "body"), SNIPPETS,
                         ids=[f"{i}-{p.rsplit('/', 1)[-1]}" for i, (p, _) in enumerate(SNIPPETS)])
def test_each_snippet_is_in_its_file_verbatim(path: str, body: str) -> None:
    source = (REPO / path).read_text()
    assert body in source, f"the guide's excerpt is not (or no longer) in {path}:\n{body}"


def test_every_python_block_is_a_snippet_or_runs() -> None:
    unmarked = [body for marker, lang, body in BLOCKS if lang == "python" and not marker]
    assert not unmarked, f"mark these blocks <!-- snippet: path --> or <!-- run -->: {unmarked}"


def test_the_run_blocks_run() -> None:
    bodies = [body for marker, _, body in BLOCKS if marker == "run"]
    assert bodies
    for body in bodies:
        exec(compile(body, str(GUIDE), "exec"), {})


def test_every_path_the_guide_names_exists() -> None:
    paths = set(re.findall(r"(?<![\w/])((?:examples|tests|docs|config)/[\w./-]*\w)", TEXT))
    assert "examples/http_source/connect-http-source.json" in paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"the guide names paths that do not exist: {missing}"
