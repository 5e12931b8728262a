"""What a regular expression needs in a text before it can match: literal strings it must contain.

The phrase rules (zh_rules.py) are searched over every view of every Chinese text; on a long text
most of them cannot match at all, because a literal they need (a 死, a 滚, one of the values of a
{KILL} slot) is absent. `needs(pattern)` reads the compiled pattern's syntax tree and returns a
conjunction of literal groups: every match contains, as a substring, at least one string of EACH
group. It is a necessary condition only (never "this will match"), so skipping a pattern whose needs
are unmet changes no result; a pattern it cannot reason about (case-insensitive, back-references)
gets no needs and is always searched.

How: a run of consecutive items with a finite language (literals, small character classes, optional
or short repeats of those, alternations of those, zero-width assertions) is expanded to its strings
(at most `LANGUAGE_LIMIT`); an alternation of non-finite branches needs the union of one group per
branch; repeats that may occur zero times need nothing.

Example::

    >>> [sorted(group) for group in needs(re.compile(r"(?:我|老子).{0,8}(?:杀|砍)了?你"))]
    [['我', '老子'], ['杀了你', '杀你', '砍了你', '砍你']]
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Iterable

__all__ = ["LANGUAGE_LIMIT", "needs", "satisfied"]

#: the most strings one finite run expands to (a slot of a few hundred values stays one group)
LANGUAGE_LIMIT = 1024
#: the widest character range expanded into single characters
_RANGE_LIMIT = 64
#: a bounded repeat of a finite item is expanded up to this many copies
_REPEAT_LIMIT = 3

Group = frozenset[str]


def needs(pattern: re.Pattern[str]) -> tuple[Group, ...]:
    """The literal groups every match of `pattern` contains one string of (see the module docstring)."""
    if pattern.flags & re.IGNORECASE:
        return ()
    return tuple(_required(sre_parse.parse(pattern.pattern, pattern.flags)))


def satisfied(groups: tuple[Group, ...], present: set[str]) -> bool:
    """True when every group has a string in `present` (the literals found in the text)."""
    return all(not group.isdisjoint(present) for group in groups)


def _product(left: set[str], right: Iterable[str]) -> set[str] | None:
    right = tuple(right)
    if len(left) * len(right) > LANGUAGE_LIMIT:
        return None
    return {a + b for a in left for b in right}


def _language(items: Any) -> set[str] | None:
    """Every string a sequence of items can match, or None when infinite or too many."""
    result: set[str] | None = {""}
    for op, av in items:
        part = _item_language(op, av)
        if part is None or result is None:
            return None
        result = _product(result, part)
    return result


def _item_language(op: Any, av: Any) -> set[str] | None:
    if op is sre.LITERAL:
        return {chr(av)}
    if op is sre.IN:
        return _charset(av)
    if op is sre.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        return None if add_flags or del_flags else _language(sub)
    if op is sre.ATOMIC_GROUP:
        return _language(av)
    if op is sre.BRANCH:
        union: set[str] = set()
        for branch in av[1]:
            part = _language(branch)
            if part is None:
                return None
            union |= part
        return union if len(union) <= LANGUAGE_LIMIT else None
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, sub = av
        if high > _REPEAT_LIMIT:
            return None
        base = _language(sub)
        if base is None:
            return None
        union, power = set(), {""}
        for count in range(high + 1):
            if count >= low:
                union |= power
            if count < high:
                product = _product(power, base)
                if product is None:
                    return None
                power = product
        return union if len(union) <= LANGUAGE_LIMIT else None
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return {""}  # zero width: consumes nothing
    return None


def _charset(items: Any) -> set[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < _RANGE_LIMIT:
            chars.update(chr(code) for code in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY (\s, \d), a wide range: no finite small set
            return None
    return chars


def _required(items: Any) -> list[Group]:
    """The groups a sequence of items needs: finite runs expanded, other items recursed into."""
    groups: list[Group] = []
    run: set[str] = {""}

    def flush() -> None:
        if "" not in run:
            groups.append(frozenset(run))

    for op, av in items:
        part = _item_language(op, av)
        if part is not None:
            product = _product(run, part)
            if product is not None:
                run = product
                continue
            flush()
            run = part
            continue
        flush()
        run = {""}
        groups.extend(_item_required(op, av))
    flush()
    return groups


def _item_required(op: Any, av: Any) -> list[Group]:
    if op is sre.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        return [] if add_flags or del_flags else _required(sub)
    if op is sre.ATOMIC_GROUP:
        return _required(av)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        return _required(av[2]) if av[0] >= 1 else []
    if op is sre.BRANCH:
        union: set[str] = set()
        for branch in av[1]:
            options = _required(branch)
            if not options:
                return []  # a branch that needs nothing: the alternation needs nothing
            union |= _most_selective(options)
        return [frozenset(union)]
    return []


def _most_selective(groups: list[Group]) -> Group:
    """The group least likely to be present: longest shortest string, then fewest strings."""
    return max(groups, key=lambda g: (min(len(s) for s in g), -len(g)))
