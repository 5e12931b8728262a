#!/bin/sh
# Shared build step of every auditmesh image (the base stage of docker/Dockerfile, run from /app):
# Python dependencies and the generated gRPC stubs. A modality's models are built in its own stage.
set -eu
pip install --no-cache-dir -r requirements.txt
pip install --no-cache-dir --no-deps -r requirements-data.txt
python -m services.common.build_stubs --out services/common/gen
