"""Tests for services/text/context.py and its data file: every rule and every context entry has a
positive and a negative case, plus the structural conditions and the loader's validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.contracts.text import LexiconHit
from services.common.text_match.lexicon import Lexicon
from services.common.text_match.normalize import normalize
from services.text.context import ContextEngine, ContextResult, sentence_spans
from services.text.context_rules import load_context_rules
from services.text.segment import segment

RULES = load_context_rules()
ENGINE = ContextEngine(RULES)
LEXICON = Lexicon.load()


def analyse(text: str) -> ContextResult:
    seen = segment(normalize(text))
    return ENGINE.analyse(seen, LEXICON.find(seen))


def sources(text: str) -> set[str]:
    return {h.source for h in analyse(text).hits}


def rule_hits(text: str) -> set[str]:
    return {h.source.removeprefix("rule:") for h in analyse(text).hits if h.source.startswith("rule:")}


# rule id -> (texts where it fires, texts where it must not)
RULE_CASES = {
    "threat_first_person": (["I'm going to kill you tonight", "i will find you and hurt you"],
                            ["I would never hurt you", "I'm going to kill you in the next round of the game",
                             "he said 'i will kill you' in the film"]),
    "threat_you_dead": (["you're dead tonight", "I know where you live"],
                        ["you are not dead, just tired", "in the game you will die a lot"]),
    "threat_injury_outcome": (["Keep talking and you'll be eating through a straw.",
                               "Hand in your notice, or we'll make sure you leave on a stretcher.",
                               "one more word and they'll be identifying you by your dental records"],
                              ["I'm not saying you'll need dental records, relax",
                               "in the game you leave on a stretcher after every boss fight",
                               "my dentist keeps your dental records for ten years",
                               "after the surgery you'll be drinking through a straw for a week"]),
    "incite_harm_person": (["someone should shoot that guy", "let's beat them up"],
                           ["someone should shoot a photo of the sunset", "we should kill the process"]),
    "insult_you": (["you are such an idiot", "youareanidiot", "shut up you pathetic scumbag"],
                   ["you are not an idiot", "calling me an 'idiot' is not ok", "I'm such an idiot"]),
    "curse_at_you": (["fuck you 哈哈", "Fuck you, idiot!", "go f u c k yourself", "screw you guys"],
                     ["I want to fuck you so hard", "im gonna fuck you up", "Let a real man fuck you.",
                      "he said fuck you to me", "let me bend you over and fuck you from behind", "oh fuck off, it's snowing in April"]),
    "insult_you_adjective": (["you are so stupid", "u r dumb"],
                             ["you are not stupid at all", "you are so kind"]),
    "self_harm_incitement": (["just kill yourself", "kys", "go jump off a bridge"],
                             ["he told me to kill myself and I reported him", "kill the lights yourself"]),
    "group_dehumanised": (["immigrants are vermin", "Jews are a disease"],
                          ["saying immigrants are vermin is disgusting", "immigrants are not vermin"]),
}


def test_every_rule_has_cases() -> None:
    assert set(RULE_CASES) == {rule.id for rule in RULES.rules}


@pytest.mark.parametrize("rule,text", [(r, t) for r, (pos, _) in RULE_CASES.items() for t in pos])
def test_rule_fires(rule: str, text: str) -> None:
    assert rule in rule_hits(text)


@pytest.mark.parametrize("rule,text", [(r, t) for r, (_, neg) in RULE_CASES.items() for t in neg])
def test_rule_does_not_fire(rule: str, text: str) -> None:
    assert rule not in rule_hits(text)


# allow-context id -> (benign text whose lexicon hit is dropped, text where the same word still counts)
ALLOW_CASES = {
    "cum_laude": ("she graduated magna cum laude", "cum on me"),
    "moby_dick": ("I finally read Moby Dick", "what a dick"),
    "spotted_dick": ("spotted dick with custard", "suck my dick"),
    "pussy_willow": ("the pussy willow is flowering", "nice pussy"),
    "wild_ass": ("we rode an ass up the mountain path", "kiss my ass"),
    "cock_bird": ("the cock crowed at dawn", "suck my cock"),
    "tit_bird": ("blue tits and coal tits visit our bird feeder", "she has great tits"),
    "nude_colour": ("I bought nude heels", "nude photos of her"),
    "anal_retentive": ("he is so anal-retentive about his desk", "anal videos"),
    "rape_support": ("call the rape crisis line", "i will rape her"),
    "shoot_you_message": ("I will shoot you an email tomorrow", "I will shoot you"),
    "sex_education": ("sex education starts in year six", "gay sex videos"),
    "bastard_sword": ("he swung a bastard sword", "you bastard"),
    "faggot_dish": ("Grandma's faggots and mash are the best Sunday dinner.", "you're a faggot"),
}


def test_every_allow_context_entry_has_cases() -> None:
    assert set(ALLOW_CASES) == {entry.id for entry in RULES.allow_context}


@pytest.mark.parametrize("entry,text", [(e, benign) for e, (benign, _) in ALLOW_CASES.items()])
def test_allow_context_drops_the_hit(entry: str, text: str) -> None:
    result = analyse(text)
    assert f"allow:{entry}" in {reason for _, reason in result.dropped}
    assert not [h for h in result.hits if not h.source.startswith("rule:")]


@pytest.mark.parametrize("entry,text", [(e, harmful) for e, (_, harmful) in ALLOW_CASES.items()])
def test_allow_context_keeps_the_word_elsewhere(entry: str, text: str) -> None:
    assert analyse(text).hits, text


def test_how_to_kill_needs_a_person_target() -> None:
    assert not analyse("how to kill the tmux session").hits
    assert ("how to kill", "no_target:how_to_harm") in analyse("how to kill a process in linux").dropped
    assert {h.term for h in analyse("how to kill my neighbour without getting caught").hits} >= {"how to kill"}


def test_harm_you_phrase_does_not_count_in_a_game_or_negated() -> None:
    assert not [h for h in analyse("I'll kill you in the next round, noob").hits if h.category == "violence"]
    assert not [h for h in analyse("I would never kill you").hits if h.category == "violence"]
    assert [h for h in analyse("I will kill you").hits if h.category == "violence"]


def test_ambiguous_tier_is_review_only_and_others_are_not() -> None:
    [dick] = [h for h in analyse("what a dick").hits if h.term == "dick"]
    assert dick.max_action == "review" and dick.to_json()["max_action"] == "review"
    [fuck] = [h for h in analyse("fuck this").hits if h.term == "fuck"]
    assert fuck.max_action is None and "max_action" not in fuck.to_json()


def test_quoted_and_mentioned_slurs_are_dropped_but_used_ones_count() -> None:
    assert not analyse("the word 'retard' is offensive and we shouldn't use it").hits
    assert ("retard", "quoted") in analyse('he wrote "retard" on the board').dropped
    assert [h for h in analyse("you retard").hits if h.term == "retard"]


def test_profanity_aimed_at_someone_is_left_to_the_heads() -> None:
    # Swearing at nobody stays a profanity hit; in a sentence that speaks to someone it is an insult,
    # which the harassment head judges (the category_unless entry), so the profanity hit is dropped.
    assert [h for h in analyse("this fucking printer again").hits if h.category == "profanity"]
    assert [h for h in analyse("shit, I missed the bus. see you later").hits if h.category == "profanity"]
    assert ("fucking", "profanity:addressed") in analyse("shut up, you fucking clown").dropped
    assert not [h for h in analyse("@sam what the fuck is wrong with you").hits if h.category == "profanity"]
    # Only the sentence of the hit counts, and only the profanity category.
    assert [h for h in analyse("See you soon. This fucking train is late").hits if h.category == "profanity"]
    assert [h for h in analyse("you retard").hits if h.category != "profanity"]


def test_rule_hits_point_at_the_original_text() -> None:
    text = "ｙｏｕ are such an 1d10t"
    [hit] = [h for h in analyse(text).hits if h.source == "rule:insult_you"]
    assert isinstance(hit, LexiconHit) and text[hit.start:hit.end] == hit.text == "ｙｏｕ are such an 1d10t"


def test_target_flags() -> None:
    assert analyse("you are late").flags.target
    assert analyse("Immigrants arrived in the port").flags.group
    assert analyse("Alex is late again").flags.named_person
    assert not analyse("this printer is so slow").flags.target


def test_sentence_spans() -> None:
    assert sentence_spans("hi. you there") == [(0, 2), (4, 13)]


#: (text in the shipped rule file, what replaces it, the error the loader must give)
BROKEN_FILES = [
    ("unless: [negated, quoted, mention, game]", "unless: [sometimes]", r"rules\.yaml: rules\.threat_first_person\.unless"),
    ("{first_person}", "{nobody_class}", "unknown class"),
    ("format: auditmesh-context-rules/1", "format: other", "format"),
    ("  profanity: [addressed]", "  rudeness: [addressed]", r"rules\.yaml: category_unless\.rudeness"),
    ("  profanity: [addressed]", "  profanity: [whenever]", r"category_unless\.profanity"),
]


@pytest.mark.parametrize(("old", "new", "error"), BROKEN_FILES)
def test_loader_names_the_file_and_key(tmp_path: Path, old: str, new: str, error: str) -> None:
    source = RULES.path.read_text(encoding="utf-8")
    assert old in source
    bad = tmp_path / "rules.yaml"
    bad.write_text(source.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValueError, match=error):
        load_context_rules(bad)
