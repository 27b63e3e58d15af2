// The attn dialect's passes: flags, options and summaries, from which their bases and registration are generated.
#ifndef ATTNC_TRANSFORMS_PASSES_TD
#define ATTNC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// The passes run over the whole module: attn.kernel is a symbol op with a body of its own, and a
// pass reads the kernel's `attn.estimates` as well as the ops inside it.

def SampleOrderPass : Pass<"attn-sample-order", "mlir::ModuleOp"> {
  let summary = "Choose sample-then-project or project-then-sample for projections read by "
                "bilinear sampling";
  let description = [{
    For a definition `v = sum_c x(..., c) * w(..., c) [+ bias]` that is read only through
    expressions linear in it (bilinear sampling and weighted sums), chooses between computing v
    everywhere and sampling it (project-then-sample, cost prod(v's extents) * C) and sampling x
    and projecting each sampled point (sample-then-project, cost prod(the reading site's
    iteration space) * C), as seed 000 does: N_k * C^2 against N_q * K * C^2. The sizes come from
    the kernel's `attn.estimates` attribute. Every consumer records the decision and both costs in
    an `attn.sample_order` attribute, so `--emit=mlir` shows it.
  }];
  // A string, not an enum with cl::values: an unknown order is this pass's own diagnostic, the
  // text attnc and attn-opt have always printed.
  let options = [
    Option<"order", "order", "std::string", /*default=*/"\"auto\"",
           "auto (by the kernel's attn.estimates), sample-first or project-first">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def WindowPartitionPass : Pass<"attn-window-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite attention over non-overlapping windows written on the image into "
                "window coordinates";
  let description = [{
    For an output `o(..., y, x, e) = sum(u, t) ... p(..., y, x, u, t) ...` over a softmax p read
    only there, where o's indices y, x (one per key axis, in order) are used as
    `ry = (y + c) % Y` (or y) divided by a constant ws equal to the paired key axis' extent, and
    a `require` states `Y % ws == 0`: the softmax, the scores it reads at its own indices and the
    sum are re-indexed by (window, position i in the window, key j), with
    y = (w * ws + iy - c) % Y, and o reads the windowed sum `<o>__win` (marked
    `attn.window_partition`) back per pixel. Swin's attention written on the image then has the
    form of the one written in window coordinates (docs/language.md §22): its key reads depend on
    the window alone (attn-gather-reads copies them once per window).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def ContractionOrderPass : Pass<"attn-contraction-order", "mlir::ModuleOp"> {
  let summary = "Reassociate a sum over keys of a factored score (linear attention's "
                "phi(q) (phi(k)^T v)) when the sizes say it is cheaper";
  let description = [{
    For a score `s(.., i, j) = [c *] sum(d) A(.., i, d) * B(.., j, d)` every read of which is a sum
    over its key index `sum(j) s(.., i, j) [* X(.., j, ..)]`, computes each such sum as
    `[c *] sum(d) A(.., i, d) * kx(.., d, ..)` with `kx = sum(j) B(.., j, d) * X(.., j, ..)`
    when that costs fewer multiply-adds at the kernel's `attn.estimates` (N_k D E + N_q D E against
    N_q N_k (D + E) for linear attention); a factor that is not a plain read becomes a
    definition of its own (`<s>__lhs`, `<s>__rhs`). Kept as written when an estimate is missing.
    Each consumer records the decision and both costs in `attn.contraction_order`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def SplitSumsPass : Pass<"attn-split-sums", "mlir::ModuleOp"> {
  let summary = "Split a sum of softmax-weighted terms into one sum per softmax";
  let description = [{
    Rewrites an `attn.reduce "sum"` whose body is a linear combination of terms weighted by
    softmax probabilities (reads of attn.softmax results), as differential attention's
    `sum(j) (p1(.., j) - lam(0) * p2(.., j)) * v(.., j, e)`, into one sum per probability, with
    the factors of a probability's only term that depend on none of the summed indices multiplied
    outside its sum: `sum(j) p1 * v - lam(0) * sum(j) p2 * v`. Terms without a probability stay
    together in one more sum. attn-online-softmax then fuses each `sum(j) p * v`. A body with a
    term that multiplies two probabilities, with more than 8 terms, or already of the form
    `p * v` is left as it is. Runs before attn-mask-bounds, which bounds the new sums.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def GatherReadsPass : Pass<"attn-gather-reads", "mlir::ModuleOp"> {
  let summary = "Give an input read at computed subscripts inside a sum, reused across an index, "
                "a definition of its own";
  let description = [{
    An `attn.read` of a kernel input (boundary "none") inside a `sum` of a top-level
    `attn.define`, at subscripts computed from indices and sizes (not data), that depends on none
    of some of the definition's own indices (the window's queries, for Swin's keys read at
    `(wy * ws + j / ws + shift) % Y`), becomes a read of a new pointwise `attn.define`
    `<def>__<input>` over the indices it uses, marked `attn.gather`. HalideGen inlines such a
    definition unless a schedule places it (cpu-window computes it once per window).
  }];
}

def RemainderBoundsPass : Pass<"attn-remainder-bounds", "mlir::ModuleOp"> {
  let summary = "Bound an input subscript `a % N + u` by what a `require` proves, for Halide's "
                "bounds inference";
  let description = [{
    An `attn.read` of a kernel input at a subscript `a % N + b`, where every coefficient of `a`
    (and its constant) is a multiple of some m, `b` lies in [0, m) (indices of constant extent and
    constants, with coefficients >= 0) and a `require` states `N % M == 0` with M a multiple of m,
    reads at `min(a % N, N - m) + b`: the same value, since a % N is then a multiple of m below N,
    but Halide bounds it by N - 1 where it bounded `a % N + b` by N - 1 + max(b) and the input's
    bounds check failed for elements never read (`k(n / 2 * 4 % N + u, d)`, u in 0..4).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def MaskBoundsPass : Pass<"attn-mask-bounds", "mlir::ModuleOp"> {
  let summary = "Record affine bounds of softmax masks on the softmax axes and on the sums over "
                "them";
  let description = [{
    For each softmax axis with a symbolic extent, the conjuncts of its mask that bound the axis
    affinely in the other indices and the sizes (`j <= i`, `j >= i - w`, `j <= i + Nk - Nq`)
    become an `attn.bounds` attribute (an array of #attn.bound) on the softmax; a sum whose body is
    zero wherever such a softmax is zero (`sum(j) p(.., j) * v(.., j, e)`) gets the bounds carried
    over to its index.
    HalideGen restricts those reductions to the bounds (docs/language.md §9).
  }];
}

def OnlineSoftmaxPass : Pass<"attn-online-softmax", "mlir::ModuleOp"> {
  let summary = "Fuse a softmax and the weighted sum over its axis into a streaming online "
                "softmax";
  let description = [{
    Rewrites a softmax over one (non-window) axis that is read only by a sum over that axis of
    the probabilities times a value into `attn.online_softmax`, which HalideGen lowers to
    FlashAttention's streaming form (running max, sum and rescaled accumulator over tiles of
    `tile` keys; 0 picks it from the key count estimate). A softmax it leaves alone records why
    in `attn.online`. Runs after attn-mask-bounds, whose softmax bounds it carries over. On every
    attn.online_softmax it records the mask's conjuncts that read the key but not the query row
    (key padding) as `attn.key_mask` (#attn.key_mask), which HalideGen turns into skipped tiles.
  }];
  let options = [
    Option<"tile", "tile", "int64_t", /*default=*/"0",
           "Keys per tile (0: 128, fewer when the key count estimate is smaller)">,
    Option<"queryGroup", "query-group", "int64_t", /*default=*/"0",
           "Query rows per group over which mask bounds skip key tiles (0: 32)">,
  ];
}

#endif // ATTNC_TRANSFORMS_PASSES_TD
