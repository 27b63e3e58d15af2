# compare_special.py OUT.npy EXPECTED.npy TOL [FIRST]: OUT has NaN, +inf and -inf exactly where
# EXPECTED has them, and is within TOL of it everywhere else; with FIRST, only rows FIRST.. of the
# second innermost dimension are compared.
import sys
import numpy as np

a = np.load(sys.argv[1]).astype(np.float64)
b, tol = np.load(sys.argv[2]), float(sys.argv[3])
assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
if len(sys.argv) > 4:
    a, b = a[..., int(sys.argv[4]):, :], b[..., int(sys.argv[4]):, :]
same = all((f(a) == f(b)).all() for f in [np.isnan, np.isposinf, np.isneginf])
fin = np.isfinite(b)
err = float(np.abs(a[fin] - b[fin]).max()) if fin.any() else 0.0
print(f"special-ok {same and err <= tol}")
sys.exit(0 if same and err <= tol else 1)
