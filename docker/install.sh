#!/bin/sh
# Shared build step of every auditmesh image (run inside the Dockerfiles, from /app):
# Python dependencies, generated gRPC stubs, and, when MODALITY is set, that modality's models.
set -eu
pip install --no-cache-dir -r requirements.txt
pip install --no-cache-dir --no-deps -r requirements-data.txt
python -m services.common.build_stubs --out services/common/gen
if [ -n "${MODALITY:-}" ]; then
  python -m "services.${MODALITY}.build.build_models" --repository /app/model_repository
fi
