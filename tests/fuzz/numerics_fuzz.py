#!/usr/bin/env python3
"""Numerics fuzzer: compiled attnc kernels against the fp64 reference interpreter.

Each case (one seed) generates a random valid kernel in the attnc DSL and random inputs (with,
by default, NaN, +-inf, huge, tiny/denormal values, all-equal rows, huge scores and fully masked
rows), runs `attn-run --reference` and `attn-run --schedule=S` for every CPU schedule rule that
applies plus `auto` and `none` (and, where the online softmax applies, other key tiles and
`--online-softmax=off`), and compares every compiled output with the reference:

  * NaN exactly where the reference has NaN, +-inf exactly where it has the same infinity
    (where the sampling order may sample a projection first, any non-finite value where the
    reference has one: docs/language.md §19; the variant forced to project first is exact);
  * finite values within a bound computed by a shadow model of the kernel (below);
  * a clean `error:` from both sides is a refused kernel (counted, not a failure); a crash, a
    timeout, a raw Halide error, or one side failing where the other succeeds is a failure,
    except the documented differences (`ifloor` of NaN, integer division by zero).

The shadow model evaluates the same kernel in numpy (fp64) from the generator's own expression
trees. It gives, per output element, (a) the reference semantics' value (a check of the
interpreter and of the model itself), (b) the value under the intended semantics where they
differ (a masked key or a zero-padded read is never read: it contributes exactly 0 even where
its value is NaN/inf; docs/language.md §9 documents the difference), (c) a running error bound
in units of the fp32 unit roundoff (what an fp32 evaluation in any order may legitimately differ
by: sums scale with their length and the magnitudes of their terms, exp/softmax with their
arguments' errors, division with its denominator's), and (d) a "wild" flag where fp32 may
legitimately give anything: an intermediate beyond the fp32 range, a float comparison or floor
within rounding of its threshold, a domain boundary (sqrt/log of ~0). The verdict per element:
wild, or the compiled value matches the reference (or the intended semantics) within
TOLC * 2^-24 * bound.

Usage:
  numerics_fuzz.py --bin build/bin --seconds 60           # fuzz for a minute (seed printed)
  numerics_fuzz.py --bin build/bin --seed 1234            # one case, reproducibly
  numerics_fuzz.py --bin build/bin --seeds 0:20 --quick   # seeds 0..19, fewer variants
  numerics_fuzz.py --bin build/bin --self-test 10         # perturbed outputs must be caught
Exit status: 0 when no case failed, 1 otherwise. Failing cases are written under --artifacts
(numerics-<seed>/: kernel.attn, inputs, outputs, report.txt, repro.sh).
"""

import argparse
import concurrent.futures
import json
import math
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
EPS = 2.0 ** -24                 # fp32 unit roundoff
ETA = 2.0 ** -149 / EPS          # fp32 denormal spacing, in units of EPS
TOLC = 4.0                       # safety factor on the running error bound
REF_REL = 2.0 ** -23             # the reference's own rounding to f32 (its outputs are f32)
# exp and pow may flush results below the smallest normal float (2^-126) to 0, as fast fp32
# implementations do: an absolute error of 2^-126, in the bound's units (0 with --strict-denormals)
TINY = 2.0 ** -126 / (TOLC * EPS)

# ----------------------------------------------------------------------------------------------
# Shadow model: the kernel evaluated in numpy (fp64, the reference's semantics), with an error
# bound and a "wild" flag per element (class Val).
# ----------------------------------------------------------------------------------------------


class ModelError(Exception):
    """The generator produced something the model cannot evaluate (a generator bug)."""


class RefError(Exception):
    """The reference refuses this input, as documented (integer division by zero)."""


class Val:
    """A value over the bound indices (numpy arrays broadcastable to them):
    a     the value, as the fp64 reference computes it;
    hz    a structural zero (docs/language.md §6): a `.zero`/`.exclude` read outside its tensor or
          a softmax point its mask hides, and products, negations and quotients of one;
    mag   a bound on what an fp32 evaluation in any order may differ by, in units of EPS;
    wild  fp32 may legitimately give anything here (overflow, a comparison or floor at rounding
          distance of its threshold, a domain boundary)."""
    __slots__ = ("a", "hz", "mag", "wild", "ty")

    def __init__(self, a, hz=None, mag=None, wild=None, ty="f"):
        self.a = np.asarray(a)
        self.hz = np.zeros(self.a.shape, bool) if hz is None else np.asarray(hz)
        if mag is None:
            mag = np.abs(self.a).astype(np.float64) if ty == "f" else np.zeros(self.a.shape)
        self.mag = np.asarray(mag)
        self.wild = np.zeros(self.a.shape, bool) if wild is None else np.asarray(wild)
        self.ty = ty

    def lifted(self, nd):
        def l(x):
            x = np.asarray(x)
            return x.reshape(x.shape + (1,) * (nd - x.ndim)) if x.ndim < nd else x
        return Val(l(self.a), l(self.hz), l(self.mag), l(self.wild), self.ty)


def _finish(v):
    """Sanitises a float Val: no error bound on non-finite values (inf and NaN are exact), and
    wild where fp32 may overflow."""
    if v.ty != "f":
        return v
    with np.errstate(all="ignore"):
        fin = np.isfinite(v.a)
        mag = np.where(fin, v.mag, 0.0)
        mag = np.where(np.isnan(mag), np.inf, mag)
        over = fin & (np.abs(v.a) + TOLC * EPS * mag > F32_MAX)
    v.mag = mag
    v.wild = v.wild | over
    return v


class Ctx:
    def __init__(self, sizes, consts):
        self.sizes = sizes            # name -> int
        self.consts = consts          # name -> (value, ty)
        self.tensors = {}             # name -> Val over the tensor's whole index space
        self.axes = []                # bound indices: (name, lo, hi)
        self.env = {}                 # let names -> Val
        self.excl = None              # in a softmax: points an `.exclude` read left out

    @property
    def nd(self):
        return len(self.axes)

    def index_array(self, name):
        for p, (n, lo, hi) in enumerate(self.axes):
            if n == name:
                shape = [1] * self.nd
                shape[p] = hi - lo
                return np.arange(lo, hi, dtype=np.int64).reshape(shape)
        raise ModelError("unbound index " + name)


# --- expression nodes: each prints itself in the DSL (fully parenthesised) and evaluates -------


class E:
    ty = "f"

    def txt(self):
        raise NotImplementedError

    def ev(self, ctx):
        raise NotImplementedError

    def __str__(self):
        return self.txt()


def ftxt(x):
    """A non-negative float literal in the DSL."""
    s = repr(float(x))
    if "inf" in s or "nan" in s or x < 0:
        raise ModelError("not a literal: %r" % x)
    return s


class FConst(E):
    def __init__(self, v):
        self.v = float(v)

    def txt(self):
        return ftxt(self.v) if self.v >= 0 else "(-" + ftxt(-self.v) + ")"

    def ev(self, ctx):
        a = np.full((1,) * ctx.nd, self.v)
        # the compiled code rounds the literal to f32 (the reference keeps it in double)
        exact = float(np.float32(self.v)) == self.v
        return Val(a, mag=np.zeros(a.shape) if exact else np.abs(a))


class IConst(E):
    ty = "i"

    def __init__(self, v):
        self.v = int(v)

    def txt(self):
        return str(self.v) if self.v >= 0 else "(-%d)" % -self.v

    def ev(self, ctx):
        return Val(np.full((1,) * ctx.nd, self.v, np.int64), ty="i")


class Named(E):
    """A leaf spelt by its name: a size, constant, index or let name."""

    ty = "i"

    def __init__(self, name, ty=None):
        self.name = name
        if ty is not None:
            self.ty = ty

    def txt(self):
        return self.name


class Size(Named):
    def ev(self, ctx):
        return Val(np.full((1,) * ctx.nd, ctx.sizes[self.name], np.int64), ty="i")


class Const(Named):
    """A kernel constant (declared with `const`)."""

    def ev(self, ctx):
        v, ty = ctx.consts[self.name]
        if ty == "i":
            return Val(np.full((1,) * ctx.nd, v, np.int64), ty="i")
        a = np.full((1,) * ctx.nd, float(v))
        return Val(a, mag=np.zeros(a.shape) if float(np.float32(v)) == float(v) else np.abs(a))


class Idx(Named):
    def ev(self, ctx):
        return Val(ctx.index_array(self.name), ty="i")


class Var(Named):
    """A let name: the value bound, structural zero included."""

    def ev(self, ctx):
        return ctx.env[self.name].lifted(ctx.nd)


def to_float(v):
    """A conversion (int to float): exact for the generator's small ints; never a structural zero."""
    if v.ty == "f":
        return v
    a = v.a.astype(np.float64)
    return _finish(Val(a, mag=np.where(np.abs(a) < 2.0 ** 24, 0.0, np.abs(a)), wild=v.wild))


class Bin(E):
    def __init__(self, op, x, y):
        self.op, self.x, self.y = op, x, y
        if op not in ("+", "-", "*", "/", "%"):
            raise ModelError("bad op " + op)
        self.ty = "i" if (x.ty == "i" and y.ty == "i") else "f"
        if op == "%" and self.ty != "i":
            raise ModelError("% on floats")

    def txt(self):
        return "(%s %s %s)" % (self.x.txt(), self.op, self.y.txt())

    def ev(self, ctx):
        x, y = self.x.ev(ctx), self.y.ev(ctx)
        wild = x.wild | y.wild
        if self.ty == "i":
            if self.op in "/%" and np.any(y.a == 0):
                raise RefError("integer division by zero")
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.floor_divide, "%": np.mod}[self.op]
            with np.errstate(all="ignore"):
                a = f(x.a, y.a)
            return Val(a, wild=wild, ty="i")
        x, y = to_float(x), to_float(y)
        op = self.op
        hz = None
        with np.errstate(all="ignore"):
            if op in "+-":
                a = x.a + y.a if op == "+" else x.a - y.a
                mag = x.mag + y.mag + np.abs(a)
            elif op == "*":
                hz = x.hz | y.hz
                a = np.where(hz, 0.0, x.a * y.a)
                mag = np.where(hz, 0.0, np.abs(y.a) * x.mag + np.abs(x.a) * y.mag + np.abs(a))
                # an infinite factor times one that fp32 may make 0: inf or NaN
                wild = wild | (~hz & ((np.isinf(y.a) & _could_be_zero(x)) | (np.isinf(x.a) & _could_be_zero(y))))
            else:  # /
                hz = x.hz
                a = np.where(hz, 0.0, x.a / y.a)
                ay = np.abs(y.a)
                mag = np.where(hz, 0.0, x.mag / ay + np.abs(a) * y.mag / ay + np.abs(a))
                # a denominator within its error of 0 may change sign or become 0 in fp32
                wild = wild | (~hz & np.isfinite(y.a) & (ay <= TOLC * EPS * y.mag) & (y.mag > 0))
        return _finish(Val(a, hz, mag + ETA, wild))


class Neg(E):
    def __init__(self, x):
        self.x = x
        self.ty = x.ty

    def txt(self):
        return "(-%s)" % self.x.txt()

    def ev(self, ctx):
        x = self.x.ev(ctx)
        return Val(-x.a, x.hz, x.mag, x.wild, x.ty)


def _tiny():
    return 0.0 if STRICT_DENORMALS else TINY


STRICT_DENORMALS = False


def _could_be_zero(v):
    """Finite elements that fp32 may round or flush to 0 (then 0 * inf is NaN where fp64 gives inf)."""
    return np.isfinite(v.a) & (np.abs(v.a) <= TOLC * EPS * v.mag)


def _near_integer(x, tol):
    fl = np.floor(x)
    return np.isfinite(x) & ((x - fl <= tol) | (fl + 1 - x <= tol)) & (np.abs(x) < 2.0 ** 24)


def _ifloor(a):
    """As the reference: NaN to the lowest int, clamped to the ints an f32 reaches."""
    with np.errstate(all="ignore"):
        f = np.clip(np.floor(np.where(np.isnan(a), -2.0 ** 31, a)), -2147483648.0, 2147483520.0)
    return f.astype(np.int64)


