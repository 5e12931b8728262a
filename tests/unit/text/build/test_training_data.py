"""Template weighting of the corpus training rows (services/text/build/training_data.template_balanced)."""

from __future__ import annotations

import pytest

from services.text.build.training_data import Example, template_balanced


def _rows(sizes: dict[str, int], source: str = "corpus:") -> list[Example]:
    return [Example(f"{name} {i}", frozenset(), 1.0, f"{source}{name}", "test") for name, n in sizes.items()
            for i in range(n)]


def _weights(examples: tuple[Example, ...]) -> dict[str, float]:
    return {e.group: e.weight for e in examples}


def test_exponent_zero_keeps_every_weight() -> None:
    rows = _rows({"a": 9, "b": 1})
    assert [e.weight for e in template_balanced(rows, 0.0)] == [1.0] * 10


def test_a_big_template_weighs_less_per_row_but_keeps_the_corpus_total() -> None:
    rows = _rows({"big": 16, "small": 1})
    weighted = template_balanced(rows, 0.5)
    per_row = _weights(weighted)
    assert per_row["corpus:big"] == pytest.approx(per_row["corpus:small"] / 4)
    assert sum(e.weight for e in weighted) == pytest.approx(len(rows))


def test_exponent_one_gives_every_template_the_same_total() -> None:
    weighted = template_balanced(_rows({"a": 12, "b": 3, "c": 1}), 1.0)
    totals: dict[str, float] = {}
    for e in weighted:
        totals[e.group] = totals.get(e.group, 0.0) + e.weight
    assert len({round(t, 9) for t in totals.values()}) == 1


def test_rows_from_other_sources_keep_their_weight() -> None:
    sms = [Example("hi", frozenset(), 0.5, "sms:0", "sms")] * 3
    weighted = template_balanced(_rows({"a": 4}) + sms, 0.5)
    assert [e.weight for e in weighted if e.group == "sms:0"] == [0.5, 0.5, 0.5]
    assert sum(e.weight for e in weighted if e.group == "corpus:a") == pytest.approx(4.0)


def test_a_negative_exponent_is_refused() -> None:
    with pytest.raises(ValueError, match="exponent"):
        template_balanced(_rows({"a": 2}), -0.5)


def test_probe_examples_read_the_listed_files_one_group_per_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from services.text.build.training_data import PROBE_GROUP, load_probe_examples

    (tmp_path / "p1.tsv").write_text("benign\thello there\nhate,violence\tthey should all die\n", encoding="utf-8")
    (tmp_path / "held.tsv").write_text("harassment\tnot read\n", encoding="utf-8")
    rows = load_probe_examples(tmp_path, ("p1",), ())
    assert [(r.text, r.labels) for r in rows] == [("hello there", frozenset()),
                                                  ("they should all die", frozenset({"hate", "violence"}))]
    assert len({r.group for r in rows}) == 2 and all(r.group.startswith(PROBE_GROUP) for r in rows)


def test_a_missing_or_malformed_probe_file_names_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from services.text.build.training_data import load_probe_examples

    with pytest.raises(FileNotFoundError, match=r"gone\.tsv"):
        load_probe_examples(tmp_path, ("gone",), ())
    (tmp_path / "bad.tsv").write_text("benign\tok\nviolent\toops\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: unknown categories \['violent'\]"):
        load_probe_examples(tmp_path, ("bad",), ())


def test_held_out_probe_sets_are_not_training_data() -> None:
    from services.text.build.probe_lines import PROBES_DIR
    from services.text.build.training_data import HELD_OUT_PROBES, TRAINING_PROBES, load_probe_examples

    # en_h and en_i measure generalisation (bench/probe_sets/README.md): they must never train a head
    assert {"en_h", "en_i"} <= set(HELD_OUT_PROBES) and not set(HELD_OUT_PROBES) & set(TRAINING_PROBES)
    assert all((PROBES_DIR / f"{name}.tsv").is_file() for name in TRAINING_PROBES)
    rows = load_probe_examples()
    held = {line.split("\t", 1)[1] for name in ("en_h", "en_i")
            for line in (PROBES_DIR / f"{name}.tsv").read_text(encoding="utf-8").splitlines() if "\t" in line}
    assert rows and not held & {r.text for r in rows}


def test_a_message_also_in_a_held_out_file_is_not_a_training_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from services.text.build.training_data import load_probe_examples

    (tmp_path / "train.tsv").write_text("benign\tsame line\nbenign\tonly here\n", encoding="utf-8")
    (tmp_path / "held.tsv").write_text("benign\tsame line\n", encoding="utf-8")
    assert [r.text for r in load_probe_examples(tmp_path, ("train",), ("held",))] == ["only here"]
    assert len(load_probe_examples(tmp_path, ("train",), ())) == 2
