"""References to minors (what makes sexual content `sexual/minors`): ages under 18 as people write them,
school years, words naming a minor; adults' ages, sizes, times, ratings, prices, counts and the
disclaimers of adult platforms are not references."""

from __future__ import annotations

import pytest

from services.text.minors import minor_references


@pytest.mark.parametrize(("text", "found"), [
    ("she is 14 and wants it", ["14"]), ("hey 13f here, dm me", ["13"]), ("(14F) bored", ["14"]),
    ("M15 looking to chat", ["15"]), ("14/f/usa", ["14"]), ("asl? 13/f", ["13"]), ("f/14 here", ["14"]),
    ("send pics, i know youre only 15", ["15"]), ("my 15 year old son", ["15"]), ("a 12-year-old girl", ["12"]),
    ("she's 16yo", ["16"]), ("he is 9 y/o", ["9"]), ("14 y.o. girl", ["14"]), ("fourteen years old", ["fourteen"]),
    ("aged 12", ["12"]), ("age:14", ["14"]), ("she just turned 14", ["14"]), ("barely 13", ["13"]),
    ("not even 15 yet", ["15"]), ("I was in 7th grade", ["7th grade"]), ("she's in grade 8", ["grade 8"]),
    ("a year 9 student", ["year 9 student"]), ("a middle schooler", ["middle schooler"]),
    ("still in middle school", ["in middle school"]), ("underage girls", ["underage"]), ("jailbait", ["jailbait"]),
    ("she’s 14", ["14"]), ("shes 14", ["14"]), ("she is 12, so hot", ["12"]), ("she is 17.", ["17"]),
    ("im 13 wanna sext", ["13"]), ("i am 15, send nudes", ["15"]), ("ur 14?", ["14"]), ("you're 13", ["13"]),
    ("她才14岁", ["14岁"]), ("十四岁的", ["十四岁"]), ("找初中生", ["初中生"]), ("未成年也可以", ["未成年"]),
])
def test_references_to_minors_are_found_with_their_span(text: str, found: list[str]) -> None:
    assert [text[a:b] for a, b in minor_references(text)] == found


@pytest.mark.parametrize(("text", "found"), [
    ("undеrage", ["undеrage"]),        # a Cyrillic е: found as the normaliser reads it, cited as sent
    ("she's １４ and", ["１４"]),       # full-width digits
    ("she is 1 4 and", []),           # two numbers, not an age
])
def test_evasions_the_normaliser_undoes_are_found_at_their_offsets_as_sent(text: str, found: list[str]) -> None:
    assert [text[a:b] for a, b in minor_references(text)] == found


@pytest.mark.parametrize("text", [
    "a 25 year old woman", "she is 19", "he is 6 feet tall", "meet at 5pm", "i have 14 dollars", "ages 18+ only",
    "she is 12:30 late", "a 30f from leeds", "only 3 minutes left", "version 14.2 is out", "room 14 please",
    "my wife and I, both 34", "only 5 inches", "just 3 more inches", "just 2 girls", "just 4.99/month",
    "only 9.99 for my nudes", "I'm 8 inches", "I'm 6 foot", "I'm 5 minutes away", "I'm 1 of a kind",
    "1m followers on my OF", "5m away", "press F5", "F1 fan", "M3 owner", "she's 5'4", "she's 10/10", "he's 8 inch",
    "she was 1 of the best", "18+ only, no minors", "minors DNI", "a minor kink", "divorced, 2 kids, looking for NSA",
    "MILF with 3 kids", "child-free couple", "schoolgirl costume", "middle school teacher", "top 10",
    "no underage please", "married 14 years", "im 2 drinks in", "she's 9 months pregnant", "he was 10 minutes late",
    "im 18", "we've got 14 days", "十八岁", "二十岁的大学生",
])
def test_adults_sizes_times_ratings_prices_counts_and_disclaimers_are_not_references(text: str) -> None:
    assert minor_references(text) == []


def test_spans_are_sorted_and_never_overlap() -> None:
    text = "a 14 year old jailbait and a 13f toddler"
    spans = minor_references(text)
    assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert [text[a:b] for a, b in spans] == ["14", "jailbait", "13", "toddler"]


@pytest.mark.parametrize(("text", "found"), [
    ("my daughter is 12", ["12"]), ("she's under 16", ["16"]), ("14 year olds", ["14"]), ("16f4m", ["16"]),
    ("a sophomore in high school", ["sophomore in high school"]), ("十四五岁的", ["十四五岁"]), ("14周岁", ["14周岁"]),
    ("未满18岁", ["未满18岁"]), ("找个中学生", ["中学生"]),
])
def test_more_ways_to_state_a_minors_age(text: str, found: list[str]) -> None:
    assert [text[a:b] for a, b in minor_references(text)] == found


@pytest.mark.parametrize("text", [
    "she's 10 years younger than me", "he's 12 years my senior", "im 14 years clean", "he's 8 and a half inches",
    "he's 6-4 and hung", "she's 5-2 and tiny", "he lasted barely 5 seconds", "he's 8 thick", "i'm 3 for 3",
    "DNI if you're 13-17", "if ur 16 dont interact", "18+ only. If you're 17 or under, leave now",
    "minors DNI, if you are 15 or younger leave", "not for anyone aged 13-17", "no one under 16", "grade 5 titanium",
])
def test_measurements_ranges_and_disclaimers_are_not_references(text: str) -> None:
    assert minor_references(text) == []
