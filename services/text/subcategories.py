"""Subcategory shares: which kind of its category a text's content is (docs/taxonomy.md, "Subcategories").

Both text models give, per text, one share per taxonomy subcategory (text contract v3's
`SUBCATEGORY_OUTPUTS`): the probability that the text is of that kind *if* it is content of the parent
category. The kinds the heads learn (`MODELLED_SUBCATEGORIES`: self-harm intent, instructions and
encouragement, threats and graphic violence, threatening harassment and hate) come from a heads file per
model, trained by `services/text/build/train_heads.py` on the naturalistic corpus's rows of each parent
only (a self-harm post: ideation or a method?), calibrated on its dev fold so that 0.5 is the dev-F1-best
point: `text_subheads_fast` reads [static embedding, structured features] (profile fast) and
`text_subheads_semantic` [tuned MiniLM embedding, structured features] (profile accurate). Which category a
text is in is the category heads' question, not these. `sexual/minors` is read from references to minors
(`services.text.minors`), with the reference as its evidence. A text the English heads do not read
(`model.english_reads`: Chinese, emoji only) gets shares of 0 from the heads; its minors share still counts.

Example::

    shares = subcategory_shares(np.zeros((1, len(MODELLED_SUBCATEGORIES)), np.float32),
                                [minor_references("she's 14")], [True])
    shares[0, SHARE_COLUMNS["sexual/minors"]]   # 1.0
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from services.common.contracts.text import SUBCATEGORY_OUTPUTS, EvidenceSpan
from services.common.taxonomy import MODELLED_SUBCATEGORIES

__all__ = ["MINORS", "SHARE_COLUMNS", "SUBCATEGORY_HEADS_FAST", "SUBCATEGORY_HEADS_SEMANTIC", "minors_evidence",
           "subcategory_shares"]

SUBCATEGORY_HEADS_FAST = "text_subheads_fast"
SUBCATEGORY_HEADS_SEMANTIC = "text_subheads_semantic"
MINORS = "sexual/minors"
#: Column of each subcategory in a shares array (the contract's output order).
SHARE_COLUMNS: dict[str, int] = {name: column for column, name in enumerate(SUBCATEGORY_OUTPUTS.values())}
_MODELLED_COLUMNS = [SHARE_COLUMNS[name] for name in MODELLED_SUBCATEGORIES]
_MINOR_SOURCE = "minor_reference"


def subcategory_shares(heads: np.ndarray, references: Sequence[Sequence[tuple[int, int]]],
                       english: Sequence[bool]) -> np.ndarray:
    """Shares [N, len(SUBCATEGORY_OUTPUTS)] in the contract's order: the subcategory heads' scores `heads`
    [N, len(MODELLED_SUBCATEGORIES)] where the English heads read the text (`english`), else 0, and 1 for
    `sexual/minors` where a text has references to a minor (`references`, from `minor_references`)."""
    shares = np.zeros((len(references), len(SHARE_COLUMNS)), np.float32)
    if len(references):
        read = np.asarray(english, dtype=bool)
        shares[:, _MODELLED_COLUMNS] = np.where(read[:, None], heads.astype(np.float32), 0.0)
    for index, found in enumerate(references):
        if found:
            shares[index, SHARE_COLUMNS[MINORS]] = 1.0
    return shares


def minors_evidence(references: Sequence[tuple[int, int]]) -> list[EvidenceSpan]:
    """The `sexual/minors` evidence of a text: one span per reference to a minor (`minor_references`)."""
    return [EvidenceSpan(MINORS, start, end, 1.0, _MINOR_SOURCE) for start, end in references]
