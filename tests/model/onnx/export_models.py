#!/usr/bin/env python3
"""Exports the ONNX files the tests import into the directory given (argument 1); argument 2, if
given, names the files to make (comma-separated), else all of them.

Uses Debian's python3-torch, python3-torchvision and python3-onnx. Writes expected.json: for each
file, torch's count of the model's trainable parameters and the element count of the file's
floating-point initializers that are not batch-norm running statistics, counted with onnx.
"""
import json
import os
import sys

import onnx
import onnx.helper as oh
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

TRAIN = torch.onnx.TrainingMode.TRAINING


def trainable_elements(path):
    m = onnx.load(path)
    stats = {n.input[i] for n in m.graph.node if n.op_type == "BatchNormalization"
             for i in (3, 4) if i < len(n.input)}
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
              onnx.TensorProto.DOUBLE)
    total = 0
    for t in m.graph.initializer:
        if t.data_type in floats and t.name not in stats:
            n = 1
            for d in t.dims:
                n *= d
            total += n
    return total


class Bert(nn.Module):
    """BERT as hetplan's zoo builds it: word, position and token-type embeddings, post-norm
    blocks, the MLM head (dense, GELU, layernorm, decoder tied to the word embedding, its own
    bias) and the NSP head (pooler on [CLS], tanh, two classes), with both losses."""

    def __init__(self, vocab, hidden, heads, ffn, layers, positions):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, ffn, activation="gelu", batch_first=True)
            for _ in range(layers))
        self.mlm_dense = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)

    def forward(self, ids, labels, nsp_labels):
        s = ids.shape[1]
        types = (torch.arange(s) >= s // 2).long()
        x = self.word(ids) + self.position(torch.arange(s)) + self.token_type(types)
        x = F.dropout(self.norm(x), 0.1, self.training)
        for b in self.blocks:
            x = b(x)
        y = self.mlm_norm(F.gelu(self.mlm_dense(x)))
        logits = y @ self.word.weight.t() + self.mlm_bias
        mlm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        nsp = F.cross_entropy(self.nsp(torch.tanh(self.pooler(x[:, 0]))), nsp_labels)
        return mlm + nsp


class GptBlock(nn.Module):
    """One pre-norm GPT block (fused QKV, causal attention, 4h GELU MLP) on [batch, seq, hidden]."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, activation="gelu",
                                                batch_first=True, norm_first=True)

    def forward(self, x):
        # Made in the graph, not kept as a buffer: a buffer would be a float initializer, which
        # the file cannot tell from a weight.
        s = x.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf")), 1)
        return self.block(x, src_mask=mask)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Recurrent(nn.Module):
    """Embedding, a two-layer bidirectional LSTM, a GRU and a classifier on the last token."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.lstm = nn.LSTM(32, 64, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(128, 16, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, ids):
        y, _ = self.lstm(self.embed(ids))
        z, _ = self.gru(y)
        return self.head(z[:, -1])


class PaddedWindows(nn.Module):
    """Swin's padding to a multiple of the window (7), computed from the input's shape: pads that
    exporters build with Mod, Concat, a reversing Slice and a Transpose."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):  # [batch, h, w, c]
        pad_r = (7 - x.shape[2] % 7) % 7
        pad_b = (7 - x.shape[1] % 7) % 7
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        return self.fc(x.reshape(x.shape[0], -1, x.shape[3]))


def export(model, args, path, names, axes=None, train=True):
    model.train(train)
    torch.onnx.export(model, args, path, input_names=names, dynamic_axes=axes or {},
                      training=TRAIN if train else torch.onnx.TrainingMode.EVAL,
                      do_constant_folding=not train, opset_version=14)


def custom_op_model(path):
    """An op hetplan does not cost (a custom domain's Foo, which ONNX has no schema for either)
    between two convolutions, built with onnx.helper."""
    w1 = oh.make_tensor("w1", onnx.TensorProto.FLOAT, [8, 3, 3, 3], [0.0] * 216)
    w2 = oh.make_tensor("w2", onnx.TensorProto.FLOAT, [8, 8, 1, 1], [0.0] * 64)
    graph = oh.make_graph(
        [oh.make_node("Conv", ["x", "w1"], ["a"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
         oh.make_node("Foo", ["a"], ["b"], name="/foo/Foo", domain="com.example"),
         oh.make_node("Conv", ["b", "w2"], ["y"], name="/conv2/Conv")],
        "custom", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 16, 16])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", "C", "H", "W"])], [w1, w2])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 14),
                                                  oh.make_opsetid("com.example", 1)]), path)
    return 216 + 64


def recurrent(path):
    m = Recurrent()
    export(m, (torch.zeros(3, 10, dtype=torch.long),), path, ["ids"], {"ids": {0: "batch"}})
    return m


def padded_windows(path):
    m = PaddedWindows()
    export(m, (torch.zeros(2, 10, 10, 8),), path, ["x"], {"x": {0: "batch"}})
    return m


def conv_transpose(path):
    """A grouped, strided transposed convolution: [1, 4, 8, 8] to [1, 2, 18, 18]."""
    m = nn.ConvTranspose2d(4, 2, 4, stride=2, groups=2)
    export(m, (torch.zeros(1, 4, 8, 8),), path, ["x"], train=False)
    return m


def conv_weight_rank(path):
    """A Conv whose weight has rank 3 on a rank-4 input: the checker passes it, and libonnx
    1.12's shape inference reads out of bounds on it."""
    w = oh.make_tensor("w", onnx.TensorProto.FLOAT, [3, 3, 3], [0.0] * 27)
    graph = oh.make_graph(
        [oh.make_node("Conv", ["x", "w"], ["y"], name="/conv/Conv", pads=[1, 1, 1, 1])], "bad",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 16, 16])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 8, 14, 14])], [w])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 14)]), path)
    return 27