class Call(E):
    """A builtin: exp log sqrt rsqrt sin cos tanh erf floor abs ifloor min max pow."""

    def __init__(self, fn, *args, stable=False):
        self.fn, self.args, self.stable = fn, list(args), stable
        if fn in ("min", "max"):
            self.ty = "i" if all(a.ty == "i" for a in args) else "f"
        elif fn == "abs":
            self.ty = args[0].ty
        elif fn == "ifloor":
            self.ty = "i"
        else:
            self.ty = "f"

    def txt(self):
        return "%s(%s)" % (self.fn, ", ".join(a.txt() for a in self.args))

    def ev(self, ctx):
        vs = [a.ev(ctx) for a in self.args]
        fn = self.fn
        if self.ty == "i" and fn in ("min", "max", "abs"):
            f = {"min": np.minimum, "max": np.maximum, "abs": np.abs}[fn]
            wild = vs[0].wild
            for v in vs[1:]:
                wild = wild | v.wild
            return Val(f(*[v.a for v in vs]), wild=wild, ty="i")
        vs = [to_float(v) for v in vs]
        x = vs[0]
        tol = TOLC * EPS * x.mag
        wild = x.wild
        with np.errstate(all="ignore"):
            if fn == "ifloor":
                # stable: a bilinear sample, continuous where fp32 rounds to the other integer
                near = np.zeros(x.a.shape, bool) if self.stable else _near_integer(x.a, tol)
                return Val(_ifloor(x.a), wild=wild | near | (np.abs(x.a) > 2.0 ** 30), ty="i")
            if fn == "floor":
                a = np.floor(x.a)
                return _finish(Val(a, None, np.abs(a) + ETA, wild | _near_integer(x.a, tol)))
            if fn == "abs":
                return Val(np.abs(x.a), None, x.mag, wild)
            if fn in ("min", "max"):
                y = vs[1]
                # NaN-propagating, as the interpreter (arith.minimumf/maximumf)
                a = (np.minimum if fn == "min" else np.maximum)(x.a, y.a)
                mag = np.where(x.a == a, x.mag, y.mag)
                return _finish(Val(a, None, mag, wild | y.wild))
            if fn == "pow":
                # exp2(y * log2(x)) in fp32: the product's rounding makes the error relative to |y log x|
                y = vs[1]
                a = np.power(x.a, y.a)
                ax = np.abs(x.a)
                rel = np.abs(y.a) * x.mag / ax + np.abs(np.log(ax)) * y.mag
                mag = np.abs(a) * (np.expm1(np.minimum(TOLC * EPS * rel, 700)) / (TOLC * EPS)
                                   + 2.0 * (1.0 + np.abs(y.a * np.log(ax)))) + _tiny()
                return _finish(Val(a, None, mag + ETA, wild | y.wild | (ax <= tol)))
            f = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
                 "rsqrt": lambda t: 1.0 / np.sqrt(t), "erf": _erf}[fn]
            a = f(x.a)
            aa = np.abs(a)
            # each builtin's own error (measured: exp 4.5, log 3.7, tanh 2.7, erf 5.8 eps at most,
            # sqrt and rsqrt 1.5, sin and cos 1 absolute), and exp may flush results below 2^-126
            if fn == "exp":
                mag = aa * (np.expm1(np.minimum(TOLC * EPS * x.mag, 700)) / (TOLC * EPS) + 2.0) + _tiny()
            elif fn == "log":
                mag = x.mag / np.abs(x.a) + aa + 2.0
                wild = wild | (np.abs(x.a) <= tol)
            elif fn == "sqrt":
                mag = np.where(x.a == 0, 0.0, x.mag / (2 * np.sqrt(np.abs(x.a)))) + aa
                wild = wild | ((np.abs(x.a) <= tol) & (x.mag > 0))
            elif fn == "rsqrt":
                mag = aa * (x.mag / (2 * np.abs(x.a)) + 1.0)
                wild = wild | (np.abs(x.a) <= tol)
            elif fn in ("sin", "cos"):
                mag = np.minimum(x.mag + aa + 1.0, 2.0 / (TOLC * EPS))
            elif fn == "tanh":
                mag = np.minimum((1.0 - a * a) * x.mag + aa + 1.0, 2.0 / (TOLC * EPS))
            else:  # erf
                mag = np.minimum(1.1284 * np.exp(-x.a * x.a) * x.mag + 2.0 * aa + 2.0, 2.0 / (TOLC * EPS))
        return _finish(Val(a, None, mag + ETA, wild))


def _erf(x):
    x = np.asarray(x, np.float64)
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x


class Cmp(E):
    ty = "b"

    def __init__(self, op, x, y):
        self.op, self.x, self.y = op, x, y

    def txt(self):
        return "(%s %s %s)" % (self.x.txt(), self.op, self.y.txt())

    def ev(self, ctx):
        x, y = self.x.ev(ctx), self.y.ev(ctx)
        f = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
             "!=": np.not_equal}[self.op]
        wild = x.wild | y.wild
        if x.ty == "f" or y.ty == "f":
            x, y = to_float(x), to_float(y)
            with np.errstate(all="ignore"):
                margin = np.abs(x.a - y.a)
                wild = wild | (np.isfinite(margin) & (margin <= TOLC * EPS * (x.mag + y.mag)))
        return Val(f(x.a, y.a), ty="b", wild=wild)


class Logic(E):
    ty = "b"

    def __init__(self, op, *args):
        self.op, self.args = op, list(args)

    def txt(self):
        if self.op == "!":
            return "(!%s)" % self.args[0].txt()
        return "(%s %s %s)" % (self.args[0].txt(), self.op, self.args[1].txt())

    def ev(self, ctx):
        vs = [a.ev(ctx) for a in self.args]
        if self.op == "!":
            return Val(~vs[0].a, ty="b", wild=vs[0].wild)
        f = np.logical_and if self.op == "&&" else np.logical_or
        return Val(f(vs[0].a, vs[1].a), ty="b", wild=vs[0].wild | vs[1].wild)


class Select(E):
    """select(c, x, y): never a structural zero (§6)."""

    def __init__(self, c, x, y):
        self.c, self.x, self.y = c, x, y
        self.ty = "i" if (x.ty == "i" and y.ty == "i") else "f"

    def txt(self):
        return "select(%s, %s, %s)" % (self.c.txt(), self.x.txt(), self.y.txt())

    def ev(self, ctx):
        c, x, y = self.c.ev(ctx), self.x.ev(ctx), self.y.ev(ctx)
        if self.ty == "f":
            x, y = to_float(x), to_float(y)
        w = c.wild | np.where(c.a, x.wild, y.wild)
        return Val(np.where(c.a, x.a, y.a), None, np.where(c.a, x.mag, y.mag), w, self.ty)


class Let(E):
    def __init__(self, binds, body):
        self.binds, self.body = binds, body  # binds: [(name, expr)]
        self.ty = body.ty

    def txt(self):
        return "(let %s in %s)" % (", ".join("%s = %s" % (n, e.txt()) for n, e in self.binds), self.body.txt())

    def ev(self, ctx):
        saved = dict(ctx.env)
        for n, e in self.binds:
            ctx.env[n] = e.ev(ctx)
        r = self.body.ev(ctx)
        ctx.env = saved
        return r


class Macro(E):
    """Printed as `text` (a call of a `def` function), evaluated as the expression it expands to
    (arguments bound with `let`, which keeps structural zeros as the expansion does)."""

    def __init__(self, text, expansion):
        self.text, self.exp = text, expansion
        self.ty = expansion.ty

    def txt(self):
        return self.text

    def ev(self, ctx):
        return self.exp.ev(ctx)


class Read(E):
    """x(subs) or x.zero/.clamp/.exclude(subs); the tensor is an input or an earlier definition."""

    def __init__(self, tensor, subs, mode=None, ty="f"):
        self.t, self.subs, self.mode, self.ty = tensor, list(subs), mode, ty

    def txt(self):
        m = "." + self.mode if self.mode else ""
        return "%s%s(%s)" % (self.t, m, ", ".join(s.txt() for s in self.subs))

    def ev(self, ctx):
        T = ctx.tensors[self.t]
        subs = [s.ev(ctx) for s in self.subs]
        if len(subs) != T.a.ndim:
            raise ModelError("rank of " + self.t)
        if T.a.size == 0:
            raise ModelError("read of empty tensor " + self.t)
        shape = np.broadcast_shapes((1,) * ctx.nd, *[s.a.shape for s in subs])
        idx = [np.broadcast_to(s.a, shape) for s in subs]
        wild = np.zeros(shape, bool)
        for s in subs:
            wild = wild | s.wild
        inr = np.ones(shape, bool)
        for d, ix in enumerate(idx):
            inr &= (ix >= 0) & (ix < T.a.shape[d])
        if self.mode is None and not np.all(inr | wild):
            raise ModelError("out-of-range plain read of %s" % self.t)
        cl = tuple(np.clip(ix, 0, T.a.shape[d] - 1) for d, ix in enumerate(idx))
        a, hz, mag, tw = T.a[cl], T.hz[cl], T.mag[cl], T.wild[cl]
        wild = wild | tw
        if self.mode in ("zero", "exclude"):
            oob = ~inr
            a = np.where(oob, np.zeros((), a.dtype), a)
            mag = np.where(oob, 0.0, mag)
            hz = hz | oob
            if self.mode == "exclude":
                if ctx.excl is None:
                    raise ModelError(".exclude outside a softmax")
                ctx.excl = ctx.excl | oob
        return Val(a, hz, mag, wild, T.ty)


class Reduce(E):
    """sum/mean/max/min over indices ixs = [(name, lo, hi, range text or None to infer it)]."""

    def __init__(self, kind, ixs, body):
        self.kind, self.ixs, self.body = kind, ixs, body
        self.ty = "f" if kind == "mean" else body.ty

    def txt(self):
        heads, bare = [], True
        for n, lo, hi, rt in self.ixs:
            if rt is None:
                heads.append(n)
            else:
                heads.append("%s in %s" % (n, rt))
                bare = False
        if bare and self.kind in ("max", "min"):
            # `max(j) -x` would be the call max(j) minus x: parenthesise the body
            return "(%s(%s) (%s))" % (self.kind, ", ".join(heads), self.body.txt())
        return "(%s(%s) %s)" % (self.kind, ", ".join(heads), self.body.txt())

    def ev(self, ctx):
        nd, k = ctx.nd, len(self.ixs)
        for n, lo, hi, _ in self.ixs:
            ctx.axes.append((n, lo, hi))
        saved_excl = ctx.excl
        if saved_excl is not None:
            ctx.excl = np.zeros((1,) * (nd + k), bool)
        try:
            b = self.body.ev(ctx)
            if self.kind == "mean":
                b = to_float(b)
        finally:
            del ctx.axes[nd:]
        lens = tuple(max(hi - lo, 0) for _, lo, hi, _ in self.ixs)
        full = np.broadcast_shapes(b.a.shape, (1,) * nd + lens)
        ax = tuple(range(nd, nd + k))
        n = int(np.prod(lens))

        def B(x):
            return np.broadcast_to(x, full)
        wild = B(b.wild).any(axis=ax)
        if saved_excl is not None:
            ctx.excl = saved_excl | B(ctx.excl).any(axis=ax)
        kind = self.kind
        if b.ty == "i":
            if kind == "sum":
                a = B(b.a).sum(axis=ax)
            elif kind == "max":
                a = B(b.a).max(axis=ax, initial=-2 ** 31)
            else:
                a = B(b.a).min(axis=ax, initial=2 ** 31 - 1)
            return Val(a, wild=wild, ty="i")
        with np.errstate(all="ignore"):
            if kind in ("sum", "mean"):
                a = B(b.a).sum(axis=ax)
                absum = np.abs(B(np.where(np.isfinite(b.a), b.a, 0.0))).sum(axis=ax)
                mag = B(b.mag).sum(axis=ax) + math.sqrt(max(n, 1)) * absum
                # any partial sum, in any order, is at most the sum of |terms|
                wild = wild | (absum + TOLC * EPS * mag > F32_MAX)
                if kind == "mean":
                    a = a / n if n else np.full(a.shape, np.nan)
                    mag = mag / max(n, 1) + np.abs(a)
            else:
                if n == 0:
                    return Val(np.full(full[:nd], -np.inf if kind == "max" else np.inf), wild=wild)
                a = (np.max if kind == "max" else np.min)(B(b.a), axis=ax)  # NaN-propagating
                mag = B(b.mag).max(axis=ax)
        return _finish(Val(a, None, mag + ETA, wild))


