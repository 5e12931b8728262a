"""Chinese character n-gram heads (`tfidf_zh` + `text_heads_zh`): learned Chinese coverage beyond the lists.

The Chinese lexicon and rules catch what is on their lists; a sentence that insults, threatens or
spams without a listed word passes them. These heads read the normalised text as characters: TF-IDF
over character 1- to 3-grams (spaces ignored; `tfidf_zh`, a skl2onnx export) and one logistic
regression per category (`text_heads_zh`, the same three-node graph as the English heads), trained
on the Chinese corpus's train split by services/text/build/train_zh_ngram.py. Each head's bias is
shifted so that 0.5 is the lowest threshold at which it adds no false positive on the dev split, so a
policy's review threshold means what it means for the English heads.

`text_semantic` (profile accurate) uses them on texts with a CJK character, and they only ever raise
a score (the maximum of the other scores and the heads'): English is unchanged. Their `violence` and
`self_harm` count only on a text that points at someone (`targets_someone`: the reader addressed, or a
third person): character n-grams cannot tell a threat from a figure of speech about oneself (打死我也不说,
这个游戏我被打死好几次了, 我们去爬山，山顶风景不错 all scored as threats or incitement).

Example::

    heads = ZhNgramHeads(find_model("tfidf_zh", root=root), find_model("text_heads_zh", root=root), SessionOptions())
    heads.score(["你这种人活着就是浪费空气"]).shape   # (1, 7)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions
from services.common.text_match.zh_context import addressed
from services.text.heads import Heads, TfidfVectorizerModel

__all__ = ["TARGETED_CATEGORIES", "ZH_HEADS", "ZH_TFIDF_MODEL", "ZhNgramHeads", "targets_someone", "without_untargeted"]

ZH_TFIDF_MODEL = "tfidf_zh"
ZH_HEADS = "text_heads_zh"
#: Categories whose head score counts only on a text that points at someone (`without_untargeted`).
TARGETED_CATEGORIES = ("violence", "self_harm")
_THIRD_PERSON = ("他", "她", "它们")


def targets_someone(normalised: str) -> bool:
    """True when a normalised Chinese text addresses someone (zh_context.addressed) or names a third
    party (他, 她, 它们).

    Example::

        >>> targets_someone("我知道你住哪"), targets_someone("把他家烧了"), targets_someone("打死我也不说")
        (True, True, False)
    """
    return addressed(normalised) or any(word in normalised for word in _THIRD_PERSON)


def without_untargeted(scores: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """`scores` [N, 7] with the `TARGETED_CATEGORIES` columns zeroed for texts that point at nobody."""
    out = scores.copy()
    columns = [CATEGORIES.index(c) for c in TARGETED_CATEGORIES]
    for row, text in enumerate(texts):
        if not targets_someone(text):
            out[row, columns] = 0.0
    return out


class ZhNgramHeads:
    """The two sessions; `score` runs a whole batch in one call each."""

    def __init__(self, tfidf: RepositoryEntry, heads: RepositoryEntry, options: SessionOptions) -> None:
        self.tfidf = TfidfVectorizerModel(tfidf, options)
        self.heads = Heads(heads, options)
        if self.heads.n_features != len(self.tfidf.vocabulary):
            raise ValueError(f"{ZH_HEADS}: expects {self.heads.n_features} features, {ZH_TFIDF_MODEL} gives "
                             f"{len(self.tfidf.vocabulary)}; run `make models`")

    @property
    def entries(self) -> tuple[RepositoryEntry, RepositoryEntry]:
        """The repository entries of the vectoriser and the heads (for model versions)."""
        return self.tfidf.entry, self.heads.entry

    def score(self, texts: Sequence[str]) -> np.ndarray:
        """Scores [N, 7] (CATEGORIES order) for normalised texts."""
        if not texts:
            return np.zeros((0, len(CATEGORIES)), np.float32)
        return self.heads.predict(self.tfidf.transform(texts))
