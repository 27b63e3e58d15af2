# Inputs and numpy fp64 references for varlen.test: a packed batch of five sequences (37, 100, 1,
# 62 and 50 tokens, N = 250, so the last key tile is partial) and the same tokens with the
# sequence ids interleaved in runs of three (each query block then spans every sequence).
import sys
import numpy as np

out = sys.argv[1]
H, D = 2, 16
lengths = [37, 100, 1, 62, 50]
N = sum(lengths)
r = np.random.default_rng(20)
q, k, v = (r.standard_normal((H, N, D)) for _ in range(3))
seq = np.repeat(np.arange(len(lengths)), lengths).astype(np.int32)
mixed = ((np.arange(N) // 3) % 4).astype(np.int32)
for name, a in [("q", q), ("k", k), ("v", v)]:
    np.save(f"{out}/{name}.npy", a.astype(np.float32))
np.save(f"{out}/seq.npy", seq)
np.save(f"{out}/mixed.npy", mixed)


def attention(ids, causal):
    # The definition: softmax over the keys of the query's own sequence (and j <= i).
    q64, k64, v64 = (a.astype(np.float32).astype(np.float64) for a in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) / np.sqrt(D)
    mask = ids[None, :] == ids[:, None]
    if causal:
        mask &= np.arange(N)[None, :] <= np.arange(N)[:, None]
    s = np.where(mask[None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v64


def per_sequence(causal):
    # PyTorch's way: attention once per sequence on its slice of the packed tensors.
    o, start = np.zeros((H, N, D)), 0
    for n in lengths:
        sl = slice(start, start + n)
        q64, k64, v64 = (a[:, sl].astype(np.float32).astype(np.float64) for a in (q, k, v))
        s = q64 @ k64.transpose(0, 2, 1) / np.sqrt(D)
        if causal:
            s = np.where(np.tril(np.ones((n, n), bool))[None], s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        o[:, sl] = (p / p.sum(axis=-1, keepdims=True)) @ v64
        start += n
    return o


for causal, name in [(False, "varlen"), (True, "causal")]:
    a = attention(seq, causal)
    assert np.abs(a - per_sequence(causal)).max() < 1e-12
    np.save(f"{out}/{name}_np.npy", a)
    np.save(f"{out}/{name}_mixed_np.npy", attention(mixed, causal))


# Key tiles visited by blocks of 32 queries with tiles of 16 keys: from the first key any query
# of the block sees to the last one; of those, the tiles every query of the block sees whole skip
# the mask test (when each query sees one run of keys; the shifted last tile never does).
# Printed for the test's record.
def visits(ids, causal, T=16, rows=32):
    mask = ids[None, :] == ids[:, None]
    if causal:
        mask &= np.arange(N)[None, :] <= np.arange(N)[:, None]
    n = tested = 0
    for g in range(-(-N // rows)):
        block = mask[g * rows:(g + 1) * rows]
        keys = np.flatnonzero(block.any(axis=0))
        first, end = keys[0] // T, -(-(keys[-1] + 1) // T)
        runs = all(r.any() and np.all(np.diff(np.flatnonzero(r)) == 1) for r in block)
        full = sum(1 for t in range(first, min(end, N // T)) if block[:, t * T:(t + 1) * T].all())
        n += end - first
        tested += end - first - (full if runs else 0)
    return f"{n * H}/{tested * H}"


print("visits", visits(seq, False), visits(seq, True), visits(mixed, False))

# Longer sequences (N = 1110): a block's keys inside every row's sequence go in whole tiles of 256
# keys where 256 of them fit (attn.online_softmax's whole_tile), the rest in tiles of 128.
long_lengths = [300, 37, 513, 260]
NL = sum(long_lengths)
ql, kl, vl = (r.standard_normal((1, NL, 8)).astype(np.float32) for _ in range(3))
seql = np.repeat(np.arange(len(long_lengths)), long_lengths).astype(np.int32)
for name, a in [("ql", ql), ("kl", kl), ("vl", vl)]:
    np.save(f"{out}/{name}.npy", a)
np.save(f"{out}/seql.npy", seql)
ol, start = np.zeros((1, NL, 8)), 0
for n in long_lengths:
    sl = slice(start, start + n)
    s = ql[:, sl].astype(np.float64) @ kl[:, sl].astype(np.float64).transpose(0, 2, 1) / np.sqrt(8)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    ol[:, sl] = (p / p.sum(axis=-1, keepdims=True)) @ vl[:, sl].astype(np.float64)
    start += n
np.save(f"{out}/long_np.npy", ol)