class Softmax:
    """The whole right-hand side of a definition: softmax(axes [where cond]) body."""

    def __init__(self, axes, body, where=None):
        self.axes, self.body, self.where = axes, body, where

    def txt(self):
        w = " where " + self.where.txt() if self.where is not None else ""
        return "softmax(%s%s) %s" % (", ".join(self.axes), w, self.body.txt())

    def ev(self, ctx, full):
        nd = ctx.nd
        ax = tuple(p for p, (n, _, _) in enumerate(ctx.axes) if n in self.axes)
        S = lambda x: np.broadcast_to(x, full)
        ctx.excl = np.zeros((1,) * nd, bool)
        if self.where is not None:
            m = self.where.ev(ctx)
            mask, mwild = S(m.a), S(m.wild)
        else:
            mask, mwild = np.ones(full, bool), np.zeros(full, bool)
        s = to_float(self.body.ev(ctx))
        excl = S(ctx.excl)
        ctx.excl = None
        sc, smag, swild = S(s.a), S(s.mag), S(s.wild)
        with np.errstate(all="ignore"):
            hidden = ~mask | excl                       # structural zeros
            U = ~hidden & (sc != -np.inf)               # the points that count
            anyu = U.any(axis=ax, keepdims=True)
            mx = np.max(np.where(U, sc, -np.inf), axis=ax, keepdims=True)   # NaN-propagating
            e = np.where(U, np.exp(sc - mx), 0.0)
            tot = e.sum(axis=ax, keepdims=True)
            p = np.where(anyu, e / tot, 0.0)            # 0 / NaN: a NaN row is NaN everywhere
            n = max(int(np.prod([full[i] for i in ax])), 1)
            # the largest error of any score of the row, and each point's distance to the max
            delta = TOLC * EPS * np.where(U, smag, 0.0).max(axis=ax, keepdims=True)
            dist = TOLC * EPS * np.abs(np.where(U, sc - mx, 0.0))
            bound = p * np.expm1(np.minimum(2 * delta + dist, 700.0)) + p * TOLC * EPS * (8.0 + math.sqrt(n))
            # with large score errors the arg max may move: a point may take up to exp(s - m + 2 delta)
            reach = np.where(U & (2 * delta > 0.25), np.minimum(1.0, np.exp(np.minimum(sc - mx + 2 * delta, 0.0))), 0.0)
            bound = np.minimum(np.maximum(bound, reach), 1.0)
            # the exps may flush below 2^-126 (TINY): a weight that small may be 0
            bound = bound + np.where(U, TOLC * EPS * _tiny(), 0.0)
            mag = bound / (TOLC * EPS) + ETA
            # a score that fp32 may make anything (NaN where fp64 has -inf, say) unsettles its row
            wild = (swild & ~hidden) | (mwild & ~excl)
            wild = S(wild.any(axis=ax, keepdims=True))
        return _finish(Val(p, hidden.copy(), mag, wild.copy()))


# --- kernels ----------------------------------------------------------------------------------


class Tensor:
    def __init__(self, name, dims, ty="f"):
        self.name, self.dims, self.ty = name, list(dims), ty  # dims: size names or int literals

    def decl(self):
        return "%s: %s[%s]" % (self.name, "f32" if self.ty == "f" else "i32", ", ".join(str(d) for d in self.dims))

    def shape(self, sizes):
        out = []
        for d in self.dims:
            if isinstance(d, int):
                out.append(d)
            else:
                v = 1
                for f in str(d).replace(" ", "").split("*"):
                    v *= int(f) if f.isdigit() else sizes[f]
                out.append(v)
        return tuple(out)


class Def:
    """name(indices) = rhs; indices = [(name, lo, hi, range_text or None)]."""

    def __init__(self, name, ixs, rhs, output=False):
        self.name, self.ixs, self.rhs, self.output = name, ixs, rhs, output

    def txt(self):
        hs = []
        for n, lo, hi, rt in self.ixs:
            hs.append(n if (rt is None or self.output) else "%s in %s" % (n, rt))
        return "%s(%s) = %s" % (self.name, ", ".join(hs), self.rhs.txt())


class Kernel:
    def __init__(self, name="fzk"):
        self.name = name
        self.inputs, self.outputs = [], []
        self.consts = []            # (name, value, ty, text)
        self.defs = []
        self.header = []            # import/def lines
        self.requires = []          # require lines
        self.sizes = {}
        self.features = set()

    def text(self):
        lines = list(self.header)
        outs = ", ".join(o.decl() for o in self.outputs)
        if len(self.outputs) > 1:
            outs = "(" + outs + ")"
        lines.append("kernel %s(%s) -> %s {" % (self.name, ", ".join(t.decl() for t in self.inputs), outs))
        if self.consts:
            lines.append("  const " + ", ".join("%s = %s" % (n, t) for n, v, ty, t in self.consts))
        for rq in self.requires:
            lines.append("  " + rq)
        for d in self.defs:
            lines.append("  " + d.txt())
        lines.append("}")
        return "\n".join(lines) + "\n"

    def evaluate(self, inputs):
        """The model's outputs: name -> Val over the output's shape."""
        ctx = Ctx(self.sizes, {n: (v, ty) for n, v, ty, _ in self.consts})
        for t in self.inputs:
            x = inputs[t.name]
            if t.ty == "f":
                a = x.astype(np.float64)
                ctx.tensors[t.name] = Val(a, mag=np.zeros(a.shape))   # inputs are exact
            else:
                ctx.tensors[t.name] = Val(x.astype(np.int64), ty="i")
        outs = {}
        for d in self.defs:
            ctx.axes = [(n, lo, hi) for n, lo, hi, _ in d.ixs]
            full = tuple(hi - lo for _, lo, hi, _ in d.ixs)
            if isinstance(d.rhs, Softmax):
                v = d.rhs.ev(ctx, full)
            else:
                v = d.rhs.ev(ctx)
            otype = next((o.ty for o in self.outputs if o.name == d.name), None)
            if otype == "f" or (otype is None and v.ty == "f"):
                v = to_float(v)
            # only a softmax's hidden points stay structural zeros when read from a definition
            hz = v.hz if isinstance(d.rhs, Softmax) else np.zeros((), bool)
            v = Val(*[np.broadcast_to(x, full).copy() for x in (v.a, hz, v.mag, v.wild)], ty=v.ty)
            ctx.tensors[d.name] = v
            if d.output:
                outs[d.name] = v
        return outs


# ----------------------------------------------------------------------------------------------
# Kernel generators
# ----------------------------------------------------------------------------------------------

def B_(op, x, y):
    return Bin(op, x, y)


def add(x, y):
    return Bin("+", x, y)


def sub(x, y):
    return Bin("-", x, y)


def mul(x, y):
    return Bin("*", x, y)


def div(x, y):
    return Bin("/", x, y)


def I(n):
    return Idx(n)


def ix(name, lo, hi, text, show=True):
    return (name, lo, hi, text if show else None)


class Gen:
    def __init__(self, seed, opts):
        self.seed = seed
        self.r = random.Random(seed)
        self.opts = opts
        self.k = Kernel()
        self.roles = {}          # input name -> role (how to fill it)
        self.nidx = 0
        self.defs_used = {}      # def function name -> text

    def chance(self, p):
        return self.r.random() < p

    def pick(self, xs, weights=None):
        return self.r.choices(xs, weights)[0] if weights else self.r.choice(xs)

    def size(self, big=False):
        if big:
            return self.pick([33, 40, 47, 64, 65, 100, 129, 150, 200, 257, 300])
        return self.pick([1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31])

    def add_input(self, name, dims, role, ty="f"):
        t = Tensor(name, dims, ty)
        self.k.inputs.append(t)
        self.roles[name] = role
        return t

    def const(self, name, value, ty):
        text = str(value) if ty == "i" else ftxt(value)
        self.k.consts.append((name, value, ty, text))
        return Const(name, ty)

    def use_def(self, name, text):
        if name not in self.defs_used:
            self.defs_used[name] = text
            self.k.header.append(text)

    def finish(self):
        return self.k


# --- family A: dense attention ------------------------------------------------------------------

