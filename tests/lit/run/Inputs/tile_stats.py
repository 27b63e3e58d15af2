# Inputs and expected counts for tile-stats.test: `make DIR` writes q/k/v/pad .npy files;
# `check KIND OUT` recomputes which (row block, key tile) pairs the kernel visits and which of
# them test the mask, from the mask itself (by brute force over every (query row, key) pair for
# the affine masks, from each batch entry's visible keys for key padding, from each block of query
# rows' visible keys for a mask that reads a tensor at the query row), and compares them with
# the `tiles ...` line attn-run --tile-stats wrote to OUT.
import os
import re
import sys
import numpy as np

B, H, NQ, NK, D = 2, 2, 192, 256, 8
NK_PAD = 200  # key padding: a partial last tile of 16 keys


def pad_mask():
    pad = np.zeros((B, NK_PAD), dtype=np.int32)
    pad[0, 70:] = 1                        # tail padding
    pad[1, 16:64] = 1                      # whole tiles padded in the middle
    pad[1, 100:103] = 1                    # a few keys of one tile
    return pad


def make(out):
    r = np.random.default_rng(3)
    for name, shape in [("q", (B, H, NK, D)), ("k", (B, H, NK, D)), ("v", (B, H, NK, D)),
                        ("q2", (NQ, D)), ("k2", (NK, D)), ("v2", (NK, D)),
                        ("qp", (B, NQ, D)), ("kp", (B, NK_PAD, D)), ("vp", (B, NK_PAD, D))]:
        np.save(f"{out}/{name}.npy", r.standard_normal(shape).astype(np.float32))
    np.save(f"{out}/pad.npy", pad_mask())
    np.save(f"{out}/keep.npy", (r.random((NQ, NK_PAD)) < 0.7).astype(np.int32))


# Per kind: (visited, visited with the mask test, all pairs) of blocks of rows x 16-key tiles,
# from the mask over (batch x head, query row, key).
def expected(kind):
    i = np.arange(NQ)[:, None]
    j = np.arange(NK)[None, :]
    T = 16
    if kind == "sdpa":
        return count(np.ones((B * H, NK, NK), bool), T, 1, masked=False)
    if kind == "causal":  # square: N = NK
        ii, jj = np.arange(NK)[:, None], np.arange(NK)[None, :]
        return count(np.broadcast_to(jj <= ii, (B * H, NK, NK)), T, 32)
    if kind == "band":
        return count((j <= i) & (j > i - 40), T, 32)
    if kind == "lookback":
        return count(j > i - 50, T, 32)
    if kind == "padded":
        return key_ranges(pad_mask() == 0, T, split=True)
    if kind == "padded_keep":
        keep = np.load(KEEP) != 0
        return group_ranges(keep[None, :, :] & (pad_mask() == 0)[:, None, :], T, 32)
    raise SystemExit(f"unknown kind {kind}")


def key_ranges(visible, T, split):
    """A key padding mask skips, per batch entry, the tiles before its first visible key and after
    its last: the kernel's tile loops run over ranges of tiles (a data-dependent `if` per tile
    would skip the state update but not the tile's work). Where the mask is nothing but the
    padding (`split`), the tiles wholly inside one run of visible keys skip the mask test, unless
    the keys have holes or the run starts and ends inside a tile (then one masked range)."""
    nb, nk = visible.shape
    tiles, full_tiles = -(-nk // T), nk // T  # the shifted last tile is never full
    visited = tested = 0
    for b in range(nb):
        keys = np.flatnonzero(visible[b])
        if len(keys) == 0:
            continue
        lo, hi = keys[0], keys[-1] + 1
        first, end = lo // T, -(-hi // T)
        full = 0
        if split and len(keys) == hi - lo:
            full_end = max(min(hi // T, full_tiles), -(-lo // T))
            head, tail = lo % T != 0, full_end < end
            if not (head and tail):
                full = full_end - -(-lo // T)
        visited += end - first
        tested += end - first - full
    return visited * NQ, tested * NQ, nb * NQ * tiles


def group_ranges(mask, T, rows):
    """A mask that reads a tensor at the query row (`keep(i, j)`): per block of `rows` query rows,
    the tiles from the first key any row of the block sees to the last (a range: a tile that none
    of them sees between two visible ones is visited too); every visited tile tests the mask."""
    nb, nq, nk = mask.shape
    tiles, blocks = -(-nk // T), -(-nq // rows)
    visited = 0
    for b in range(nb):
        for g in range(blocks):
            keys = np.flatnonzero(mask[b, g * rows:(g + 1) * rows].any(axis=0))
            if len(keys):
                visited += -(-(keys[-1] + 1) // T) - keys[0] // T
    return visited, visited, nb * blocks * tiles


def count(mask, T, rows, masked=True):
    mask = np.asarray(mask)
    if mask.ndim == 2:
        mask = mask[None]
    nb, nq, nk = mask.shape
    tiles = -(-nk // T)
    blocks = -(-nq // rows)
    visited = full = 0
    for b in range(nb):
        for g in range(blocks):
            for t in range(tiles):
                m = mask[b, g * rows:(g + 1) * rows, t * T:min((t + 1) * T, nk)]
                if m.any():
                    visited += 1
                    # The shifted last tile (when T does not divide the keys) always tests.
                    full += bool(m.all() and (t + 1) * T <= nk)
    tested = visited - full if masked else 0
    return visited, tested, nb * blocks * tiles


def check(kind, out):
    global KEEP
    KEEP = f"{os.path.dirname(out)}/keep.npy"
    text = open(out).read()
    m = re.search(r"tiles o: key tiles visited (\d+) of (\d+) \([0-9.]+%\), (\d+) with the mask test", text)
    if not m:
        raise SystemExit(f"no tile line in {out}:\n{text}")
    got = (int(m.group(1)), int(m.group(3)), int(m.group(2)))
    want = expected(kind)
    print(f"{kind}: visited {got[0]}/{got[2]} tested {got[1]}; brute force visited {want[0]}/{want[2]} tested {want[1]}")
    print("tile-stats-ok", got == tuple(want))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
