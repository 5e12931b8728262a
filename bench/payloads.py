"""The inputs every benchmark path sends: the same texts and images for direct, unbatched and auditmesh.

Item kinds: `text` (one text part) and `image` (one image part: a 640x480 PNG with rendered Chinese
and English lines, so OCR finds text and its lines go through text moderation too). Images are
rendered with the test fixtures' renderer (needs Debian's `fonts-wqy-zenhei`, as the tests do).

Example::

    inputs = BenchInputs.build(images=2)
    inputs.payload("text", 17)     # b"..." (UTF-8), index taken modulo the pool
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.render import render_text_image

KINDS = ("text", "image")

#: Chat-like lines: benign, spam, insults, obfuscated Chinese profanity, mixed script.
TEXTS = (
    "Thanks for the invite, see you on Friday at the usual place!",
    "WINNER!! You have won a £1000 prize, call 09061701461 to claim now",
    "you are a complete idiot and everyone hates you",
    "今天天气不错，我们下午去公园散步吧",
    "你这个傻　.　逼",
    "Can someone review my pull request before the release?",
    "免费领取 加微信 点击链接领奖",
    "lol that match last night was insane, gg everyone",
    "Free entry in 2 a wkly comp to win FA Cup final tkts, text FA to 87121",
    "I disagree with your argument, but thanks for explaining it clearly",
    "shut up you stupid moron",
    "明天的会议改到下午三点，请大家准时参加",
)

_IMAGE_LINES = (
    ["Daily deals 2026", "内容审核测试 免费领取"],
    ["Meeting at 3pm", "会议室 B 二楼"],
    ["WIN A FREE PHONE", "加微信 领奖"],
    ["Happy birthday Anna", "生日快乐"],
)


@dataclass(frozen=True)
class BenchInputs:
    """A fixed pool of payloads per kind; `payload(kind, i)` cycles through it."""

    texts: tuple[bytes, ...]
    images: tuple[bytes, ...]

    @classmethod
    def build(cls, images: int = len(_IMAGE_LINES)) -> BenchInputs:
        """Encode the texts and render `images` PNGs (1 to 4; rendering takes ~50 ms each)."""
        if not 1 <= images <= len(_IMAGE_LINES):
            raise ValueError(f"images must be 1..{len(_IMAGE_LINES)}, got {images}")
        rendered = tuple(render_text_image(lines, background="noisy", seed=seed)
                         for seed, lines in enumerate(_IMAGE_LINES[:images]))
        return cls(tuple(text.encode("utf-8") for text in TEXTS), rendered)

    def pool(self, kind: str) -> tuple[bytes, ...]:
        """All payloads of `kind`; raises ValueError for an unknown kind."""
        if kind == "text":
            return self.texts
        if kind == "image":
            return self.images
        raise ValueError(f"unknown item kind {kind!r}; known: {list(KINDS)}")

    def payload(self, kind: str, index: int) -> bytes:
        """The payload for an arrival's (kind, index)."""
        pool = self.pool(kind)
        return pool[index % len(pool)]
