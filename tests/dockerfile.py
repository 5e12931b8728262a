"""Render a multi-stage Dockerfile for one build target and its build args, as `docker build` would.

There is no Docker engine in CI, so tests/unit/test_compose.py reads what an image would hold from
the file itself. Only what docker/Dockerfile uses is understood: `FROM <image|stage> AS <name>`,
`ARG NAME[=default]`, `ENV k=v ...`, `RUN`, `EXPOSE`, `HEALTHCHECK [--opt=...] CMD ...` and `CMD`,
with `\\` line continuations and `${NAME}` / `$NAME` substitution. An unknown instruction or an
unset variable raises, so a recipe this reader cannot follow fails the test instead of passing it.

Substitution follows Docker: ARG values exist only at build time, in the stage that declares them
(ENV, EXPOSE and RUN see them); a shell-form CMD or HEALTHCHECK runs later and sees only ENV. A
shell form's leading `exec` is dropped, so both forms render to the argv the container runs.

Example::

    >>> image = render_image('''
    ... FROM python:3.11-slim AS base
    ... ENV A=1
    ... FROM base AS app
    ... ARG PORT
    ... ENV PORT=${PORT}
    ... EXPOSE ${PORT}
    ... CMD exec serve --port "${PORT}"
    ... ''', target="app", args={"PORT": "80"})
    >>> image.env, image.expose, image.cmd
    ({'A': '1', 'PORT': '80'}, ['80'], ['serve', '--port', '80'])
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Mapping

_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_STAGE = re.compile(r"^(\S+)\s+AS\s+(\S+)$", re.IGNORECASE)
_IGNORED = {"WORKDIR", "COPY", "STOPSIGNAL", "LABEL", "USER"}


@dataclass
class Image:
    """What the rendered target holds: run-time environment, build steps, ports, probe and command."""

    env: dict[str, str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    expose: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, argument) per instruction, continuations joined, comments and blank lines dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        keyword, _, argument = (pending + line).partition(" ")
        out.append((keyword.upper(), argument.strip()))
        pending = ""
    return out


def _substitute(text: str, variables: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise KeyError(f"${name} is not set where {text!r} reads it")
        return variables[name]
    return _VARIABLE.sub(value, text)


def _command(argument: str, env: Mapping[str, str]) -> list[str]:
    if argument.startswith("["):  # exec form: Docker substitutes nothing
        return [str(part) for part in json.loads(argument)]
    argv = shlex.split(_substitute(argument, env))
    return argv[1:] if argv[:1] == ["exec"] else argv


def _stages(text: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    stages: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    body: list[tuple[str, str]] = []
    for keyword, argument in _instructions(text):
        if keyword == "FROM":
            match = _STAGE.match(argument)
            if match is None:
                raise ValueError(f"FROM {argument}: every stage needs a name (FROM <image> AS <name>)")
            body = []
            stages[match.group(2)] = (match.group(1), body)
        else:
            body.append((keyword, argument))
    return stages


def render_image(text: str, *, target: str, args: Mapping[str, str]) -> Image:
    """Render Dockerfile `text` for `target` with build `args` (a missing stage or variable raises)."""
    stages = _stages(text)
    chain: list[list[tuple[str, str]]] = []
    name = target
    while name in stages:
        name, body = stages[name]
        chain.insert(0, body)
    if not chain:
        raise KeyError(f"no stage named {target!r} (stages: {sorted(stages)})")
    image = Image()
    for body in chain:
        build_vars: dict[str, str] = {}  # an ARG lives in the stage that declares it
        for keyword, argument in body:
            visible = {**build_vars, **image.env}
            if keyword == "ARG":
                key, has_default, default = argument.partition("=")
                if key in args or has_default:
                    build_vars[key] = args.get(key, default)
            elif keyword == "ENV":
                for pair in shlex.split(_substitute(argument, visible)):
                    key, _, value = pair.partition("=")
                    image.env[key] = value
            elif keyword == "RUN":
                image.runs.append(_substitute(argument, visible))
            elif keyword == "EXPOSE":
                image.expose = _substitute(argument, visible).split()
            elif keyword == "HEALTHCHECK":
                _options, _, probe = argument.partition("CMD ")
                image.healthcheck = _command(probe.strip(), image.env)
            elif keyword == "CMD":
                image.cmd = _command(argument, image.env)
            elif keyword not in _IGNORED:
                raise ValueError(f"{keyword} {argument}: an instruction this reader does not follow")
    return image
