"""Every repository path the documentation names exists.

Scanned: the code of README.md, docs/**/*.md and bench/README.md (inline `code` spans and fenced
code blocks) and the comments of config/**/*.yaml. A path is a token that starts with one of the
repository's top-level folders (`services/`, `tests/`, `bench/`, ...) or is a top-level file
(`Makefile`, `README.md`, `docker-compose.yml`, ...). A `:NN` line suffix or a `::test_name` ends
the path; `{a,b}` is expanded; `*` and `<placeholder>` are glob patterns that must match at least one
file. Generated paths (the model repository, the gRPC stubs, `var/`, the virtual environments) are
not checked. Relative Markdown links must resolve too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]

TOP_FOLDERS = ("services", "tests", "bench", "config", "docs", "protos", "ebpf", "auditmesh", "docker",
               "dashboards", "deploy", ".ci")
TOP_FILES = r"Makefile|README\.md|docker-compose\.yml|pyproject\.toml|requirements[\w-]*\.txt"
GENERATED = ("model_repository", "services/common/gen", "var/", ".venv")

# A path starts where no path character precedes it (so `bin/python` in `.venv/bin/python` or a URL's
# tail never counts) and runs over path characters; `{a,b}` groups may hold commas.
_PATH_CHARS = r"(?:\{[\w.,*-]+\}|[\w.*/<>\-])"
PATH_PATTERN = re.compile(
    r"(?<![\w./<>{}-])(?:(?:" + "|".join(re.escape(f) for f in TOP_FOLDERS) + r")/" + _PATH_CHARS + r"*"
    r"|(?:" + TOP_FILES + r")(?![\w/-]))")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK_PATTERN = re.compile(r"\]\(([^)\s]+)\)")
BRACES = re.compile(r"\{([^{}]*)\}")
PLACEHOLDER = re.compile(r"<[^<>/]*>")


@dataclass(frozen=True)
class Named:
    """One path as a document writes it, and where."""

    source: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.text}"


def documents() -> list[Path]:
    """The Markdown files scanned."""
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def config_files() -> list[Path]:
    return sorted((ROOT / "config").rglob("*.yaml"))


def yaml_comment(line: str) -> str:
    """The comment part of one YAML line (a `#` that starts the line or follows a space), or ""."""
    match = re.search(r"(?:^|\s)#(.*)$", line)
    return match.group(1) if match else ""


def markdown_code(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, code) for each fenced code block line and each inline code span.

    Example::

        >>> list(markdown_code(["a `b` c `d`", "```sh", "make run", "```"]))
        [(1, 'b'), (1, 'd'), (3, 'make run')]
    """
    fenced = False
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            yield number, line
        else:
            for _, span in INLINE_CODE.findall(line):
                yield number, span


def scanned_lines() -> Iterator[tuple[str, int, str]]:
    """(file relative to the root, line number, text to scan) for every scanned line."""
    for path in documents():
        for number, code in markdown_code(path.read_text(encoding="utf-8").splitlines()):
            yield str(path.relative_to(ROOT)), number, code
    for path in config_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            comment = yaml_comment(line)
            if comment:
                yield str(path.relative_to(ROOT)), number, comment


def paths_in(text: str) -> list[str]:
    """The repository paths a line names, cleaned of trailing punctuation.

    Example::

        >>> paths_in("see `services/router/fusion.py:12` and tests/unit/router/test_fusion.py::test_x.")
        ['services/router/fusion.py', 'tests/unit/router/test_fusion.py']
    """
    found = []
    for match in PATH_PATTERN.finditer(text):
        path = match.group(0).rstrip(".-")
        if "..." in match.group(0) or not path:
            continue
        found.append(path)
    return found


def expand(path: str) -> list[str]:
    """`config/{text,vision}.yaml` -> both paths; `<name>` placeholders become `*`."""
    match = BRACES.search(path)
    if match is None:
        return [PLACEHOLDER.sub("*", path)]
    head, tail = path[:match.start()], path[match.end():]
    return [expanded for choice in match.group(1).split(",") for expanded in expand(head + choice + tail)]


def exists(path: str) -> bool:
    if "*" in path:
        return next(iter(ROOT.glob(path.rstrip("/"))), None) is not None
    return (ROOT / path).exists()


def generated(path: str) -> bool:
    return any(path == prefix.rstrip("/") or path.startswith(prefix) for prefix in GENERATED)


def named_paths() -> list[Named]:
    return [Named(source, number, path) for source, number, line in scanned_lines() for path in paths_in(line)]


def test_the_scanner_reads_paths_the_way_documents_write_them() -> None:
    assert paths_in("`services/router/fusion.py:49-50`, `tests/unit/x.py::test_y`") == [
        "services/router/fusion.py", "tests/unit/x.py"]
    assert paths_in("run .venv/bin/python -m bench.quality (docker-compose.yml's cpu_shares)") == [
        "docker-compose.yml"]
    assert paths_in("http://example.com/docs/x.md and bench/README.md.") == ["bench/README.md"]
    assert expand("config/{text,vision}.yaml") == ["config/text.yaml", "config/vision.yaml"]
    assert expand("config/policies/<name>.yaml") == ["config/policies/*.yaml"]
    assert yaml_comment("  listen: 127.0.0.1:8100  # see services/router/lanes.py") == " see services/router/lanes.py"
    assert yaml_comment('  pattern: "a#b"') == ""
    # The scan is not vacuous: the documents name many paths.
    assert len(named_paths()) > 100


def test_every_path_the_documents_name_exists() -> None:
    missing = [f"{named} ({candidate})" if candidate != named.text else str(named)
               for named in named_paths() if not generated(named.text)
               for candidate in expand(named.text) if not generated(candidate) and not exists(candidate)]
    assert not missing, f"{len(missing)} paths named in the docs do not exist:\n" + "\n".join(missing)


def test_every_relative_markdown_link_resolves() -> None:
    broken = []
    for path in documents():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for target in LINK_PATTERN.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                file_part = target.split("#", 1)[0]
                if not (path.parent / file_part).resolve().exists():
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, f"{len(broken)} relative links do not resolve:\n" + "\n".join(broken)
