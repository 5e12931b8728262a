"""Time per text of the default lexicon's matcher (`Lexicon.find(normalize(text))`), printed as JSON.

Run from the repository root::

    .venv/bin/python bench/text_match_speed.py [--seconds 1.0]

The router accepts texts up to 20,000 characters, and the matcher runs in the text service for every
text, so its cost on a long text is CPU that other tenants' moderation waits for. Cases: short chat
lines (Chinese and English), 5,000 and 20,000 characters of ordinary Chinese prose, 5,000 of English
prose, and 5,000 characters of functional-corpus rows joined (many hits and near misses). Each case
is repeated for about `--seconds`; reported: the median and the best ms per text (the machine is
shared, the best is the least disturbed), and the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon  # noqa: E402
from services.common.text_match.normalize import normalize  # noqa: E402

CORPUS_DIR = Path(__file__).resolve().parents[1] / "services" / "text" / "data" / "corpus"
ZH_PROSE = "今天天气很好，我们一起去公园散步，然后吃了一顿很好吃的晚饭。"
EN_PROSE = "The weather was lovely today, so we walked in the park and then had a very nice dinner. "


def _repeat(text: str, length: int) -> str:
    return (text * (length // len(text) + 1))[:length]


def _corpus_block(lang: str, length: int) -> str:
    rows = [json.loads(line)["text"] for line in (CORPUS_DIR / f"{lang}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return _repeat("".join(rows), length)


def cases() -> dict[str, str]:
    """The benchmark texts by name."""
    return {
        "short_zh": "楼主你这么说就不对了，我觉得还行吧",
        "short_en": "lol that match last night was wild, see you tomorrow",
        "zh_5k": _repeat(ZH_PROSE, 5000),
        "en_5k": _repeat(EN_PROSE, 5000),
        "zh_20k": _repeat(ZH_PROSE, 20000),
        "zh_corpus_5k": _corpus_block("zh", 5000),
    }


def measure(lexicon: Lexicon, text: str, seconds: float) -> dict[str, float]:
    """Median and best ms per `find(normalize(text))` over about `seconds` of repeats (at least 5)."""
    lexicon.find(normalize(text))  # warm the per-character caches
    timings: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(timings) < 5 or time.perf_counter() < deadline:
        began = time.perf_counter()
        lexicon.find(normalize(text))
        timings.append((time.perf_counter() - began) * 1e3)
    return {"median_ms": round(statistics.median(timings), 3), "best_ms": round(min(timings), 3), "runs": len(timings)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent on each case")
    args = parser.parse_args()
    load = os.getloadavg()
    lexicon = Lexicon.load(DEFAULT_LEXICON_PATH)
    results = {name: {"chars": len(text), **measure(lexicon, text, args.seconds)} for name, text in cases().items()}
    print(json.dumps({"load_average": [round(x, 2) for x in load], "cpus": os.cpu_count(), "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
