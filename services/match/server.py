"""The match service: KServe v2 model `match`, known-content matching against hash banks (issue 42;
services/match/model.py). Same serving kit as the other modality services.

Run: `python -m services.match.server --config config/match.yaml` (see `--help`).
"""

from __future__ import annotations

from typing import Sequence

from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.model_api import ServedModel


def served_models(config: ModalityServiceConfig) -> Sequence[ServedModel]:
    """The model this service serves, its banks loaded from the configured store."""
    from services.match.bank_stores import open_bank_store
    from services.match.model import MatchModel

    store = open_bank_store(config.match.banks_path, config.match.banks_dsn, reader=True)
    return [MatchModel(store, config.match, limits=config.limits.image_limits())]


def main(argv: Sequence[str] | None = None) -> int:
    from services.common.serving.modality_main import run_modality

    return run_modality("match", served_models, argv)


if __name__ == "__main__":
    raise SystemExit(main())
