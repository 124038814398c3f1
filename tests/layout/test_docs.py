"""The docs hold together: the README stays short, every relative link (and its ``#anchor``)
lands on a file and a heading that exist, and every command quoted in a shell block parses as
the CLI would parse it. Pure: nothing runs, nothing reaches etcd."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from resource_extend.commands import programs
from resource_extend.commands.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
SHELL = {"", "sh", "bash", "shell", "console"}
"""Fenced blocks whose lines are commands (``text`` blocks hold output, such as error lines)."""
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
COMMAND = re.compile(rf"^({'|'.join(map(re.escape, programs.programs()))})(\s|$)")
PLACEHOLDER = re.compile(r"<[^<>\s]+>|\.\.\.|…")


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def lines(page: Path) -> Iterator[tuple[int, str, str | None]]:
    """Each line with its number and, inside a fenced block, the block's language ("" when
    it has none); None outside one. The fences themselves are left out."""
    fence: str | None = None
    language = ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, language = opened.group(1), opened.group(2).lower()
            continue
        closing = line.strip()
        if fence is not None and closing.startswith(fence) and not closing.strip(fence[0]):
            fence = None
            continue
        yield number, line, None if fence is None else language


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` dropped, spaces to
    ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line, block in lines(page):
        heading = HEADING.match(line) if block is None else None
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def prose(page: Path) -> str:
    """The page outside its fenced blocks: the blocks' lines blanked, so positions keep their
    line numbers (code spans and links may wrap onto the next line)."""
    return "\n".join(line if block is None else "" for _, line, block in lines(page))


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def code_spans(page: Path) -> Iterator[tuple[int, str]]:
    text = prose(page)
    for span in CODE_SPAN.finditer(text):
        yield line_of(text, span.start()), " ".join(span.group(1).split())


def links(page: Path) -> Iterator[tuple[int, str]]:
    """Each link's target, outside code (a span's text blanked, its line breaks kept)."""
    text = CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span.group(0)), prose(page))
    for link in LINK.finditer(text):
        yield line_of(text, link.start()), link.group(1)


def link_problem(page: Path, target: str) -> str | None:
    """What is wrong with a relative link from ``page``, or None."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"{path}: no such file"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"#{anchor}: no such heading in {name(file)}"
    return None


def quoted_commands(page: Path) -> Iterator[tuple[int, str]]:
    """The commands a page quotes: lines of its shell blocks that run a program (after an
    optional ``$ ``), and, in the README, code spans that do. Lines with placeholders
    (``<node>``, ``...``) are left out: they are shapes, not commands."""
    if page == README:
        yield from ((number, span) for number, span in code_spans(page) if COMMAND.match(span))
    pending = ""
    for number, line, block in lines(page):
        if block is None or block not in SHELL:
            continue
        text = (pending + " " + line.strip()).strip() if pending else line.strip()
        if text.endswith("\\"):
            pending = text[:-1]
            continue
        pending = ""
        text = text.removeprefix("$ ")
        if COMMAND.match(text):
            yield number, text


def words(command: str) -> list[str]:
    """The command's own words: comments, pipes and redirections cut off, and the brackets
    of optional parts (``[--json]``) dropped, so that the options inside them are parsed too."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    kept = []
    for token in lexer:
        if token and token[0] in "|&;<>()":
            break
        token = token.replace("[", "").replace("]", "")
        if token:
            kept.append(token)
    return kept


def parse_problem(command: str) -> str | None:
    """Why click would refuse ``command``, or None. Nothing is invoked: the group's options
    are parsed, the subcommand is looked up, and its own arguments parsed."""
    try:
        argv = words(command)
    except ValueError as exc:  # shlex: an unclosed quote
        return str(exc)
    prog, args = argv[0], argv[1:]
    if not args:  # a bare "resource-gpu": the short usage
        return None
    context = click.Context(cli, info_name=prog, obj=programs.programs()[prog])
    try:
        with context:
            rest = click.Command.parse_args(cli, context, args)
            if not rest:  # only the group's options: "--config PATH"
                return None
            verb, command_, sub = cli.resolve_command(context, rest)
            assert verb is not None and command_ is not None
            with command_.make_context(verb, sub, parent=context, resilient_parsing=False):
                pass
    except click.exceptions.Exit:  # --help, --version
        return None
    except click.ClickException as exc:
        return exc.format_message()
    return None


def test_the_readme_is_short() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines (at most {README_MAX_LINES})"


@pytest.mark.parametrize("page", DOCS, ids=name)
def test_each_doc_starts_with_its_title(page: Path) -> None:
    first = page.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# "), f"{name(page)} starts {first!r}, not a title"


@pytest.mark.parametrize("page", DOCS, ids=name)
def test_the_readme_links_every_doc(page: Path) -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(README)}
    assert page.resolve() in linked, f"README.md does not link {name(page)}"


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_relative_link_lands(page: Path) -> None:
    broken = [
        f"{name(page)}:{number}: ({target}) {problem}"
        for number, target in links(page)
        if not SCHEME.match(target)
        for problem in [link_problem(page, target)]
        if problem is not None
    ]
    assert not broken, "\n".join(broken)


SOURCE_PATH = re.compile(r"(?<![\w./-])((?:commands|ledger|projections|tests|scripts)/[\w/-]+\.py)")
"""A source file a page names: ``commands/resident/client.py``."""


@pytest.mark.parametrize("page", [*PAGES, ROOT / "CHANGELOG.md"], ids=name)
def test_every_source_file_a_page_names_exists(page: Path) -> None:
    """Code moves (this project moved its shell into folders): a page must not point at a
    file that is no longer there."""
    named = SOURCE_PATH.findall(page.read_text())
    assert [path for path in named if not (ROOT / path).is_file()] == []


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_quoted_command_parses(page: Path) -> None:
    refused = [
        f"{name(page)}:{number}: {command}: {problem}"
        for number, command in quoted_commands(page)
        if not PLACEHOLDER.search(command)
        for problem in [parse_problem(command)]
        if problem is not None
    ]
    assert not refused, "\n".join(refused)


def test_the_readme_quotes_the_everyday_commands() -> None:
    """The extraction finds what it is meant to (a README with no command found would pass
    the test above for nothing)."""
    quoted = {[*words(command), ""][1] for _, command in quoted_commands(README)}
    everyday = {"history", "show", "nodes", "verify", "export", "compact", "archive", "migrate"}
    everyday |= {"helper", "footprint", "doctor", "exporter", "detect"}
    assert everyday <= quoted, sorted(everyday - quoted)


@pytest.mark.parametrize(
    ("command", "wrong"),
    [
        ("resource-gpu nodes --jsn", "--jsn"),
        ("resource-gpu footprint --top N", "N"),
        ("resource-gpu no-such-command", "no-such-command"),
        ("resource-storage detect", "detect"),  # resource-gpu's alone
        ("resource-gpu add-node --bogus", "--bogus"),
    ],
)
def test_a_wrong_command_is_caught(command: str, wrong: str) -> None:
    problem = parse_problem(command)
    assert problem is not None and wrong in problem, problem


def test_the_slug_rule() -> None:
    assert slug("Finding a node's GPUs: `resource-gpu detect`") == (
        "finding-a-nodes-gpus-resource-gpu-detect"
    )
    assert slug("Upgrading from 0.1") == "upgrading-from-01"
    assert slug("With `resident: false`") == "with-resident-false"
