"""The examples of README.md and docs/*.md, found by their markers (pure parsing).

The convention is docs/writing-docs.md's. A fenced block may follow marker
comments, one per line, directly above its opening fence:

* ``<!-- example: <scenario> [key=value ...] -->``: the block runs, as written,
  in ``tests/e2e/test_docs_examples.py``. Blocks of one file sharing a scenario
  name run in document order as one example.
* ``<!-- fragment: <why> -->``: the block is not meant to run as it stands
  (a placeholder class, infrastructure the test suite does not have).
* ``<!-- snippet: <path> -->`` and ``<!-- run -->``: docs/writing-a-connector.md's
  own markers (``tests/examples/test_writing_a_connector_guide.py``).

Nothing here starts a process; the test module interprets the blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The languages an example block may have, and the options each one takes:
# ``topics`` lists topics that must receive records; ``status`` is the HTTP status
# every curl call of the block answers (default: any below 400); ``output`` names
# the topic whose records the block's JSON lines show; ``file=<path>`` makes the
# block that file's content; ``worker`` makes it keys of the worker's config.
EXAMPLE_OPTIONS: dict[str, frozenset[str]] = {
    "bash": frozenset({"topics", "status"}),
    "sql": frozenset(),
    "json": frozenset({"output"}),
    "properties": frozenset({"worker", "file"}),
    "": frozenset({"file"}),
}

_MARKER = re.compile(r"^ *<!-- (.*?) -->\n", re.M)
# Marker lines, then a fence (maybe indented, in a list): (markers, indent, lang, body).
_BLOCK = re.compile(r"((?:^ *<!-- .*? -->\n)*)^( *)```(\w*)[^\n]*\n(.*?)^\2```[ \t]*$",
                    re.M | re.S)


@dataclass(frozen=True)
class Example:
    """An ``example:`` marker: the scenario's name and the block's options."""

    scenario: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and its markers."""

    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    markers: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def example(self) -> Example | None:
        """The block's ``example:`` marker; ValueError if it is malformed."""
        for marker in self.markers:
            if marker.startswith("example:"):
                words = marker.removeprefix("example:").split()
                if not words or "=" in words[0]:
                    raise ValueError(f"{self.where}: '<!-- {marker} -->' names no scenario")
                options = {}
                for word in words[1:]:  # key=value, or a flag (value "")
                    key, eq, value = word.partition("=")
                    if eq and not value:
                        raise ValueError(f"{self.where}: option {word!r} of '<!-- {marker} -->'"
                                         " has no value")
                    options[key] = value
                allowed = EXAMPLE_OPTIONS.get(self.lang)
                if allowed is None:
                    raise ValueError(f"{self.where}: a ```{self.lang} block cannot be an "
                                     f"example (only {', '.join(EXAMPLE_OPTIONS)})")
                unknown = sorted(set(options) - allowed)
                if unknown:
                    raise ValueError(f"{self.where}: unknown option(s) {unknown} for a "
                                     f"```{self.lang} example (known: {sorted(allowed)})")
                _check_options(self, options)
                return Example(words[0], options)
        return None

    @property
    def fragment(self) -> str | None:
        """Why the block does not run, if it is marked ``fragment:``."""
        for marker in self.markers:
            if marker.startswith("fragment:"):
                return marker.removeprefix("fragment:").strip()
        return None

    @property
    def snippet(self) -> bool:
        return any(m.startswith("snippet:") for m in self.markers)

    def calls_the_rest_api(self) -> bool:
        """Whether the block looks like an example a user would run against a worker:
        a shell block calling ``/connectors`` with curl, or a connector config."""
        if self.lang in ("bash", "sh", "shell", "console", ""):
            return "curl" in self.body and "/connectors" in self.body
        if self.lang == "json":
            return '"connector.class"' in self.body
        return False


def _check_options(block: Block, options: dict[str, str]) -> None:
    """ValueError naming the block if its options do not say what it is for."""
    problem = None
    if block.lang == "json" and not options.get("output"):
        problem = "a ```json example shows records: say of which topic with output=<topic>"
    elif block.lang in ("properties", "") and ("worker" in options) == ("file" in options):
        problem = "say what the block is: worker (keys of the worker config) or file=<path>"
    elif options.get("worker"):
        problem = "worker takes no value"
    elif "file" in options and not options["file"].startswith("/"):
        problem = "file=<path> needs an absolute path, as the docs write them"
    elif "status" in options and not options["status"].isdigit():
        problem = "status=<HTTP status> takes a number"
    elif "topics" in options and not options["topics"]:
        problem = "topics=<topic,...> names topics"
    if problem is not None:
        raise ValueError(f"{block.where}: {problem}")


def doc_files(repo: Path = REPO) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def blocks_of(path: Path, repo: Path = REPO) -> list[Block]:
    text = path.read_text()
    found = []
    for m in _BLOCK.finditer(text):
        markers, _, lang, body = m.groups()
        line = text.count("\n", 0, m.start(2)) + 1
        found.append(Block(str(path.relative_to(repo)), line, lang, body,
                           tuple(_MARKER.findall(markers))))
    return found


def all_blocks(repo: Path = REPO) -> list[Block]:
    return [block for path in doc_files(repo) for block in blocks_of(path, repo)]


def scenarios(blocks: list[Block]) -> dict[str, list[Block]]:
    """The examples by scenario name, their blocks in document order. ValueError if a
    marker is malformed or a scenario spans files."""
    out: dict[str, list[Block]] = {}
    for block in blocks:
        example = block.example
        if example is None:
            continue
        group = out.setdefault(example.scenario, [])
        if group and group[0].path != block.path:
            raise ValueError(f"{block.where}: scenario {example.scenario!r} is already used "
                             f"in {group[0].path}; a scenario lives in one file")
        group.append(block)
    return out


@dataclass(frozen=True)
class Command:
    """One command of a shell block: its text as written (continuations joined),
    whether it ends with ``&`` (runs in the background), and its line."""

    text: str
    background: bool
    line: int


def shell_commands(body: str, first_line: int = 1) -> list[Command]:
    """Split a shell block into commands the way bash reads them: a newline ends a
    command unless it is quoted or escaped, ``#`` outside quotes starts a comment,
    and a trailing ``&`` sends the command to the background."""
    commands: list[Command] = []
    current: list[str] = []
    quote: str | None = None
    line, start = first_line, first_line
    i = 0

    def end() -> None:
        text = "".join(current).strip()
        current.clear()
        if text:
            background = text.endswith("&") and not text.endswith("&&")
            commands.append(Command(text.removesuffix("&").strip() if background else text,
                                    background, start))

    while i < len(body):
        c = body[i]
        if quote is None and c == "\\" and body[i + 1:i + 2] == "\n":
            current.append(" ")
            i += 2
            line += 1
            continue
        if quote is None and c == "#" and (not current or current[-1].isspace()):
            while i < len(body) and body[i] != "\n":
                i += 1
            continue
        if c == "\n":
            line += 1
            if quote is None:
                end()
                start = line
                i += 1
                continue
        if c in "'\"" and (quote is None or quote == c):
            quote = None if quote == c else c
        elif c == "\\" and quote == '"':
            current.append(c)
            i += 1
            c = body[i]
        current.append(c)
        i += 1
    if quote is not None:
        raise ValueError(f"unterminated {quote} quote in the command at line {start}")
    end()
    return commands
