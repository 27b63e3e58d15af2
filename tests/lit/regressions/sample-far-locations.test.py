# Checks sample-far-locations.test's outputs: far points exactly 0, near points as the reference.
import sys
import numpy as np

t = sys.argv[1]
for kernel in ("map", "zero"):
    rows = lambda name: np.load(f"{t}/{kernel}-{name}.npy").reshape(11, -1)
    ref = rows("ref")
    print(kernel, "ref far points", "zero" if (ref[1:-1] == 0).all() else ref[1:-1].tolist())
    for schedule in ("auto", "none"):
        o = rows(schedule)
        far = "zero" if (o[1:-1] == 0).all() else o[1:-1].tolist()
        near = "ok" if np.allclose(o[[0, -1]], ref[[0, -1]], rtol=1e-6, atol=1e-6) else (o - ref)[[0, -1]].tolist()
        print(kernel, schedule, "far points", far, "near points", near)
