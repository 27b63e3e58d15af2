# Writes the inputs of reference.test and numpy's expected results (fp64 / exact int32).
import sys
import numpy as np

out = sys.argv[1]
a = np.array([-7, 7, 0, -8, 9], dtype=np.int32)
b = np.array([2, -2, 3, -3, 1, -1], dtype=np.int32)
np.save(f"{out}/a.npy", a)
np.save(f"{out}/b.npy", b)
np.save(f"{out}/b0.npy", np.array([1, 0, 1, 2, 3], dtype=np.int32))
np.save(f"{out}/q_ref.npy", np.floor_divide.outer(a, b).astype(np.int32))  # floor, like the language
np.save(f"{out}/r_ref.npy", np.mod.outer(a, b).astype(np.int32))           # divisor's sign
np.save(f"{out}/h_ref.npy", a / 2.0)

rng = np.random.default_rng(11)
s = rng.standard_normal((4, 6), dtype=np.float32)
keep = (rng.random((4, 6)) < 0.6).astype(np.int32)
keep[0, 0] = 1
keep[2, :] = 0  # a fully masked row
np.save(f"{out}/s.npy", s)
np.save(f"{out}/keep.npy", keep)
sc = np.where(keep != 0, s.astype(np.float64), -np.inf)
mx = sc.max(-1, keepdims=True)
e = np.where(keep != 0, np.exp(sc - np.where(np.isfinite(mx), mx, 0)), 0.0)
z = e.sum(-1, keepdims=True)
np.save(f"{out}/p_ref.npy", np.divide(e, z, out=np.zeros_like(e), where=z > 0))

np.save(f"{out}/x.npy", np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
np.save(f"{out}/x2.npy", np.zeros((2, 2), dtype=np.float32))
np.save(f"{out}/x_i32.npy", np.array([1, 2, 3, 4], dtype=np.int32))