def resnet50(path):
    m = torchvision.models.resnet50()
    export(m, (torch.zeros(2, 3, 224, 224),), path, ["images"], {"images": {0: "batch"}})
    return m


def bert_base(path):
    seq = 128  # as the zoo's bert-base:seq=128, whose position table has seq rows
    m = Bert(30522, 768, 12, 3072, 12, seq)
    ids = torch.zeros(2, seq, dtype=torch.long)
    export(m, (ids, ids, torch.zeros(2, dtype=torch.long)), path, ["ids", "labels", "nsp_labels"],
           {"ids": {0: "batch"}, "labels": {0: "batch"}, "nsp_labels": {0: "batch"}})
    return m


def gpt_block(path):
    m = GptBlock(768, 12)
    export(m, (torch.zeros(2, 256, 768),), path, ["x"], {"x": {0: "batch"}})
    return m


def gpt_block_eval(path):
    """The block exported for inference: constant folding pre-transposes its weights."""
    m = GptBlock(768, 12)
    export(m, (torch.zeros(2, 256, 768),), path, ["x"], {"x": {0: "batch"}}, train=False)
    return m


def block_dynamic_seq(path):
    """A symbolic sequence length, which the importer must be given."""
    m = GptBlock(768, 12).block
    export(m, (torch.zeros(2, 256, 768),), path, ["x"], {"x": {0: "batch", 1: "sequence"}})
    return m


def mlp_batch4(path):
    """A fixed batch of 4: costs per sample are a quarter of the graph's."""
    m = Mlp()
    export(m, (torch.zeros(4, 32),), path, ["x"])
    return m


MODELS = {"resnet50.onnx": resnet50, "bert-base.onnx": bert_base, "gpt-block.onnx": gpt_block,
          "gpt-block-eval.onnx": gpt_block_eval, "block-dynamic-seq.onnx": block_dynamic_seq,
          "mlp-batch4.onnx": mlp_batch4, "custom-op.onnx": custom_op_model,
          "conv-weight-rank.onnx": conv_weight_rank, "recurrent.onnx": recurrent,
          "padded-windows.onnx": padded_windows, "conv-transpose.onnx": conv_transpose}


def main(out, names):
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    expected = {}
    for name in names:
        path = os.path.join(out, name)
        made = MODELS[name](path)
        params = made if isinstance(made, int) else sum(p.numel() for p in made.parameters())
        expected[name] = {"torch_parameters": params,
                          "trainable_initializer_elements": trainable_elements(path)}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(",") if len(sys.argv) > 2 else sorted(MODELS))
