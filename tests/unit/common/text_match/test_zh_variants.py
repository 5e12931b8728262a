"""The variant view's recomposition of split characters (zh_variants._recompose)."""

from __future__ import annotations

import pytest

from services.common.text_match.normalize import normalize
from services.common.text_match.zh_variants import variant_view


@pytest.mark.parametrize(("text", "recomposed"), [
    ("扌喿你女马", "操你妈"), ("犭句东西", "狗东西"), ("这个主播就是个又鸟巴", "这个主播就是个鸡巴"),
])
def test_split_forms_segmented_as_single_components_are_recomposed(text: str, recomposed: str) -> None:
    view = variant_view(normalize(text))
    assert view is not None and view.text == recomposed


@pytest.mark.parametrize("text", ["走了一个小时", "我傻了一下", "你说了一句傻话", "打了一顿就好了"])
def test_regression_le_yi_is_not_recomposed_to_zi_across_a_word(text: str) -> None:
    # 了 + 一 compose 子 in the decomposition table; here 一 belongs to 一个/一下/一句/一顿
    view = variant_view(normalize(text))
    assert view is None or "子" not in view.text, view.text
