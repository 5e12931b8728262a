"""A benign image corpus that can be built offline, for calibrating and sanity-checking vision scores.

No unsafe images exist on this machine, so calibration can only pin the *benign* side of each score.
The corpus has four kinds of images, all encoded as the bytes a client would send:

* `photo`: real photographs found on disk (scikit-learn's sample images, a few photos shipped in
  system documentation); missing files are skipped, so the corpus size depends on the machine.
* `synthetic`: photo-like pictures (colour gradient, noise, filled shapes), seeded.
* `text`: rendered text on white or noisy backgrounds (screenshots, memes without pictures).
* `solid`: flat fills, including black, white, skin tones and blood-like reds (known false-positive
  bait for both models).

Example::

    for item in benign_corpus():
        print(item.kind, item.name, len(item.data))
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

KINDS = ("photo", "synthetic", "text", "solid")

#: Photographs (and a few photo-like screenshots/diagrams) that may exist on a Debian build box.
SYSTEM_IMAGES = (
    "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/requests/ext/flower-of-life.jpg",
    "/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/tools/java/jetty12/jetty-home/modules/demo.d/root/images/jetty-pic.png",
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/embedded-book/assets/f3.jpg",
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/embedded-book/assets/verify.jpeg",
    "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/requests/ext/ss.png",
    "/usr/share/doc/nodejs/contributing/doc_img/scatter-plot.png",
    "/usr/share/doc/valgrind/html/images/kcachegrind_xtree.png",
    "/usr/share/icons/Adwaita/512x512/devices/camera-web.png",
)

SOLID_COLOURS: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128),
    "skin_light": (234, 192, 160), "skin_medium": (198, 134, 100), "skin_dark": (110, 70, 50),
    "red": (200, 20, 20), "dark_red": (110, 10, 15), "blue": (30, 60, 200), "green": (40, 160, 60),
}

TEXT_LINES = (
    ("Quarterly report", "Revenue grew 12% year over year", "Meeting at 10:30 in room B"),
    ("Lost cat! Answers to Milo", "Call 555-0134", "Reward offered"),
    ("def main():", "    print('hello, world')", "    return 0"),
)

FONT_PATHS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),
)


@dataclass(frozen=True)
class CorpusImage:
    """One encoded benign image and where it came from."""

    kind: str
    name: str
    data: bytes

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"CorpusImage.kind must be one of {KINDS}, got {self.kind!r}")
        if not self.data:
            raise ValueError(f"CorpusImage.data is empty for {self.name!r}")


def _encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def photo_like(size: tuple[int, int], seed: int) -> bytes:
    """A text-free photo-like JPEG: colour gradient, soft noise and a few filled shapes.

    Example::

        jpeg = photo_like((320, 240), seed=7)
    """
    width, height = size
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    start, end = rng.uniform(0, 255, size=(2, 3)).astype(np.float32)
    t = ((xs / max(width - 1, 1) + ys / max(height - 1, 1)) / 2)[..., None]
    pixels = start * (1 - t) + end * t + rng.normal(0, 6, size=(height, width, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x0, x1 = sorted(int(v) for v in rng.integers(0, width, size=2))
        y0, y1 = sorted(int(v) for v in rng.integers(0, height, size=2))
        colour = tuple(int(v) for v in rng.integers(0, 256, size=3))
        shape = (x0, y0, x1 + 1, y1 + 1)
        if rng.random() < 0.5:
            draw.ellipse(shape, fill=colour)
        else:
            draw.rectangle(shape, fill=colour)
    return _encode(image, "JPEG")


def text_image(lines: tuple[str, ...], *, noisy: bool, seed: int = 0, size: tuple[int, int] = (640, 360)) -> bytes:
    """Dark text on white (or on a noisy light gradient), as PNG.

    Example::

        png = text_image(("Hello",), noisy=False)
    """
    rng = np.random.default_rng(seed)
    width, height = size
    if noisy:
        base = np.linspace(200, 255, width, dtype=np.float32)[None, :, None] + rng.normal(0, 12, (height, width, 3))
        image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    else:
        image = Image.new("RGB", size, (255, 255, 255))
    font_path = next((p for p in FONT_PATHS if p.exists()), None)
    font = ImageFont.truetype(str(font_path), 30) if font_path else ImageFont.load_default()
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((30, 30 + 60 * index), line, font=font, fill=(20, 20, 20))
    return _encode(image)


def _sample_photos() -> list[Path]:
    spec = importlib.util.find_spec("sklearn")
    roots = list(spec.submodule_search_locations or []) if spec else []
    found = [Path(root) / "datasets" / "images" / name for root in roots for name in ("china.jpg", "flower.jpg")]
    return [p for p in found + [Path(p) for p in SYSTEM_IMAGES] if p.is_file()]


def benign_corpus(synthetic_count: int = 24) -> list[CorpusImage]:
    """Every benign image available here (see the module docstring). Deterministic on one machine.

    Example::

        kinds = {item.kind for item in benign_corpus()}   # {'photo', 'synthetic', 'text', 'solid'}
    """
    if synthetic_count < 0:
        raise ValueError(f"synthetic_count must be >= 0, got {synthetic_count}")
    items = [CorpusImage("photo", path.name, path.read_bytes()) for path in _sample_photos()]
    sizes = ((640, 480), (480, 640), (320, 320), (1024, 576))
    items += [CorpusImage("synthetic", f"photo_like_{seed}", photo_like(sizes[seed % len(sizes)], seed))
              for seed in range(synthetic_count)]
    items += [CorpusImage("text", f"text_{i}_{'noisy' if noisy else 'white'}", text_image(lines, noisy=noisy, seed=i))
              for i, lines in enumerate(TEXT_LINES) for noisy in (False, True)]
    items += [CorpusImage("solid", name, _encode(Image.new("RGB", (256, 256), colour)))
              for name, colour in SOLID_COLOURS.items()]
    return items
