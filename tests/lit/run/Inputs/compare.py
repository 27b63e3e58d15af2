# Prints the max abs difference between two .npy files and fails above a tolerance.
import sys
import numpy as np

a, b, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
err = float(np.abs(a.astype(np.float64) - b).max())
print(f"max-abs-error-ok {err <= tol}")
sys.exit(0 if err <= tol else 1)
