# check_npy.py OUT.npy EXPECTED.npy DTYPE TOL: OUT must have dtype DTYPE, EXPECTED's shape, no
# NaN, and be within TOL of EXPECTED (0 means exactly equal).
import sys
import numpy as np

a, b, dtype, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3], float(sys.argv[4])
assert a.dtype == np.dtype(dtype), f"dtype {a.dtype} != {dtype}"
assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
assert not np.isnan(a.astype(np.float64)).any(), "NaN in output"
err = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
ok = err <= tol if tol > 0 else bool((a == b).all())
print(f"check {dtype} ok {ok}")
sys.exit(0 if ok else 1)
