"""The naturalistic corpus (`services/text/data/corpus_natural/`) as training and dev rows.

Messages written one by one as real users write them (README beside the data). A language's training
files (`<lang>/train_*.jsonl`) are cut into a training part and a dev fold by a hash of each row's id
(`DEV_FRACTION`), so adding a file never moves an existing row between the two; the test files
(`<lang>/test_*.jsonl`) are never read here (`bench.natural_quality` reads them).

Example::

    rows = natural_rows("en")
    sum(r["split"] == "dev" for r in rows) / len(rows)   # about DEV_FRACTION
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from services.common.taxonomy import MODELLED_SUBCATEGORIES, SUBCATEGORIES as TAXONOMY_SUBCATEGORIES

__all__ = ["BENIGN_FUNCTIONALITIES", "DEV_FRACTION", "HARMFUL_FUNCTIONALITIES", "NATURAL_DIR", "PLATFORMS",
           "SUBCATEGORIES", "TARGETS", "dev_bucket", "natural_rows", "row_problems"]

NATURAL_DIR = Path(__file__).resolve().parents[1] / "data" / "corpus_natural"
DEV_FRACTION = 0.2
#: The row vocabulary the README beside the data defines (one place; `row_problems` enforces it).
HARMFUL_FUNCTIONALITIES = frozenset({
    "explicit_derogation", "implicit_derogation", "stereotype_as_fact", "dehumanisation", "threat_to_person",
    "threat_to_group", "incitement", "slur", "coded_group_name", "evasive_spelling", "insult_bullying",
    "sexual_harassment", "sexual_solicitation", "sexual_explicit", "self_harm_intent", "self_harm_encouragement",
    "self_harm_method", "spam_ad", "scam_phishing", "profanity_exclamation", "graphic_depiction"})
BENIGN_FUNCTIONALITIES = frozenset({
    "benign_everyday", "counter_speech", "quote_to_reject", "news_report", "identity_neutral", "identity_positive",
    "discrimination_discussion", "medical_legal", "friendly_teasing", "self_deprecation", "violent_idiom",
    "support_seeking", "recovery_talk", "fiction_history", "product_talk", "sex_education", "abuse_non_protected",
    "negation"})
TARGETS = frozenset({"none", "individual", "gender", "region", "ethnicity_race", "nationality", "religion",
                     "sexuality", "disability", "age", "occupation", "appearance", "self"})
PLATFORMS = {
    "zh": frozenset({"danmaku", "live_chat", "weibo", "zhihu", "tieba", "forum", "game_chat", "shop_review",
                     "private_message", "short_video_comment", "news_comment"}),
    "en": frozenset({"forum_post", "comment", "reply", "chat", "dm", "review", "story", "social_post", "game_chat",
                     "email", "marketing_copy", "technical", "news"}),
}
#: The subcategories a row may carry, and each one's parent label: the kinds the heads learn
#: (`services.common.taxonomy.MODELLED_SUBCATEGORIES`; `sexual/minors` is never written).
SUBCATEGORIES = {name: TAXONOMY_SUBCATEGORIES[name].parent for name in MODELLED_SUBCATEGORIES}


def dev_bucket(row_id: str) -> float:
    """A stable number in [0, 1] from `row_id` (the first 32 bits of its SHA-256)."""
    return int(hashlib.sha256(row_id.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def natural_rows(lang: str, directory: Path = NATURAL_DIR) -> list[dict[str, Any]]:
    """Every row of `lang`'s training files, each with `split` ("train" or "dev", by `dev_bucket` of its
    id) and `source` (its file name).

    Raises ValueError naming the file and line of a row that is not a JSON object with an id."""
    rows = []
    for path in sorted((directory / lang).glob("train_*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
            if not isinstance(row, dict) or "id" not in row:
                raise ValueError(f"{path}:{number}: a row must be a JSON object with an id")
            split = "dev" if dev_bucket(str(row["id"])) < DEV_FRACTION else "train"
            rows.append({**row, "split": split, "source": path.name})
    return rows


def row_problems(row: dict[str, Any], lang: str, categories: frozenset[str]) -> list[str]:
    """What is wrong with one row of `lang`'s files (empty when nothing): missing keys, names outside the
    vocabulary above or outside `categories`, a subcategory without its parent, a benign functionality with
    a label other than profanity, a harmful one without a label."""
    problems = []
    missing = {"id", "text", "labels", "functionality", "target", "platform", "hard_negative", "lang"} - set(row)
    if missing:
        return [f"missing keys {sorted(missing)}"]
    labels = set(row["labels"])
    if row["lang"] != lang:
        problems.append(f"lang {row['lang']!r} in the {lang} files")
    if not str(row["text"]).strip():
        problems.append("empty text")
    if labels - categories:
        problems.append(f"unknown labels {sorted(labels - categories)}")
    functionality = row["functionality"]
    if functionality in HARMFUL_FUNCTIONALITIES:
        if not labels:
            problems.append(f"harmful functionality {functionality} without a label")
    elif functionality in BENIGN_FUNCTIONALITIES:
        if labels - {"profanity"}:
            problems.append(f"benign functionality {functionality} with labels {sorted(labels)}")
    else:
        problems.append(f"unknown functionality {functionality!r}")
    if row["target"] not in TARGETS:
        problems.append(f"unknown target {row['target']!r}")
    if row["platform"] not in PLATFORMS.get(lang, frozenset()):
        problems.append(f"unknown {lang} platform {row['platform']!r}")
    for sub in row.get("subcategories", []):
        if sub not in SUBCATEGORIES:
            problems.append(f"unknown subcategory {sub!r}")
        elif SUBCATEGORIES[sub] not in labels:
            problems.append(f"subcategory {sub} without its parent label {SUBCATEGORIES[sub]}")
    return problems