def gen_attention(g):
    k, r = g.k, g.r
    k.features.add("attention")
    S = k.sizes
    layout = g.pick(["2d", "3d", "4d", "gqa", "mqa", "packed"], [2, 1, 3, 2, 1, 1])
    cross = g.chance(0.5)
    big = g.chance(0.55)              # more than 32 keys: the online softmax applies
    nq_name, nk_name = ("Nq", "Nk") if cross else ("N", "N")
    S[nk_name] = g.size(big)
    if cross:
        S[nq_name] = g.size(g.chance(0.3))
    S["D"] = g.pick([1, 2, 3, 4, 8, 16, 24])
    vdim = "D" if g.chance(0.6) else "E"
    S[vdim] = S.get(vdim) or g.pick([1, 2, 3, 5, 8, 16])
    # batch and head sizes, drawn now so that all sizes fit the work budget together
    bsz, hsz, hkv, grp = g.pick([1, 2, 3]), g.pick([1, 2, 3, 4]), g.pick([1, 2, 3]), g.pick([1, 2, 3])
    hd, nh = g.pick([1, 2, 4, 8]), g.pick([1, 2, 3])
    if layout == "packed":
        S["D"] = hd
    while True:
        rows = (bsz if layout in ("4d", "gqa", "mqa") else 1) * \
            ((hkv * grp) if layout == "gqa" else hsz if layout in ("3d", "4d", "mqa") else nh if layout == "packed" else 1)
        work = 2 * rows * S[nq_name] * S[vdim] * S[nk_name] ** 2 * (3 * S["D"] + 20)
        if work <= 4e7:
            break
        # shrink the largest of the sizes that do not decide the online softmax (the keys)
        cands = [("D", S["D"]), (vdim, S[vdim]), ("b", bsz), ("h", hsz), ("kv", hkv), ("g", grp), ("nh", nh)]
        if cross:
            cands.append((nq_name, S[nq_name]))
        name, val = max(cands, key=lambda c: c[1])
        if val <= 1:
            S[nk_name] = max(1, S[nk_name] * 2 // 3)
            continue
        if name in S:
            S[name] = max(1, val // 2)
            if name == "D" and layout == "packed":
                hd = S["D"]
        else:
            bsz, hsz, hkv, grp, nh = [max(1, x // 2) if n == name else x for n, x in
                                      (("b", bsz), ("h", hsz), ("kv", hkv), ("g", grp), ("nh", nh))]
        if vdim == "D":
            S["D"] = S[vdim]
    k.features.add("cross" if cross else "self")
    k.features.add("layout-" + layout)
    Nq, Nk = S[nq_name], S[nk_name]
    ri = ix("i", 0, Nq, "0.." + nq_name)
    rj = ix("j", 0, Nk, "0.." + nk_name)
    rd = ("d", 0, S["D"], "0..D")
    re = ix("e", 0, S[vdim], "0.." + vdim)
    pre, qpre, kpre = [], [], []     # free indices before (i, j); subscripts of q and of k/v
    if layout in ("3d", "4d", "gqa", "mqa"):
        if layout in ("4d", "gqa", "mqa"):
            S["B"] = bsz
            pre.append(ix("b", 0, S["B"], "0..B"))
            qpre.append(I("b"))
            kpre.append(I("b"))
        if layout == "gqa":
            S["Hkv"] = hkv
            S["Hq"] = S["Hkv"] * grp
            pre.append(ix("h", 0, S["Hq"], "0..Hq"))
            qpre.append(I("h"))
            kpre.append(Bin("/", I("h"), Bin("/", Size("Hq"), Size("Hkv"))))
            qdims, kdims = ["B", "Hq"], ["B", "Hkv"]
            k.features.add("gqa")
        elif layout == "mqa":
            S["H"] = hsz
            pre.append(ix("h", 0, S["H"], "0..H"))
            qpre.append(I("h"))
            qdims, kdims = ["B", "H"], ["B"]
        else:
            S["H"] = hsz
            pre.append(ix("h", 0, S["H"], "0..H"))
            qpre.append(I("h"))
            kpre.append(I("h"))
            qdims = kdims = (["B", "H"] if layout == "4d" else ["H"])
    elif layout == "packed":
        S["C"] = hd * nh
        qdims = kdims = []
    else:
        qdims = kdims = []
    if layout == "packed":
        hdc = g.const("hd", hd, "i")
        pre = [("h", 0, S["C"] // hd, "0..C / hd")]
        q = g.add_input("q", [nq_name, "C"], "q")
        kk = g.add_input("k", [nk_name, "C"], "k")
        v = g.add_input("v", [nk_name, "C"], "v")
        dot_ix = ("c", 0, hd, "0..hd")
        ch = add(mul(I("h"), hdc), I("c"))
        qread = Read("q", [I("i"), ch])
        kread = Read("k", [I("j"), ch])
        k.features.add("packed-heads")
    else:
        q = g.add_input("q", qdims + [nq_name, "D"], "q")
        kk = g.add_input("k", kdims + [nk_name, "D"], "k")
        v = g.add_input("v", kdims + [nk_name, vdim], "v")
        dot_ix = (rd[0], rd[1], rd[2], rd[3] if g.chance(0.5) else None)
        qread = Read("q", qpre + [I("i"), I("d")])
        kread = Read("k", kpre + [I("j"), I("d")])
    dot_kind = "mean" if g.chance(0.1) else "sum"
    prod = mul(qread, kread) if g.chance(0.8) else mul(kread, qread)
    dot = Reduce(dot_kind, [dot_ix], prod)
    # scale
    sc = g.pick(["rsqrt", "div", "const", "none", "pow"], [4, 1, 1, 2, 1])
    dsz = Const("hd", "i") if layout == "packed" else Size("D")
    if sc == "rsqrt":
        score = mul(Call("rsqrt", dsz), dot)
    elif sc == "div":
        score = div(dot, Call("sqrt", dsz))
    elif sc == "const":
        score = mul(g.const("scale", g.pick([0.125, 0.35, 1.5, 0.0625]), "f"), dot)
    elif sc == "pow":
        score = mul(Call("pow", dsz, Neg(FConst(0.5))), dot)
    else:
        score = dot
    k.features.add("scale-" + sc)
    # additive bias: first (a reduction's body extends to the end)
    bias = g.pick(["none", "tensor", "alibi", "table", "rowcol"], [5, 3, 1, 1, 1])
    hname = "Hq" if layout == "gqa" else "H"
    if bias == "tensor":
        g.add_input("bias", [nq_name, nk_name], "bias")
        score = add(Read("bias", [I("i"), I("j")]), score)
    elif bias == "alibi" and any(p[0] == "h" for p in pre) and layout != "packed":
        slope = Call("pow", FConst(2.0), div(mul(Neg(FConst(8.0)), add(I("h"), IConst(1))), Size(hname)))
        score = add(mul(slope, sub(I("j"), I("i"))), score)
    elif bias == "table":
        S["R"] = Nq + Nk - 1
        g.add_input("table", ["R"], "bias")
        score = add(Read("table", [add(sub(I("j"), I("i")), sub(Size(nq_name), IConst(1)))]), score)
    elif bias == "rowcol":
        g.add_input("rb", [nq_name], "bias")
        score = add(Read("rb", [I("i")]), score)
    else:
        bias = "none"
    k.features.add("bias-" + bias)
    # score transforms
    tr = g.pick(["none", "softcap", "clamp", "square"], [6, 2, 1, 1])
    if tr == "softcap":
        cap = g.const("cap", g.pick([5.0, 30.0, 50.0]), "f")
        score = mul(cap, Call("tanh", div(score, cap)))
    elif tr == "clamp":
        score = Call("max", score, Neg(FConst(g.pick([10.0, 1e4]))))
    elif tr == "square":
        score = mul(FConst(0.5), Call("abs", score))
    k.features.add("transform-" + tr)
    # mask
    conj = []
    opts_m = ["causal", "causal-br", "window", "ge", "eq", "lin", "tensor", "pad", "fmask"]
    nm = g.pick([0, 0, 1, 1, 1, 2])
    for _ in range(nm):
        m = g.pick(opts_m, [3, 1, 1, 1, 1, 1, 2, 2, 1])
        if m == "causal":
            c = Cmp("<=", I("j"), I("i"))
        elif m == "causal-br":
            c = Cmp("<=", I("j"), add(I("i"), sub(Size(nk_name), Size(nq_name))))
        elif m == "window":
            w = g.const("w", g.pick([1, 2, 4, 9]), "i") if not any(c[0] == "w" for c in k.consts) else Const("w", "i")
            c = Logic("&&", Cmp("<=", I("j"), I("i")), Cmp(">", I("j"), sub(I("i"), w)))
        elif m == "ge":
            c = Cmp(">=", I("j"), I("i"))
        elif m == "eq":
            c = Cmp("==", I("j"), I("i"))
        elif m == "lin":
            c = Cmp("<", mul(IConst(2), I("j")), add(I("i"), IConst(3)))
        elif m == "tensor":
            if "mask" not in g.roles:
                g.add_input("mask", [nq_name, nk_name], "mask", "i")
            c = Cmp("!=", Read("mask", [I("i"), I("j")], ty="i"), IConst(0))
        elif m == "pad":
            if "pad" not in g.roles:
                if pre and pre[0][0] == "b":
                    g.add_input("pad", ["B", nk_name], "pad", "i")
                else:
                    g.add_input("pad", [nk_name], "pad", "i")
            sub_ = [I("b"), I("j")] if (pre and pre[0][0] == "b") else [I("j")]
            c = Cmp("==", Read("pad", sub_, ty="i"), IConst(0))
        else:
            if "fm" not in g.roles:
                g.add_input("fm", [nq_name, nk_name], "fmask")
            c = Cmp(">", Read("fm", [I("i"), I("j")]), FConst(0.0))
        if g.chance(0.1):
            c = Logic("!", c)
        k.features.add("mask-" + m)
        conj.append(c)
    where = None
    for c in conj:
        where = c if where is None else Logic(g.pick(["&&", "&&", "||"]), where, c)
    # definitions
    dims_s = pre + [ri, rj]
    subs_s = [I(p[0]) for p in pre] + [I("i"), I("j")]
    inline = g.chance(0.3)
    lse = g.chance(0.15) and layout != "packed"
    if not inline or lse:
        # indices read bare by q or k may take their range from there; packed heads' h may not
        k.defs.append(Def("s", [(n, lo, hi, t if (g.chance(0.3) or layout == "packed") else None)
                                for n, lo, hi, t in dims_s], score))
        body = Read("s", subs_s)
    else:
        body = score
    p_out = g.chance(0.12) and layout != "packed"
    k.defs.append(Def("p", dims_s, Softmax(["j"], body, where), output=p_out))
    if p_out:
        k.outputs.append(Tensor("p", qdims + [nq_name, nk_name]))
    if layout == "packed":
        vread = Read("v", [I("j"), I("ch")])
        pread = Read("p", [Bin("/", I("ch"), Const("hd", "i")), I("i"), I("j")])
        odims = [ri, ("ch", 0, S["C"], "0..C")]
        oshape = [nq_name, "C"]
        k.requires.append("require C % hd == 0")
    else:
        vread = Read("v", kpre + [I("j"), I("e")])
        pread = Read("p", subs_s)
        odims = pre + [ri, re]
        oshape = qdims + [nq_name, vdim]
    form = g.pick(["pv", "vp", "scaled", "plus-inside", "outer"], [5, 2, 1, 1, 1])
    jx = (rj[0], rj[1], rj[2], rj[3] if g.chance(0.5) else None)
    if form == "pv":
        o = Reduce("sum", [jx], mul(pread, vread))
    elif form == "vp":
        o = Reduce("sum", [jx], mul(vread, pread))
    elif form == "scaled":
        o = add(mul(FConst(2.0), Reduce("sum", [jx], mul(vread, pread))), FConst(1.0))
    elif form == "plus-inside":
        o = Reduce("sum", [jx], add(mul(pread, vread), FConst(0.5)))
    else:
        o = mul(Reduce("sum", [jx], mul(pread, vread)), FConst(0.5))
    k.features.add("out-" + form)
    hpos = next((n for n, p in enumerate(pre) if p[0] == "h"), None)
    if hpos is not None and layout in ("3d", "4d", "mqa") and g.chance(0.25):
        # heads concatenated: o(.., i, c) = oh(.., c / E, i, c % E) over a product dimension H * E
        k.defs.append(Def("oh", [(n, lo, hi, t) for n, lo, hi, t in odims], o))
        hname_, esz = "H", S[vdim]
        cdim = ("c", 0, S["H"] * esz, "0..H * " + vdim)
        subs = [I(p[0]) for p in pre[:hpos]] + [Bin("/", I("c"), Size(vdim)), I("i"), Bin("%", I("c"), Size(vdim))]
        k.outputs.append(Tensor("o", qdims[:hpos] + [nq_name, "H * " + vdim]))
        k.defs.append(Def("o", pre[:hpos] + [ri, cdim], Read("oh", subs), output=True))
        k.features.add("concat-heads")
    else:
        k.outputs.append(Tensor("o", oshape))
        k.defs.append(Def("o", odims, o, output=True))
    if lse:
        # log-sum-exp of the raw scores: a let-bound max, then a sum over j
        sread = Read("s", subs_s)
        mx = Reduce("max", [rj], sread)
        m = Var("m", "f")
        val = Let([("m", mx)], add(m, Call("log", Reduce("sum", [rj], Call("exp", sub(sread, m))))))
        k.outputs.append(Tensor("lse", qdims + [nq_name]))
        k.defs.append(Def("lse", pre + [ri], val, output=True))
        k.features.add("lse")
    return k


# --- family B: windowed (dilated) attention ----------------------------------------------------

def gen_window(g):
    k, S = g.k, g.k.sizes
    k.features.add("window")
    two = g.chance(0.5)
    w = g.pick([1, 2, 3, 5]) if g.chance(0.3) else 3
    r = g.pick([1, 1, 2, 3])
    wc = g.const("w", w, "i")
    rc = g.const("r", r, "i")
    S["D"] = g.pick([1, 2, 4, 8])
    mode = g.pick(["zero", "exclude", "clamp"], [3, 3, 1])
    vmode = g.pick(["zero", "clamp"], [4, 1])
    k.features.add("window-%s-%dd" % (mode, 2 if two else 1))
    if two:
        S["Y"], S["X"] = g.pick([1, 2, 3, 5, 8]), g.pick([1, 2, 4, 6, 9])
        sp = [ix("y", 0, S["Y"], "0..Y"), ix("x", 0, S["X"], "0..X")]
        win = [("u", 0, w, "0..w"), ("t", 0, w, "0..w")]
        dims = ["Y", "X"]
        offs = [add(I("y"), mul(sub(I("u"), div(wc, IConst(2))), rc)),
                add(I("x"), mul(sub(I("t"), div(wc, IConst(2))), rc))]
    else:
        S["N"] = g.pick([1, 3, 7, 16, 40, 70])
        sp = [ix("i", 0, S["N"], "0..N")]
        win = [("u", 0, w, "0..w")]
        dims = ["N"]
        offs = [add(I("i"), mul(sub(I("u"), div(wc, IConst(2))), rc))]
    g.add_input("q", dims + ["D"], "q")
    g.add_input("k", dims + ["D"], "k")
    g.add_input("v", dims + ["D"], "v")
    spi = [I(p[0]) for p in sp]
    sc = Reduce("sum", [("c", 0, S["D"], "0..D" if g.chance(0.5) else None)],
                mul(Read("q", spi + [I("c")]), Read("k", offs + [I("c")], mode)))
    sc = mul(Call("rsqrt", Size("D")), sc)
    where = None
    if g.chance(0.3):
        where = Cmp("!=", I("u"), div(wc, IConst(2)))
        k.features.add("window-where")
    pd = sp + list(win)
    k.defs.append(Def("p", pd, Softmax([n for n, *_ in win], sc, where)))
    pr = Read("p", spi + [I(n) for n, *_ in win])
    o = Reduce("sum", [(n, lo, hi, t) for n, lo, hi, t in win], mul(pr, Read("v", offs + [I("e")], vmode)))
    k.outputs.append(Tensor("o", dims + ["D"]))
    k.defs.append(Def("o", sp + [ix("e", 0, S["D"], "0..D")], o, output=True))
    return k


# --- family C: bilinear sampling ---------------------------------------------------------------

def bilinear_expansion(g, vname, Hs, Ws, yexp, xexp, msub, dsub, tag):
    """bilinear_map(v, H, W, y, x, m, d) of dsl/std/sample.attn, expanded for the model: each
    corner's weight times its read inside the select, so a corner off the map adds exactly 0."""
    n = lambda s: "%s_%s" % (s, tag)
    y0, x0, wy, wx = Var(n("y0"), "i"), Var(n("x0"), "i"), Var(n("wy"), "f"), Var(n("wx"), "f")

    def corner(yy, xx, w):
        inside = Logic("&&", Logic("&&", Cmp(">=", yy, IConst(0)), Cmp("<", yy, Size(Hs))),
                       Logic("&&", Cmp(">=", xx, IConst(0)), Cmp("<", xx, Size(Ws))))
        return Select(inside, mul(w, Read(vname, [yy, xx, msub, dsub], "clamp")), FConst(0.0))
    one = FConst(1.0)
    body = add(add(add(corner(y0, x0, mul(sub(one, wy), sub(one, wx))),
                       corner(y0, add(x0, IConst(1)), mul(sub(one, wy), wx))),
                   corner(add(y0, IConst(1)), x0, mul(wy, sub(one, wx)))),
               corner(add(y0, IConst(1)), add(x0, IConst(1)), mul(wy, wx)))
    yv, xv = Var(n("y"), "f"), Var(n("x"), "f")
    return Let([(n("y"), yexp), (n("x"), xexp), (n("y0"), Call("ifloor", yv, stable=True)),
                (n("x0"), Call("ifloor", xv, stable=True)), (n("wy"), sub(yv, y0)), (n("wx"), sub(xv, x0))], body)


def gen_sample(g):
    k, S = g.k, g.k.sizes
    k.features.add("sample")
    S["H"], S["W"] = g.pick([1, 2, 3, 5, 7]), g.pick([1, 2, 4, 6])
    S["M"], S["D"] = g.pick([1, 2, 3]), g.pick([1, 2, 4, 8])
    S["Q"], S["P"] = g.pick([1, 3, 8, 20]), g.pick([1, 2, 4, 8])
    proj = g.chance(0.5)
    vname = "v"
    if proj:
        # the sampled map is a projection of features (attn-sample-order may sample first, §19)
        S["C"] = g.pick([1, 2, 3, 8])
        g.add_input("feat", ["H", "W", "C"], "v")
        g.add_input("wv", ["M", "D", "C"], "v")
        dot = Reduce("sum", [("c", 0, S["C"], "0..C" if g.chance(0.5) else None)],
                     mul(Read("feat", [I("hy"), I("wx"), I("c")]), Read("wv", [I("m"), I("d"), I("c")])))
        if g.chance(0.5):
            g.add_input("bv", ["M", "D"], "v")
            dot = add(Read("bv", [I("m"), I("d")]), dot)
            k.features.add("sample-projection-bias")
        k.defs.append(Def("val", [("hy", 0, S["H"], "0..H"), ("wx", 0, S["W"], "0..W"), ("m", 0, S["M"], "0..M"),
                                  ("d", 0, S["D"], "0..D")], dot))
        vname = "val"
        k.features.add("sample-projection")
    else:
        g.add_input("v", ["H", "W", "M", "D"], "v")
    g.add_input("loc", ["Q", "M", "P", 2], "coord")
    g.add_input("aw", ["Q", "M", "P"], "q")
    k.defs.append(Def("a", [ix("q", 0, S["Q"], "0..Q"), ix("m", 0, S["M"], "0..M"), ix("p", 0, S["P"], "0..P")],
                      Softmax(["p"], Read("aw", [I("q"), I("m"), I("p")]))))
    yexp = sub(mul(Read("loc", [I("q"), I("m"), I("p"), IConst(0)]), Size("H")), FConst(0.5))
    xexp = sub(mul(Read("loc", [I("q"), I("m"), I("p"), IConst(1)]), Size("W")), FConst(0.5))
    style = g.pick(["std", "inline"])
    k.features.add("sample-" + style)
    if style == "std":
        k.header.append("import sample")
        exp_ = bilinear_expansion(g, vname, "H", "W", yexp, xexp, I("m"), I("d"), "s")
        smp = Macro("bilinear_map(%s, H, W, %s, %s, m, d)" % (vname, yexp.txt(), xexp.txt()), exp_)
    else:
        # the language reference's inline form: .zero reads at ifloor'd coordinates
        y0, x0, wy, wx = Var("y0", "i"), Var("x0", "i"), Var("wy", "f"), Var("wx", "f")
        one = FConst(1.0)
        rd = lambda yy, xx: Read(vname, [yy, xx, I("m"), I("d")], "zero")
        body = add(add(add(mul(mul(sub(one, wy), sub(one, wx)), rd(y0, x0)),
                           mul(mul(sub(one, wy), wx), rd(y0, add(x0, IConst(1))))),
                       mul(mul(wy, sub(one, wx)), rd(add(y0, IConst(1)), x0))),
                   mul(mul(wy, wx), rd(add(y0, IConst(1)), add(x0, IConst(1)))))
        smp = Let([("yy", yexp), ("xx", xexp), ("y0", Call("ifloor", Var("yy", "f"), stable=True)), ("x0", Call("ifloor", Var("xx", "f"), stable=True)),
                   ("wy", sub(Var("yy", "f"), y0)), ("wx", sub(Var("xx", "f"), x0))], body)
    o = Reduce("sum", [("p", 0, S["P"], "0..P")], mul(Read("a", [I("q"), I("m"), I("p")]), smp))
    k.outputs.append(Tensor("o", ["Q", "M", "D"]))
    k.defs.append(Def("o", [ix("q", 0, S["Q"], "0..Q"), ix("m", 0, S["M"], "0..M"), ix("d", 0, S["D"], "0..D")],
                      o, output=True))
    return k


# --- family D: reductions and elementwise expressions -------------------------------------------

FUNCS = {
    "sq": ("def sq(x) = x * x", lambda a: mul(a, a)),
    "softcap": ("def softcap(x, c) = c * tanh(x / c)", None),
    "lerp": ("def lerp(a, b, t) = a + t * (b - a)", None),
    "relu": ("def relu(x) = max(x, 0.0)", lambda a: Call("max", a, FConst(0.0))),
}


class Scope:
    def __init__(self, idx):
        self.idx = list(idx)     # (name, sym, lo, hi)


def gen_misc(g):
    k, S = g.k, g.k.sizes
    k.features.add("misc")
    syms = g.r.sample(["N", "M", "K"], g.pick([1, 2, 2, 3]))
    for s in syms:
        S[s] = g.pick([1, 2, 3, 4, 5, 8, 13, 33])
    ninp = g.pick([1, 2, 2, 3])
    tensors = {}     # name -> (dims, ty)
    for n in range(ninp):
        rank = g.pick([1, 2, 2, 3]) if len(syms) > 1 else g.pick([1, 2])
        dims = [g.pick(syms) for _ in range(rank)]
        if g.chance(0.1):
            dims[-1] = 3
        name = "x%d" % n
        g.add_input(name, dims, "data")
        tensors[name] = (dims, "f")
    # every size symbol must be bound by an input
    bound = {d for dims, _ in tensors.values() for d in dims if isinstance(d, str)}
    for s in syms:
        if s not in bound:
            g.add_input("x%d" % len(tensors), [s], "data")
            tensors["x%d" % len(tensors)] = ([s], "f")
    if g.chance(0.3):
        dims = [g.pick(syms) for _ in range(g.pick([1, 2]))]
        g.add_input("mk", dims, "mask", "i")
        tensors["mk"] = (dims, "i")
    ndefs = g.pick([1, 1, 2, 2, 3])
    for n in range(ndefs):
        out = (n == ndefs - 1) or g.chance(0.3)
        rank = g.pick([0, 1, 1, 2, 2, 3])
        dsyms = [g.pick(syms) for _ in range(rank)]
        name = ("o%d" % n) if out else ("t%d" % n)
        scope = []
        ixs = []
        for d in dsyms:
            nm = fresh_index(g)
            scope.append((nm, d, 0, S[d]))
            ixs.append((nm, 0, S[d], "0.." + d))
        rhs = gen_expr(g, tensors, scope, g.pick([2, 3, 3, 4]))
        if rhs.ty != "f":
            rhs = add(rhs, FConst(0.0)) if g.chance(0.5) else mul(FConst(1.0), rhs)
        if scope and g.chance(0.3):
            # a softmax over one or two of the free indices, maybe masked; later reads of it are
            # structural zeros where the mask hides a point
            axes = g.r.sample([x[0] for x in scope], min(len(scope), g.pick([1, 1, 2])))
            where = gen_cond(g, tensors, scope) if g.chance(0.5) else None
            rhs = Softmax(axes, rhs, where)
            k.features.add("misc-softmax")
        if out:
            k.outputs.append(Tensor(name, dsyms))
        k.defs.append(Def(name, ixs, rhs, output=out))
        tensors[name] = (dsyms, "f")
    if g.chance(0.2):
        # an i32 output: a mask reduced over its other dimensions, or a reduction of the floor of
        # a bounded float (ifloor of NaN is -2^31: max(.., -8) keeps sums inside 32 bits)
        kind = g.pick(["sum", "max", "min"])
        i0 = fresh_index(g)
        if "mk" in tensors and g.chance(0.5):
            mdims = tensors["mk"][0]
            s0 = mdims[0]
            others = [(fresh_index(g), d) for d in mdims[1:]]
            body = Read("mk", [I(i0)] + [I(n) for n, _ in others], ty="i")
            rhs = Reduce(kind, [(n, 0, S[d], "0.." + d) for n, d in others], body) if others else body
        else:
            s0 = g.pick(syms)
            j0 = fresh_index(g)
            fl = Call("ifloor", mul(Call("tanh", gen_expr(g, tensors, [(j0, s0, 0, S[s0]), (i0, s0, 0, S[s0])], 2)), FConst(4.0)))
            rhs = Reduce(kind, [(j0, 0, S[s0], "0.." + s0)], Call("max", fl, Neg(IConst(8))))
        k.outputs.append(Tensor("c", [s0], "i"))
        k.defs.append(Def("c", [(i0, 0, S[s0], "0.." + s0)], rhs, output=True))
        k.features.add("int-output")
    return k


def _index_uses(e):
    out = []
    if isinstance(e, Idx):
        return [e.name]
    for c in _children(e):
        out += _index_uses(c)
    if isinstance(e, Reduce):
        bound = {n for n, *_ in e.ixs}
        out = [n for n in out if n not in bound]
    return out


def fresh_index(g):
    g.nidx += 1
    if g.nidx == 32:  # `i32` is the integer type's name, which attnc rightly refuses as an index
        g.nidx += 1
    return "i%d" % g.nidx


def gen_leaf(g, tensors, scope):
    """A read of a tensor (input or earlier definition); dims without a matching index get a new
    index, which the caller reduces. Returns (read, [(new index, size name)])."""
    name = g.pick(sorted(tensors))
    dims, ty = tensors[name]
    is_input = name in g.roles
    subs, new, computed = [], [], False
    for d in dims:
        if isinstance(d, int):
            subs.append(IConst(g.r.randrange(d)))
            continue
        cands = [s for s in scope if s[1] == d]
        if cands and g.chance(0.85):
            s = g.pick(cands)
            if g.chance(0.15):
                off = g.pick([-2, -1, 1, 2])
                e = add(I(s[0]), IConst(off)) if off > 0 else sub(I(s[0]), IConst(-off))
                if is_input:
                    subs.append(e)          # read with a boundary mode
                    computed = True
                else:
                    # a computed read of a definition, kept in range: (i + N + off) % N
                    subs.append(Bin("%", add(I(s[0]), add(Size(d), IConst(off))), Size(d)))
                    g.k.features.add("computed-read")
            else:
                subs.append(I(s[0]))
        else:
            nm = fresh_index(g)
            new.append((nm, d))
            subs.append(I(nm))
    mode = None
    if computed:
        mode = g.pick(["zero", "clamp"])
        g.k.features.add("read-" + mode)
    return Read(name, subs, mode, ty), new


def gen_expr(g, tensors, scope, depth):
    r = g.r
    S = g.k.sizes
    if depth <= 0 or g.chance(0.15):
        c = g.pick(["read", "const", "index"], [15, 2, 1])
        if c == "const":
            return FConst(g.pick([0.5, 2.0, 3.0, 0.25, 1e-3, 10.0, 0.1]))
        if c == "index" and scope:
            s = g.pick(scope)
            return add(I(s[0]), IConst(1)) if g.chance(0.5) else Size(s[1])
        rd, new = gen_leaf(g, tensors, scope)
        if new:
            kind = g.pick(["sum", "sum", "mean", "max", "min"])
            return Reduce(kind, [(n, 0, S[d], ("0.." + d) if g.chance(0.6) else None) for n, d in new], rd)
        return rd
    op = g.pick(["bin", "bin", "bin", "un", "un", "minmax", "select", "reduce", "reduce", "let", "func", "degenerate"])
    if op == "bin":
        o = g.pick(["+", "-", "*", "/"], [3, 2, 3, 1])
        return Bin(o, gen_expr(g, tensors, scope, depth - 1), gen_expr(g, tensors, scope, depth - 1))
    if op == "un":
        f = g.pick(["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "abs", "floor", "neg", "softcap", "pow"])
        a = gen_expr(g, tensors, scope, depth - 1)
        if f == "neg":
            return Neg(a)
        if f == "pow":
            form = g.pick(["square", "base2", "general"])
            if form == "square":
                return Call("pow", a, FConst(g.pick([2.0, 3.0, 0.5])))
            if form == "base2":
                return Call("pow", FConst(2.0), Call("min", a, FConst(20.0)) if g.chance(0.5) else a)
            return Call("pow", add(Call("abs", a), FConst(0.5)), gen_expr(g, tensors, scope, depth - 2))
        if f in ("log", "sqrt", "rsqrt") and g.chance(0.7):
            a = add(Call("abs", a), FConst(g.pick([1.0, 0.5, 1e-3])))
        if f == "exp" and g.chance(0.5):
            a = Call("min", a, FConst(30.0))
        if f == "softcap":
            cap = g.pick([5.0, 30.0])
            if g.chance(0.5):
                g.use_def("softcap", FUNCS["softcap"][0])
                return Macro("softcap(%s, %s)" % (a.txt(), ftxt(cap)), Let([("x_sc", a)], mul(FConst(cap), Call("tanh", div(Var("x_sc", "f"), FConst(cap))))))
            return mul(FConst(cap), Call("tanh", div(a, FConst(cap))))
        return Call(f, a)
    if op == "minmax":
        return Call(g.pick(["min", "max"]), gen_expr(g, tensors, scope, depth - 1), gen_expr(g, tensors, scope, depth - 1))
    if op == "select":
        c = gen_cond(g, tensors, scope)
        return Select(c, gen_expr(g, tensors, scope, depth - 1), gen_expr(g, tensors, scope, depth - 1))
    if op == "reduce":
        nnew = g.pick([1, 1, 1, 2])
        new = []
        syms = sorted({d for dims, _ in tensors.values() for d in dims if isinstance(d, str)})
        for _ in range(nnew):
            d = g.pick(syms)
            nm = fresh_index(g)
            rng = g.pick(["full", "full", "offset", "const"])
            if rng == "full":
                new.append((nm, d, 0, S[d], "0.." + d))
            elif rng == "offset":
                new.append((nm, d, 1, S[d], "1.." + d))   # not checked: a deliberate sub-range
            else:
                lo = g.pick([0, 1, 2])
                hi = lo + g.pick([0, 1, 3])
                new.append((nm, None, lo, hi, "%d..%d" % (lo, hi)))
        inner = scope + [(n, d, lo, hi) for n, d, lo, hi, _ in new if d is not None and lo == 0]
        body = gen_expr(g, tensors, inner if g.chance(0.85) else scope, depth - 1)
        g.k.features.add("reduce")
        # offset/const ranges of an index that the body reads bare would need the range to match:
        # such indices are kept out of `inner` above, so bodies read them only through constants.
        return Reduce(g.pick(["sum", "sum", "mean", "max", "min"]), [(n, lo, hi, t) for n, d, lo, hi, t in new], body)
    if op == "let":
        nm = "v%d" % g.nidx
        g.nidx += 1
        val = gen_expr(g, tensors, scope, depth - 1)
        v = Var(nm, val.ty)
        body = gen_expr(g, tensors, scope, depth - 2)
        g.k.features.add("let")
        return Let([(nm, val)], Bin(g.pick(["+", "*", "-"]), mul(v, v) if g.chance(0.5) else v, body))
    if op == "func":
        f = g.pick(["sq", "relu", "lerp", "gelu"])
        a = gen_expr(g, tensors, scope, depth - 1)
        g.k.features.add("def-" + f)
        if f in ("sq", "relu"):
            g.use_def(f, FUNCS[f][0])
            nm = "x_" + f
            return Macro("%s(%s)" % (f, a.txt()), Let([(nm, a)], FUNCS[f][1](Var(nm, a.ty))))
        if f == "lerp":
            g.use_def(f, FUNCS[f][0])
            b = gen_expr(g, tensors, scope, depth - 2)
            t = FConst(g.pick([0.25, 0.5, 0.75]))
            return Macro("lerp(%s, %s, %s)" % (a.txt(), b.txt(), t.txt()),
                         Let([("a_l", a), ("b_l", b)], add(Var("a_l", "f"), mul(t, sub(Var("b_l", "f"), Var("a_l", "f"))))))
        # gelu from nn: 0.5 * x * (1.0 + erf(x / sqrt(2)))
        if "import nn" not in g.k.header:
            g.k.header.insert(0, "import nn")
        return Macro("gelu(%s)" % a.txt(), Let([("x_g", a)], mul(mul(FConst(0.5), Var("x_g", "f")),
                                                                   add(FConst(1.0), Call("erf", div(Var("x_g", "f"), Call("sqrt", IConst(2))))))))
    # degenerate forms that IEEE arithmetic does not simplify: x - x, x * 0, x / x, max(x, x)
    a = gen_expr(g, tensors, scope, depth - 1)
    g.k.features.add("degenerate")
    if a.ty != "f":
        a = add(a, FConst(0.0))
    v = Var("z%d" % g.nidx, "f")
    g.nidx += 1
    form = g.pick(["sub", "mul0", "div", "max", "add0"])
    body = {"sub": sub(v, v), "mul0": mul(v, FConst(0.0)), "div": div(v, v), "max": Call("max", v, v),
            "add0": add(v, FConst(0.0))}[form]
    return Let([(v.name, a)], body)


def gen_cond(g, tensors, scope):
    c = g.pick(["idx", "mask", "float"])
    if c == "idx" and len(scope) >= 1:
        a = g.pick(scope)
        b = g.pick(scope)
        if a is b or g.chance(0.3):
            return Cmp("==", Bin("%", I(a[0]), IConst(2)), IConst(0))
        return Cmp(g.pick(["<", "<=", ">", "!="]), I(a[0]), I(b[0]))
    if c == "mask" and "mk" in tensors:
        rd, new = gen_leaf_named(g, "mk", tensors, scope)
        if rd is not None:
            return Cmp("!=", rd, IConst(0))
    rd, new = gen_leaf(g, tensors, scope)
    if new:
        rd = Reduce("sum", [(n, 0, g.k.sizes[d], "0.." + d) for n, d in new], rd)
    if rd.ty == "i":
        return Cmp(">", rd, IConst(0))
    return Cmp(g.pick([">", "<", ">="]), rd, FConst(g.pick([0.0, 0.5, -1.0])))


def gen_leaf_named(g, name, tensors, scope):
    dims, ty = tensors[name]
    subs = []
    for d in dims:
        cands = [s for s in scope if s[1] == d]
        if not cands:
            return None, None
        subs.append(I(g.pick(cands)[0]))
    return Read(name, subs, None, ty), []


FAMILIES = {"attention": gen_attention, "window": gen_window, "sample": gen_sample, "misc": gen_misc}
FAMILY_WEIGHTS = {"attention": 5, "window": 2, "sample": 1, "misc": 3}


def work_estimate(k):
    """Operations of the slowest runs: the unscheduled pipeline (`--schedule=none
    --online-softmax=off`), where every pure definition is inlined into its readers and every
    reduction (and a softmax's max and sum over its axes) recomputed at each point that reads it,
    plus the reference interpreter's evaluation of every definition."""
    defs = {d.name: d for d in k.defs}
    per_point = {}

    def npts(ixs):
        return int(np.prod([max(hi - lo, 1) for _, lo, hi, _ in ixs])) if ixs else 1

    def cost(e):
        if isinstance(e, Read) and e.t in per_point:
            return per_point[e.t] + sum(cost(x) for x in e.subs)
        c = 1 + sum(cost(x) for x in _children(e))
        if isinstance(e, Reduce):
            c = 1 + npts(e.ixs) * cost(e.body)
        return c
    total = 0
    for d in k.defs:
        if isinstance(d.rhs, Softmax):
            axes = [x for x in d.ixs if x[0] in d.rhs.axes]
            body = cost(d.rhs.body) + (cost(d.rhs.where) if d.rhs.where is not None else 0)
            per_point[d.name] = (2 * npts(axes) + 1) * body
        else:
            per_point[d.name] = cost(d.rhs)
        # the reference interpreter materialises every definition; the pipeline inlines locals
        # into the outputs
        total += npts(d.ixs) * per_point[d.name]
    return total


def _children(e):
    out = []
    for attr in ("x", "y", "c", "body", "exp"):
        v = getattr(e, attr, None)
        if isinstance(v, E):
            out.append(v)
    for attr in ("args", "subs"):
        for v in getattr(e, attr, []) or []:
            if isinstance(v, E):
                out.append(v)
    for _, v in getattr(e, "binds", []) or []:
        out.append(v)
    return out


WORK_LIMIT = 5e7


def generate(seed, opts):
    """The case's kernel: the first of seed's draws whose work fits WORK_LIMIT."""
    for attempt in range(50):
        g = Gen(seed if attempt == 0 else seed * 1000003 + attempt, opts)
        g.seed = seed
        fams = [f for f in FAMILIES if f in opts.families]
        fam = g.pick(fams, [FAMILY_WEIGHTS[f] for f in fams])
        k = FAMILIES[fam](g)
        k.features.add("family-" + fam)
        k.features |= expression_features(k)
        if work_estimate(k) <= WORK_LIMIT and not (k.features & set(opts.skip_feature)):
            return g, k
    raise ModelError("no kernel within the work limit and without the skipped features")


def expression_features(k):
    """fn-<builtin> for each builtin called, cmp-<op> for float comparisons, score-kq where a dot
    product reads the key first: names for --skip-feature."""
    out = set()

    def walk(e):
        if isinstance(e, Call):
            out.add("fn-" + e.fn)
        if isinstance(e, Cmp) and (e.x.ty == "f" or e.y.ty == "f"):
            out.add("cmp-" + e.op)
        if isinstance(e, Reduce) and isinstance(e.body, Bin) and e.body.op == "*" and \
                isinstance(e.body.x, Read) and e.body.x.t == "k" and isinstance(e.body.y, Read) and e.body.y.t == "q":
            out.add("score-kq")
        for c in _children(e):
            walk(c)
    for d in k.defs:
        if isinstance(d.rhs, Softmax):
            walk(d.rhs.body)
            if d.rhs.where is not None:
                walk(d.rhs.where)
        else:
            walk(d.rhs)
    return out


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------

SPECIALS = {
    # flavour: (probability, option that disables it)
    "nan": (0.2, "no_nan"),
    "inf": (0.2, "no_inf"),
    "huge": (0.12, "no_huge"),
    "tiny": (0.12, "no_tiny"),
    "equal-rows": (0.15, None),
    "large-scores": (0.15, "no_large_scores"),
    "masked-rows": (0.35, "no_masked_rows"),
    "neg-inf-bias": (0.3, "no_inf"),
}


def make_inputs(g, k):
    """Random inputs for the kernel's roles, with special values. Returns (arrays, flavours)."""
    rs = np.random.default_rng(g.seed * 7919 + 17)
    r = random.Random(g.seed * 104729 + 3)
    opts = g.opts
    S = k.sizes
    on = {f for f, (p, off) in SPECIALS.items() if not (off and getattr(opts, off)) and r.random() < p}
    arrays = {}
    for t in k.inputs:
        shape = t.shape(S)
        role = g.roles[t.name]
        if t.ty == "i":
            if role == "mask":      # non-zero attends
                dens = r.choice([0.1, 0.5, 0.9, 1.0])
                a = (rs.random(shape) < dens).astype(np.int32)
                if "masked-rows" in on and a.ndim >= 1 and a.size:
                    rows = rs.random(shape[:-1]) < 0.4 if a.ndim > 1 else rs.random(()) < 0.4
                    a[rows] = 0
            elif role == "pad":     # non-zero is padding
                dens = r.choice([0.0, 0.2, 0.5, 0.9])
                a = (rs.random(shape) < dens).astype(np.int32)
                if "masked-rows" in on and a.size:
                    if a.ndim > 1:
                        a[rs.random(shape[:-1]) < 0.5] = 1
                    else:
                        a[:] = 1
            else:
                a = rs.integers(-3, 4, shape).astype(np.int32)
            arrays[t.name] = a
            continue
        scale = r.choice([1.0, 1.0, 0.3, 3.0])
        if role == "coord":
            a = rs.uniform(-0.3, 1.3, shape)
            if r.random() < 0.3:  # exactly on pixel centres and borders
                a.flat[: a.size // 2] = rs.integers(0, 5, a.size // 2) / 4.0
        elif role == "fmask":
            a = rs.standard_normal(shape)
        else:
            a = rs.standard_normal(shape) * scale
        a = a.astype(np.float32)
        if role == "bias":
            if "neg-inf-bias" in on and a.size:
                a[rs.random(shape) < r.choice([0.1, 0.5])] = -np.inf
            if "masked-rows" in on and not opts.no_inf and a.ndim >= 2:
                a[rs.random(shape[:-1]) < 0.4] = -np.inf
        if "large-scores" in on and role in ("q", "k"):
            d = max(S.get("D", 1), 1)
            target = 10.0 ** r.uniform(12, 37)
            a = (a * np.float32(math.sqrt(target / d))).astype(np.float32)
        if "equal-rows" in on and a.ndim >= 1 and a.size and r.random() < 0.6:
            if r.random() < 0.3:
                a[...] = a.flat[0]
            else:
                rows = rs.random(shape[:-1]) < 0.5 if a.ndim > 1 else True
                a[rows] = a[rows][..., :1] if a.ndim > 1 else a[0]
        if a.size and role != "coord" or (role == "coord" and r.random() < 0.3):
            for flav, vals in (("nan", [np.nan]), ("inf", [np.inf, -np.inf]),
                               ("huge", [1e30, -1e30, 3e38, -3e38, 1e20]),
                               ("tiny", [1e-40, -1e-40, 1e-45, 1.17549435e-38, -0.0, 1e-30])):
                if flav in on and a.size and r.random() < 0.5:
                    n = r.choice([1, 1, 2, 3])
                    for _ in range(n):
                        a.flat[r.randrange(a.size)] = r.choice(vals)
            if "tiny" in on and r.random() < 0.15:
                a = (a * np.float32(1e-39)).astype(np.float32)
            if "huge" in on and r.random() < 0.1:
                with np.errstate(over="ignore"):
                    a = np.clip(a.astype(np.float64) * 1e30, -3e38, 3e38).astype(np.float32)
        arrays[t.name] = a
    return arrays, on


# ----------------------------------------------------------------------------------------------
# Running attn-run and comparing
# ----------------------------------------------------------------------------------------------

CPU_RULES = ["cpu-online", "cpu-dense", "cpu-window", "cpu-sample", "cpu-generic"]
TILES = [1, 2, 3, 5, 16, 17, 32, 64, 100, 128, 256]
# Compiled-side refusals that docs/language.md documents for programs the reference accepts.
DOCUMENTED_COMPILED_ERRORS = []
# Reference-side refusals the documentation lists (§7, §17): the compiled side computes something.
DOCUMENTED_REF_ERRORS = ["ifloor of NaN", "division by zero"]


class Run:
    def __init__(self, label, args, rc, out, err, secs, timeout=False):
        self.label, self.args, self.rc, self.out, self.err, self.secs, self.timeout = label, args, rc, out, err, secs, timeout

    def status(self):
        """ok | na (schedule does not apply) | refused (clean error) | raw (Halide error) | crash | timeout"""
        if self.timeout:
            return "timeout"
        if self.rc == 0:
            return "ok"
        if self.rc < 0 or self.rc > 1:
            return "crash"
        e = self.err
        if "does not apply to kernel" in e:
            return "na"
        if ("error: Halide:" in e or "Internal Error" in e or "Error at " in e or "terminate called" in e
                or "Assertion" in e or "LLVM ERROR" in e or "Stack dump" in e):
            return "raw"
        if "error:" in e:
            return "refused"
        return "crash"

    def message(self):
        lines = [l for l in self.err.splitlines() if "error" in l.lower()]
        return (lines[0] if lines else self.err.strip().splitlines()[-1] if self.err.strip() else "(no message)")[:300]


def attn_run(binary, workdir, kernel_file, inputs, outputs, extra, label, timeout):
    args = [binary, kernel_file]
    for n in inputs:
        args += ["--input", "%s=%s.npy" % (n, n)]
    for n, f in outputs.items():
        args += ["--output", "%s=%s" % (n, f)]
    args += extra
    t0 = time.time()
    for attempt in range(6):
        try:
            p = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=timeout)
            return Run(label, args, p.returncode, p.stdout, p.stderr, time.time() - t0)
        except subprocess.TimeoutExpired:
            return Run(label, args, None, "", "timeout after %d s" % timeout, time.time() - t0, timeout=True)
        except OSError as e:  # the binary is being relinked by a build: wait for it
            if attempt == 5:
                raise
            print("numerics fuzz: cannot run %s (%s); retrying in 30 s" % (binary, e), file=sys.stderr, flush=True)
            time.sleep(30)


def _match(x, y, tol):
    with np.errstate(all="ignore"):
        both_nan = np.isnan(x) & np.isnan(y)
        eq = x == y
        close = np.isfinite(x) & np.isfinite(y) & (np.abs(x - y) <= tol)
    return both_nan | eq | close


def classify(r, c):
    if np.isnan(r):
        return "ref NaN, compiled %s" % ("inf" if np.isinf(c) else "finite")
    if np.isinf(r):
        return "ref %sinf, compiled %s" % ("+" if r > 0 else "-", "NaN" if np.isnan(c) else "%sinf" % ("+" if c > 0 else "-") if np.isinf(c) else "finite")
    if np.isnan(c):
        return "ref finite, compiled NaN"
    if np.isinf(c):
        return "ref finite, compiled inf"
    return "value"


def compare_output(name, ref, comp, model, perturb=None, calib=None, any_nonfinite=False):
    """Problems of one compiled output against the reference (and the model's bounds).

    any_nonfinite: a non-finite reference element is matched by any non-finite value (the
    sampling order's documented difference, docs/language.md §19), not only by the same one."""
    if comp.shape != ref.shape:
        return [("shape", "%s: shape %s, reference %s" % (name, comp.shape, ref.shape), {})]
    if ref.dtype.kind == "i":
        bad = (comp != ref) & ~model.wild
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            return [("int-value", "%s%s: %d element(s); compiled %d, reference %d" % (name, list(map(int, i)), int(bad.sum()), comp[i], ref[i]), {})]
        return []
    r = ref.astype(np.float64)
    c = comp.astype(np.float64)
    if perturb is not None:
        c = perturb(c, model)
    with np.errstate(all="ignore"):
        tol = TOLC * EPS * model.mag + REF_REL * np.abs(np.where(np.isfinite(r), r, 0.0)) + 1e-44
        ok = model.wild | _match(c, r, tol)
        if any_nonfinite:
            ok |= ~np.isfinite(r) & ~np.isfinite(c)
        if calib is not None:
            fin = np.isfinite(r) & np.isfinite(c) & ~model.wild
            if fin.any():
                scale = np.abs(r[fin]).max() + 1e-30
                calib.setdefault("used", []).append(float((np.abs(c - r)[fin] / tol[fin]).max()))
                calib.setdefault("rel", []).append(float(np.median(tol[fin]) / scale))
    if ok.all():
        return []
    bad = np.argwhere(~ok)
    kinds = {}
    for idx in map(tuple, bad):
        kd = classify(r[idx], c[idx])
        if kd == "value":
            ratio = abs(c[idx] - r[idx]) / tol[idx] if tol[idx] > 0 else np.inf
        else:
            ratio = np.inf
        ent = kinds.setdefault(kd, {"count": 0, "worst": None, "ratio": -1.0})
        ent["count"] += 1
        if ratio > ent["ratio"] or ent["worst"] is None:
            ent["ratio"] = ratio
            ent["worst"] = idx
    probs = []
    for kd, ent in kinds.items():
        i = ent["worst"]
        semantics = ""
        detail = ("%s: %d element(s); e.g. %s%s: compiled %r, reference %r, bound %.3g%s" %
                  (name, ent["count"], name, list(map(int, i)), float(c[i]), float(r[i]), float(tol[i]), semantics))
        probs.append((kd, detail, {"ratio": ent["ratio"]}))
    return probs


def check_model(name, ref, model):
    """The model's reference-semantics values against the interpreter: a check of both."""
    if ref.dtype.kind == "i":
        bad = (model.a != ref)
    else:
        r = ref.astype(np.float64)
        with np.errstate(all="ignore"):
            m = model.a.astype(np.float32).astype(np.float64)
            tol = 4 * REF_REL * np.abs(np.where(np.isfinite(r), r, 0)) + 1e-9 * TOLC * EPS * model.mag + 1e-44
            bad = ~_match(m, r, tol)
            # fp64 ties in comparisons or floors may go either way in two fp64 evaluations
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        return [("oracle", "%s: %d element(s) differ between the shadow model and the reference; e.g. %s%s: "
                 "model %r, reference %r" % (name, int(bad.sum()), name, list(map(int, i)), float(model.a[i]), float(ref[i])), {})]
    return []


# ----------------------------------------------------------------------------------------------
# One case
# ----------------------------------------------------------------------------------------------


class CaseResult:
    def __init__(self, seed):
        self.seed = seed
        self.problems = []     # (class, detail, variant label)
        self.refused = None    # clean refusal message
        self.skipped = None    # documented difference, not compared
        self.variants = 0
        self.features = set()
        self.flavours = set()
        self.secs = 0.0
        self.dir = None
        self.elements = self.wild = self.nonfinite = 0
        self.calib = {}        # max |compiled - reference| / bound, and median bound / max |reference|
        self.perturbed = 0     # the self-test's altered outputs
        self.inputs = []       # input names
        self.variant_args = {}  # variant label -> attn-run options
        self.kernel_text = None

    @property
    def failed(self):
        return bool(self.problems)


def variant_args(label_extra):
    return label_extra


def repro_flags(opts):
    flags = []
    for f in ("no_nan", "no_inf", "no_huge", "no_tiny", "no_large_scores", "no_masked_rows", "strict_denormals"):
        if getattr(opts, f):
            flags.append("--" + f.replace("_", "-"))
    for f in opts.skip_feature:
        flags.append("--skip-feature=" + shlex.quote(f))
    if set(opts.families) != set(FAMILIES):
        flags.append("--families=" + ",".join(opts.families))
    if opts.quick:
        flags.append("--quick")
    return flags


def run_case(seed, opts, workroot, perturb=None, res=None):
    """Generates, runs and compares one case. `perturb(res)` (the self-test) makes a function that
    alters each compiled output before the comparison."""
    res = res or CaseResult(seed)
    if perturb is not None:
        perturb = perturb(res)
    t0 = time.time()
    g, k = None, None
    try:
        g, k = generate(seed, opts)
        arrays, flav = make_inputs(g, k)
    except ModelError as e:
        res.problems.append(("generator", "generator: %s" % e, "-"))
        return res
    res.features = set(k.features)
    res.flavours = set(flav)
    d = tempfile.mkdtemp(prefix="numerics-%d-" % seed, dir=workroot)
    res.dir = d
    src = k.text()
    res.kernel_text = src
    with open(os.path.join(d, "kernel.attn"), "w") as f:
        f.write(src)
    for n, a in arrays.items():
        np.save(os.path.join(d, n + ".npy"), a)
    attnrun = os.path.join(opts.bin, "attn-run")
    inames = [t.name for t in k.inputs]
    res.inputs = inames
    onames = [t.name for t in k.outputs]
    T = opts.timeout

    # the model first: it may say the reference must refuse (documented)
    model, ref_expect_error = None, None
    try:
        model = k.evaluate(arrays)
    except RefError as e:
        ref_expect_error = str(e)
    except ModelError as e:
        res.problems.append(("generator", "model: %s" % e, "-"))
    except Exception as e:  # a bug of the model: report it, never hide it
        res.problems.append(("generator", "model raised %s: %s" % (type(e).__name__, e), "-"))

    ref = attn_run(attnrun, d, "kernel.attn", inames, {n: "ref_%s.npy" % n for n in onames}, ["--reference"], "reference", T)
    rs = ref.status()
    if rs != "ok":
        msg = ref.message()
        if rs == "refused" and ref_expect_error and any(s in msg for s in DOCUMENTED_REF_ERRORS):
            res.skipped = "reference: " + msg
            res.secs = time.time() - t0
            return res
        # does the compiled side refuse too? (a front-end error: both refuse)
        comp = attn_run(attnrun, d, "kernel.attn", inames, {}, ["--schedule=auto"], "auto", T)
        cs = comp.status()
        if rs == "refused" and cs == "refused":
            res.refused = msg
        elif rs == "refused" and cs == "ok":
            if any(s in msg for s in DOCUMENTED_REF_ERRORS):
                res.skipped = "reference: " + msg
            else:
                res.problems.append(("ref-refuses", "the reference refuses (%s) but compiled code runs" % msg, "auto"))
        else:
            res.problems.append(("ref-" + rs, "reference %s: %s" % (rs, msg), "reference"))
        if cs in ("raw", "crash", "timeout"):
            res.problems.append(("compiled-" + cs, "auto: %s" % comp.message(), "auto"))
        res.secs = time.time() - t0
        return res
    refs = {n: np.load(os.path.join(d, "ref_%s.npy" % n)) for n in onames}
    for n in onames:
        res.elements += refs[n].size
        if refs[n].dtype.kind == "f":
            res.nonfinite += int((~np.isfinite(refs[n])).sum())
        if model is not None:
            res.wild += int(np.broadcast_to(model[n].wild, refs[n].shape).sum())
    if model is not None:
        for n in onames:
            for p in check_model(n, refs[n], model[n]):
                res.problems.append((p[0], p[1], "model"))
    elif ref_expect_error:
        res.problems.append(("oracle", "the model expects the reference to refuse (%s) but it ran" % ref_expect_error, "model"))

    # variants: auto and none, every rule that applies, and the online softmax's tile and off switch
    r = random.Random(seed * 31 + 7)
    variants = [("auto", ["--schedule=auto"]), ("none", ["--schedule=none"])]
    rules = list(CPU_RULES)
    r.shuffle(rules)
    done = []
    chosen = None
    queue = variants + [(rule, ["--schedule=" + rule]) for rule in rules]
    extra_added = False
    while queue:
        label, extra = queue.pop(0)
        if chosen and label == chosen:
            continue  # auto picked it: the same code
        run = attn_run(attnrun, d, "kernel.attn", inames, {n: "%s_%s.npy" % (label, n) for n in onames}, extra, label, T)
        res.variant_args[label] = extra
        st = run.status()
        if st == "na":
            continue
        res.variants += 1
        if opts.quick and label in CPU_RULES:
            # one rule besides auto's: the others are left out
            queue = [q for q in queue if q[0] not in CPU_RULES]
        if label == "auto" and st == "ok":
            for line in run.err.splitlines():
                if line.startswith("schedule: "):
                    chosen = line.split()[1]
        if label == "auto" and st == "ok" and "sample-projection" in res.features and not opts.quick:
            queue.append(("auto-sample-first", ["--schedule=auto", "--sample-order=sample-first"]))
            queue.append(("auto-project-first", ["--schedule=auto", "--sample-order=project-first"]))
        if label == "auto" and not extra_added and st == "ok" and chosen == "cpu-online":
            extra_added = True
            tiles = r.sample(TILES, 1 if opts.quick else 2)
            queue.append(("auto-tile%d" % tiles[0], ["--schedule=auto", "--online-tile=%d" % tiles[0]]))
            if not opts.quick:
                queue.append(("generic-tile%d" % tiles[1], ["--schedule=cpu-generic", "--online-tile=%d" % tiles[1]]))
                queue.append(("auto-unfused", ["--schedule=auto", "--online-softmax=off"]))
                queue.append(("none-unfused", ["--schedule=none", "--online-softmax=off"]))
        if st != "ok":
            msg = run.message()
            if st == "refused" and any(s in msg for s in DOCUMENTED_COMPILED_ERRORS):
                continue
            res.problems.append(("compiled-" + st, "%s: %s" % (label, msg), label))
            continue
        for n in onames:
            comp = np.load(os.path.join(d, "%s_%s.npy" % (label, n)))
            if model is None:
                continue
            # Sampling first may turn one non-finite value into another (docs/language.md §19):
            # every variant that may have sampled first is held to non-finite-where-the-reference-
            # is; the written order (auto-project-first) to the exact NaN/inf kinds.
            reorder = "sample-projection" in res.features and label != "auto-project-first"
            for p in compare_output(n, refs[n], comp, model[n], perturb, res.calib, any_nonfinite=reorder):
                res.problems.append((p[0], p[1], label))
    res.secs = time.time() - t0
    return res


def save_artifact(res, opts, argv0):
    """Moves a failing case's directory to the artifacts folder, with a report and repro.sh."""
    os.makedirs(opts.artifacts, exist_ok=True)
    dst = os.path.join(opts.artifacts, "numerics-%d" % res.seed)
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(res.dir, dst)
    repro = "%s %s --bin %s --seed %d %s" % (shlex.quote(sys.executable), shlex.quote(os.path.abspath(argv0)),
                                              shlex.quote(os.path.abspath(opts.bin)), res.seed,
                                              " ".join(repro_flags(opts)))
    with open(os.path.join(dst, "repro.sh"), "w") as f:
        f.write("#!/bin/sh\n# regenerates and reruns this case (same kernel, inputs and variants)\n" + repro.strip() + "\n")
        # and the raw commands: the reference and the first failing variant
        labels = [p[2] for p in res.problems if p[2] in res.variant_args]
        run = os.path.join(os.path.abspath(opts.bin), "attn-run")
        ins = " ".join("--input %s=%s.npy" % (n, n) for n in res.inputs)
        f.write("# or by hand, in this directory:\n")
        f.write("# %s kernel.attn %s --reference\n" % (run, ins))
        if labels:
            f.write("# %s kernel.attn %s %s   (variant %s)\n" % (run, ins, " ".join(res.variant_args[labels[0]]), labels[0]))
    os.chmod(os.path.join(dst, "repro.sh"), 0o755)
    with open(os.path.join(dst, "report.txt"), "w") as f:
        f.write("seed %d\nfeatures: %s\nspecial values: %s\n" % (res.seed, " ".join(sorted(res.features)),
                                                                  " ".join(sorted(res.flavours)) or "none"))
        for cls, detail, label in res.problems:
            f.write("[%s] %s: %s\n" % (cls, label, detail))
    return dst, repro.strip()


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="directory of attn-run (the normal build's bin)")
    ap.add_argument("--seconds", type=float, default=60, help="fuzz until this many seconds have passed")
    ap.add_argument("--seed", type=int, help="run this one case only")
    ap.add_argument("--seeds", help="run the cases A..B-1 (A:B)")
    ap.add_argument("--start-seed", type=int, help="first seed of a timed run (default: random, printed)")
    ap.add_argument("--artifacts", default="fuzz-artifacts", help="failing cases go to ARTIFACTS/numerics-<seed>")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per attn-run call")
    ap.add_argument("--quick", action="store_true", help="fewer variants per case (auto, none, one more rule that applies, one key tile)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="kernel families: " + ",".join(FAMILIES))
    ap.add_argument("--no-nan", action="store_true", help="no NaN inputs")
    ap.add_argument("--no-inf", action="store_true", help="no +-inf inputs (nor -inf additive masks)")
    ap.add_argument("--no-nonfinite", action="store_true", help="--no-nan --no-inf")
    ap.add_argument("--no-huge", action="store_true", help="no huge values (1e20 .. 3e38)")
    ap.add_argument("--no-tiny", action="store_true", help="no tiny or denormal values")
    ap.add_argument("--no-large-scores", action="store_true", help="no q, k scaled to scores of 1e12 .. 1e37")
    ap.add_argument("--no-masked-rows", action="store_true", help="no fully masked rows")
    ap.add_argument("--finite-only", action="store_true",
                    help="ordinary values only: --no-nonfinite --no-huge --no-tiny --no-large-scores")
    ap.add_argument("--jobs", type=int, default=1, help="cases run at a time")
    ap.add_argument("--skip-feature", action="append", default=[], metavar="F",
                    help="generate no kernel with this feature (repeatable), to fuzz past a known class: "
                         "fn-log, fn-erf, fn-pow, cmp->=, cmp-<=, score-kq, mask-eq, family-misc, layout-gqa, ... "
                         "(report.txt lists a case's features)")
    ap.add_argument("--strict-denormals", action="store_true",
                    help="exp, pow and softmax weights may not flush results below 2^-126 to 0")
    ap.add_argument("--keep-going", action="store_true", help="a timed run does not stop at the first failure")
    ap.add_argument("--max-failures", type=int, default=20, help="a --keep-going run stops after this many")
    ap.add_argument("--self-test", type=int, metavar="N",
                    help="run N finite cases with each compiled output perturbed by 8x its bound at one element: "
                         "every perturbation must be reported")
    ap.add_argument("--perturb-rel", type=float,
                    help="with --self-test: move the element by this fraction of the output's largest magnitude "
                         "instead (how small a bug the bounds still see)")
    ap.add_argument("--calibrate", action="store_true",
                    help="print per case how much of its error bound the compiled outputs use, and how wide it is")
    ap.add_argument("--print-kernel", action="store_true", help="print each case's kernel")
    ap.add_argument("--workdir", help="keep case directories here (default: a temporary directory)")
    o = ap.parse_args(argv)
    if o.no_nonfinite or o.finite_only:
        o.no_nan = o.no_inf = True
    if o.finite_only:
        o.no_huge = o.no_tiny = o.no_large_scores = True
    global STRICT_DENORMALS
    STRICT_DENORMALS = o.strict_denormals
    o.families = [f for f in o.families.split(",") if f]
    for f in o.families:
        if f not in FAMILIES:
            ap.error("unknown family '%s'" % f)
    return o


def perturb_one(res, rel=None):
    """The self-test's deliberate bug: in each compiled output, one finite, non-wild element moved
    by 8 times its bound, or (rel) by rel times the output's largest finite magnitude."""
    def f(c, model):
        c = c.copy()
        with np.errstate(all="ignore"):
            tol = TOLC * EPS * model.mag + REF_REL * np.abs(np.where(np.isfinite(c), c, 0.0)) + 1e-44
            fin = np.isfinite(c) & ~np.broadcast_to(model.wild, c.shape) & np.isfinite(tol)
            cand = np.argwhere(fin)
        if len(cand):
            i = tuple(cand[len(cand) // 2])
            if rel is None:
                c[i] = c[i] + 8 * tol[i] + 8 * np.spacing(np.float32(abs(c[i])))
            else:
                c[i] = c[i] + rel * max(np.abs(c[fin]).max(), 1e-30)
            res.perturbed += 1
        return c
    return f


def report_case(res, opts, stats, refusals, classes):
    """Prints one case's line (and its problems); returns True if it failed."""
    line = "seed %d: %s, %d variants, %.1f s" % (res.seed, ",".join(sorted(f[7:] for f in res.features if f.startswith("family-"))) or "?",
                                                 res.variants, res.secs)
    if res.flavours:
        line += " [%s]" % " ".join(sorted(res.flavours))
    if res.elements:
        line += " (%d elements, %d non-finite, %d wild)" % (res.elements, res.nonfinite, res.wild)
    if opts.calibrate and res.calib.get("used"):
        line += " error/bound max %.2g, median bound/max|ref| %.2g" % (max(res.calib["used"]), np.median(res.calib["rel"]))
        stats.setdefault("used", []).extend(res.calib["used"])
    if opts.print_kernel and res.kernel_text:
        line = res.kernel_text + line
    if opts.self_test:
        if res.perturbed and not any(p[0] not in ("generator",) for p in res.problems):
            res.problems.append(("self-test", "%d perturbed output(s) were not all reported" % res.perturbed, "-"))
        elif res.perturbed and all(p[0] not in ("generator", "oracle") for p in res.problems):
            caught = len({(p[2], p[1].split(":")[0]) for p in res.problems})
            if caught < res.perturbed:
                res.problems = [("self-test", "%d of %d perturbed variants reported" % (caught, res.perturbed), "-")]
            else:
                res.problems = []
                line += ": perturbation caught in all %d" % res.perturbed
        elif not res.perturbed:
            line += ": nothing to perturb"
    stats["cases"] += 1
    stats["variants"] += res.variants
    for key in ("elements", "nonfinite", "wild"):
        stats[key] = stats.get(key, 0) + getattr(res, key)
    if res.refused:
        stats["refused"] += 1
        key = res.refused.split(": error: ")[-1][:100]
        refusals[key] = refusals.get(key, 0) + 1
        line += ": refused (%s)" % res.refused
    elif res.skipped:
        stats["skipped"] += 1
        line += ": skipped (%s)" % res.skipped
    if not res.failed:
        print(line, flush=True)
        return False
    stats["failed"] += 1
    dst, repro = save_artifact(res, opts, argv0=__file__)
    print(line + ": FAILED", flush=True)
    for cls, detail, label in res.problems:
        print("  [%s] %s: %s" % (cls, label, detail), flush=True)
        classes.setdefault(cls, set()).add(res.seed)
    print("  artifacts: %s\n  repro: %s" % (dst, repro), flush=True)
    return True


def main(argv):
    opts = parse_args(argv)
    # attn-run runs in each case's own directory, so a relative --bin (make fuzz passes build/bin)
    # must be made absolute first.
    opts.bin = os.path.abspath(opts.bin)
    if not os.access(os.path.join(opts.bin, "attn-run"), os.X_OK):
        print("numerics fuzz: no attn-run in %s (build first)" % opts.bin, file=sys.stderr)
        return 2
    workroot = opts.workdir or tempfile.mkdtemp(prefix="attnc-numerics-fuzz-")
    os.makedirs(workroot, exist_ok=True)
    if opts.self_test:
        opts.no_nan = opts.no_inf = opts.no_huge = opts.no_tiny = opts.no_large_scores = True
    deadline = None
    if opts.seed is not None:
        seeds = iter([opts.seed])
    elif opts.seeds:
        a, b = opts.seeds.split(":")
        seeds = iter(range(int(a), int(b)))
    else:
        start = opts.start_seed if opts.start_seed is not None else random.SystemRandom().randrange(1 << 30)
        if opts.self_test:
            seeds = iter(range(start, start + opts.self_test))
        else:
            seeds = _count(start)
            deadline = time.time() + opts.seconds
            print("numerics fuzz: %g s from seed %d, %d job(s) (reproduce a case with --seed N)"
                  % (opts.seconds, start, opts.jobs), flush=True)
    stats = {"cases": 0, "variants": 0, "refused": 0, "skipped": 0, "failed": 0}
    refusals, classes = {}, {}
    t_start = time.time()
    stop = False

    def work(seed):
        res = CaseResult(seed)
        perturb = (lambda r: perturb_one(r, opts.perturb_rel)) if opts.self_test else None
        return run_case(seed, opts, workroot, perturb, res)

    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        pending = set()
        while True:
            while not stop and len(pending) < opts.jobs:
                if deadline is not None and time.time() >= deadline:
                    stop = True
                    break
                seed = next(seeds, None)
                if seed is None:
                    stop = True
                    break
                pending.add(pool.submit(work, seed))
            if not pending:
                break
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: f.result().seed):
                res = fut.result()
                failed = report_case(res, opts, stats, refusals, classes)
                if res.dir and not opts.workdir:
                    shutil.rmtree(res.dir, ignore_errors=True)
                if failed and deadline is not None and not opts.keep_going:
                    stop = True
                if stats["failed"] >= opts.max_failures:
                    stop = True
    if not opts.workdir:
        shutil.rmtree(workroot, ignore_errors=True)
    el = time.time() - t_start
    print("numerics fuzz: %d cases, %d compiled variants in %.0f s; %d refused by attnc, %d skipped (documented "
          "differences), %d failed" % (stats["cases"], stats["variants"], el, stats["refused"], stats["skipped"],
                                       stats["failed"]))
    print("  reference outputs: %d elements, %d of them NaN or inf, %d where fp32 may give anything (not compared)"
          % (stats.get("elements", 0), stats.get("nonfinite", 0), stats.get("wild", 0)))
    if stats.get("used"):
        u = np.array(stats["used"])
        print("  error/bound over all outputs: max %.3g, 99%% %.3g, median %.3g" % (u.max(), np.percentile(u, 99), np.median(u)))
    for m, n in sorted(refusals.items(), key=lambda x: -x[1]):
        print("  refused %dx: %s" % (n, m))
    for cls, ss in sorted(classes.items()):
        print("  class %s: seeds %s" % (cls, " ".join(map(str, sorted(ss)[:20]))))
    return 1 if stats["failed"] else 0


def _count(start):
    while True:
        yield start
        start += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
