"""attnc kernels as PyTorch operators: load an AOT-built module, or compile a variant just in time.

    import attnc, torch
    sdpa = attnc.compile("dsl/variants/sdpa.attn")          # JIT, cached on disk
    o = sdpa(q, k, v)                                        # torch tensors (or numpy arrays)
    lib = attnc.load("build/.../sdpa_torch.so")              # attnc_add_library(... TORCH)
    o = torch.ops.attnc.sdpa(q, k, v)

Every kernel is a real operator (`torch.ops.attnc.<name>`, registered through the dispatcher
with a CPU and a Meta kernel), so torch.compile and torch.export trace through it. The build
this package uses is found from ATTNC_BUILD_DIR, else the repository's `build/` (the set-up
installs this package in editable mode into the project's .venv).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["AttncError", "Kernel", "Library", "compile", "load", "tune", "config"]


class AttncError(RuntimeError):
    """attnc failed: a compile error (file:line:col: error: ...), a link or load failure."""


_CONFIG_NAME = "attnc-python.json"
_config_cache: Optional[Dict[str, Any]] = None


def config() -> Dict[str, Any]:
    """The attnc this package uses: the compiler, headers, libraries and PyTorch's link flags.

    A build writes them to <build>/attnc-python.json, `cmake --install` to
    <prefix>/share/attnc/attnc-python.json. Looked up, first found wins: ATTNC_BUILD_DIR,
    ATTNC_PREFIX, the repository's build/ (when the package is used from its source tree, as the
    set-up installs it), then the prefix of an `attnc` on PATH."""
    global _config_cache
    if _config_cache is not None:
        return _config_cache
    installed = os.path.join("share", "attnc", _CONFIG_NAME)
    candidates = []
    if os.environ.get("ATTNC_BUILD_DIR"):
        candidates.append(Path(os.environ["ATTNC_BUILD_DIR"]) / _CONFIG_NAME)
    if os.environ.get("ATTNC_PREFIX"):
        candidates.append(Path(os.environ["ATTNC_PREFIX"]) / installed)
    candidates.append(Path(__file__).resolve().parents[2] / "build" / _CONFIG_NAME)
    on_path = shutil.which("attnc")
    if on_path:
        candidates.append(Path(on_path).resolve().parents[1] / installed)
    for c in candidates:
        if c.is_file():
            with open(c) as f:
                _config_cache = json.load(f)
            _config_cache["_path"] = str(c)
            return _config_cache
    raise AttncError(
        "attnc: no attnc build or installation with PyTorch found (looked for "
        + ", ".join(str(c) for c in candidates)
        + "); run `make build`, or set ATTNC_BUILD_DIR to a build directory or ATTNC_PREFIX to an "
        "installation made with PyTorch present"
    )


def _torch():
    import torch  # imported lazily: `import attnc` works without PyTorch

    return torch


# --------------------------------------------------------------------------------------------
# Loading modules


class Library:
    """A loaded operator module: one attribute per kernel (the torch.ops.attnc operator)."""

    def __init__(self, path: str, kernels: Sequence[Dict[str, Any]]):
        self.path = path
        self.kernels = {k["name"]: k for k in kernels}
        torch = _torch()
        for name in self.kernels:
            setattr(self, name, getattr(torch.ops.attnc, name))

    def __repr__(self) -> str:
        return f"attnc.Library({self.path!r}, kernels={sorted(self.kernels)})"


_loaded: Dict[str, Library] = {}


def load(path: Union[str, os.PathLike]) -> Library:
    """Loads a module built by attnc_add_library(... TORCH) and returns its kernels.

    Loading the same file again returns the same Library (PyTorch's operators are
    process-wide). A kernel whose name another module already registered is an error."""
    path = str(Path(path).resolve())
    if path in _loaded:
        return _loaded[path]
    if not os.path.isfile(path):
        raise AttncError(f"attnc.load: no such file: {path}")
    torch = _torch()
    try:
        torch.ops.load_library(path)
    except OSError as e:
        raise AttncError(f"attnc.load: cannot load {path}: {e}") from e
    handle = ctypes.CDLL(path)  # the module dlopen already loaded: same handle, its own symbols
    try:
        errors_fn = handle.attnc_torch_registration_errors
        kernels_fn = handle.attnc_torch_kernels_json
    except AttributeError as e:
        raise AttncError(f"attnc.load: {path} is not an attnc operator module") from e
    errors_fn.restype = ctypes.c_char_p
    kernels_fn.restype = ctypes.c_char_p
    errors = errors_fn().decode()
    if errors:
        raise AttncError(f"attnc.load: {path}: {errors.strip()}")
    kernels = json.loads(kernels_fn().decode())
    if not kernels:
        raise AttncError(f"attnc.load: {path} registered no kernel")
    lib = Library(path, kernels)
    _loaded[path] = lib
    return lib


# --------------------------------------------------------------------------------------------
# Just in time


class Kernel:
    """One compiled kernel, callable on torch tensors or numpy arrays (inputs in the kernel's
    declaration order, or by name). Returns one tensor, or a tuple for several outputs; numpy
    inputs give numpy outputs."""

    def __init__(self, lib: Library, name: str, info: Dict[str, Any]):
        self.library = lib
        self.name = name
        self.info = info
        self.op = getattr(lib, name)
        self._args = [p["arg"] for p in info["inputs"]]

    @property
    def schedule(self) -> str:
        return self.info.get("schedule", "")

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = list(args)
            for a in self._args[len(args):]:
                if a not in kwargs:
                    raise TypeError(f"{self.name}() missing input '{a}'")
                args.append(kwargs.pop(a))
            if kwargs:
                raise TypeError(f"{self.name}() got unexpected inputs {sorted(kwargs)}")
        numpy_in = any(type(a).__module__ == "numpy" for a in args)
        if numpy_in:
            torch = _torch()
            args = [torch.from_numpy(a) if type(a).__module__ == "numpy" else a for a in args]
        out = self.op(*args)
        if numpy_in:
            out = tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()
        return out

    def __repr__(self) -> str:
        return f"attnc.Kernel(torch.ops.attnc.{self.name}: {self.info['schema']})"


def _cache_root() -> Path:
    if os.environ.get("ATTNC_CACHE_DIR"):
        return Path(os.environ["ATTNC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attnc"


def _file_id(path: str) -> str:
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _digest(text: Union[str, bytes]) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _run(cmd: Sequence[str], what: str, alias: Optional[Tuple[str, str]] = None) -> str:
    """Runs cmd; its stdout, or AttncError with its messages (alias: (path, name) shown instead)."""
    r = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()
        if alias:
            msg = msg.replace(*alias)
        raise AttncError(f"{what} failed:\n{msg}" if msg else f"{what} failed ({r.returncode})")
    return r.stdout


def _deps_ok(manifest: Dict[str, Any]) -> bool:
    for path, digest in manifest.get("imports", {}).items():
        try:
            with open(path, "rb") as f:
                if _digest(f.read()) != digest:
                    return False
        except OSError:
            return False
    return True


def _read_depfile(path: Path, exclude: str) -> Dict[str, str]:
    """The files a depfile names (Make syntax: `target: dep dep \\`, `\\ ` a blank in a
    name, `$$` a dollar), with their digests."""
    text = path.read_text().replace("\\\n", " ")
    m = re.search(r"(?<!\\):\s", text)
    deps = re.findall(r"(?:\\.|[^\s\\])+", text[m.end():] if m else "")
    out = {}
    for d in deps:
        d = re.sub(r"\\(.)", r"\1", d).replace("$$", "$")
        if os.path.abspath(d) == exclude:
            continue
        try:
            with open(d, "rb") as f:
                out[os.path.abspath(d)] = _digest(f.read())
        except OSError as e:
            raise AttncError(f"attnc.compile: cannot read {d}, which the source imports: {e}") from e
    return out


def compile(
    source_or_path: Union[str, os.PathLike],
    kernel: Optional[str] = None,
    target: str = "host",
    schedule: str = "auto",
    defines: Optional[Mapping[str, Any]] = None,
    sizes: Optional[Mapping[str, int]] = None,
    include: Sequence[Union[str, os.PathLike]] = (),
    cache: bool = True,
    schedule_params: Optional[Mapping[str, int]] = None,
) -> Kernel:
    """Compiles one kernel of an attnc source (a path, or the source text itself) for `target`
    and returns it as a callable operator.

    The module is cached under ATTNC_CACHE_DIR (default ~/.cache/attnc), keyed by the source, the
    files it imports, the options, the target and the attnc and PyTorch builds; a later call, in
    this process or another, loads it without compiling. `defines` are the -D overrides, `sizes`
    the typical sizes the cost-model passes use (--sizes), `include` the -I directories,
    `schedule_params` knob values for the schedule rule (--schedule-params, as attn-tune's
    database records them, e.g. {"online.bf16_dot": 0})."""
    cfg = config()
    src = os.fspath(source_or_path)
    path: Optional[str] = None
    if isinstance(source_or_path, os.PathLike) or ("\n" not in src and src.endswith(".attn")):
        if not os.path.isfile(src):
            raise AttncError(f"attnc.compile: no such file: {src}")
        path = os.path.abspath(src)
        with open(path) as f:
            text = f.read()
    else:
        text = src
    opts = {
        "kernel": kernel,
        "target": target,
        "schedule": schedule,
        "defines": sorted(
            f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for k, v in (defines or {}).items()
        ),
        "sizes": sorted(f"{k}={v}" for k, v in (sizes or {}).items()),
        "schedule_params": sorted(f"{k}={v}" for k, v in (schedule_params or {}).items()),
        "include": [os.path.abspath(i) for i in include],
        "path": path,
    }
    tools = [_file_id(cfg["attnc"]), _file_id(cfg["torch_library"]), _file_id(cfg["runtime_library"])]
    # attnc's `auto` takes a tuned schedule from the database beside the source when there is one
    # (attnc.tune writes it): its contents, or its absence, are part of the key.
    tuning = None
    if path is not None and schedule == "auto":
        db = os.path.join(os.path.dirname(path), "attnc-tuning.json")
        if os.path.isfile(db):
            with open(db, "rb") as f:
                tuning = _digest(f.read())
    # The entry of this source and these options; its manifest names the module built from the
    # imported files as they were, which a lookup checks (an edited import is a miss).
    key = _digest(json.dumps({"source": text, "options": opts, "tools": tools, "tuning": tuning,
                              "torch": cfg["torch_version"]}))
    entry = _cache_root() / key[:2] / key
    manifest_path = entry / "manifest.json"
    if cache and manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text())
            if _deps_ok(manifest) and (entry / manifest["module"]).is_file():
                return _kernel_of(entry / manifest["module"], manifest["kernel"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is rebuilt

    with tempfile.TemporaryDirectory(prefix="attnc-") as tmp:
        tmpd = Path(tmp)
        alias = None
        if path is None:  # messages name it <source>, not the temporary file
            src_file = tmpd / "kernel.attn"
            src_file.write_text(text)
            alias = (str(src_file), "<source>")
        else:
            src_file = Path(path)
        names, imports = _front_end(cfg, src_file, opts, alias, tmpd / "ast.d")
        if kernel is None:
            if len(names) != 1:
                raise AttncError(
                    f"attnc.compile: the source defines kernels {names}; name one with kernel=..."
                )
            kernel = names[0]
        elif kernel not in names:
            raise AttncError(f"attnc.compile: no kernel '{kernel}' in the source (it has {names})")
        # The operator's name: the kernel's, made unique by everything the module depends on, so
        # that other options or an edited import give another operator, never a clash with one
        # this process has loaded.
        fn = f"{kernel}_{_digest(key + json.dumps(imports, sort_keys=True))[:12]}"
        prefix = tmpd / fn
        cmd = [cfg["attnc"], str(src_file), "--emit=lib", "-o", str(prefix), f"--kernel={kernel}",
               f"--function-name={fn}", f"--target={target}", f"--schedule={schedule}"]
        for d in opts["defines"]:
            cmd += ["-D", d]
        if opts["sizes"]:
            cmd.append("--sizes=" + ",".join(opts["sizes"]))
        if opts["schedule_params"]:
            cmd.append("--schedule-params=" + ",".join(opts["schedule_params"]))
        for i in opts["include"]:
            cmd += ["-I", i]
        if fn not in _by_op:
            _run(cmd, "attnc", alias)
            module = tmpd / f"{fn}.so"
            _link_module(cfg, prefix, module)
            # Committed whole under a rename. An entry that already holds this operator (another
            # process built it meanwhile) is kept and ours dropped; only an entry built from other
            # imports is moved aside and removed.
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=_ensure_dir(entry.parent)))
            shutil.copy2(module, staging / module.name)
            (staging / "manifest.json").write_text(json.dumps(
                {"kernel": fn, "module": module.name, "imports": imports, "options": opts}, indent=1))
            if _holds(entry, fn):
                shutil.rmtree(staging, ignore_errors=True)
            elif entry.exists():
                old = Path(tempfile.mkdtemp(prefix=".old-", dir=entry.parent))
                try:
                    os.rename(entry, old / "entry")
                except OSError:
                    pass
                shutil.rmtree(old, ignore_errors=True)
            if staging.exists():
                try:
                    os.rename(staging, entry)
                except OSError:  # another process committed first
                    shutil.rmtree(staging, ignore_errors=True)
            if not _holds(entry, fn):
                # Another process committed a build from other imports meanwhile: this process
                # keeps its own module beside the entry.
                aside = entry.parent / f"{fn}.so"
                shutil.copy2(module, aside)
                return _kernel_of(aside, fn)
    if fn in _by_op:
        return _by_op[fn]
    return _kernel_of(entry / f"{fn}.so", fn)


_by_op: Dict[str, Kernel] = {}


def _holds(entry: Path, fn: str) -> bool:
    """Whether a cache entry is complete and holds operator `fn`."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("kernel") == fn and (entry / manifest.get("module", "")).is_file()


def _kernel_of(module: Path, fn: str) -> Kernel:
    if fn not in _by_op:
        lib = load(module)
        _by_op[fn] = Kernel(lib, fn, lib.kernels[fn])
    return _by_op[fn]


def _ensure_dir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _front_end(cfg: Dict[str, Any], src_file: Path, opts: Dict[str, Any], alias, depfile: Path):
    """The kernels a source defines (from attnc's printed AST, `kernel NAME @line:col`) and the
    files it imports with their digests (from attnc's depfile)."""
    cmd = [cfg["attnc"], str(src_file), "--emit=ast", f"--depfile={depfile}"]
    for d in opts["defines"]:
        cmd += ["-D", d]
    for i in opts["include"]:
        cmd += ["-I", i]
    names = re.findall(r"^kernel (\w+) @", _run(cmd, "attnc", alias), flags=re.M)
    return names, _read_depfile(depfile, os.path.abspath(src_file))


def _link_module(cfg: Dict[str, Any], prefix: Path, module: Path) -> None:
    """Compiles the operator module's source against the kernel and links it (the same command
    attnc_add_library(... TORCH) has CMake run)."""
    cmd = [cfg["cxx"], "-shared", "-fPIC", "-O2", "-std=c++17", "-fvisibility=hidden",
           "-fvisibility-inlines-hidden",
           f'-DATTNC_KERNEL_HEADER="{prefix.name}.attnc.h"', f"-I{prefix.parent}"]
    cmd += [f"-I{d}" for d in cfg["include_dirs"]]
    cmd += [cfg["module_source"], "-o", str(module), f"{prefix}.a", cfg["torch_library"],
            cfg["runtime_library"]]
    cmd += cfg["torch_link"] + ["-Wl,--exclude-libs,ALL", "-lpthread", "-ldl"]
    _run(cmd, "linking the operator module")


# --------------------------------------------------------------------------------------------
# Tuning


def _follow(p: subprocess.Popen, budget: float, progress: bool, lines: list) -> None:
    """Reads attn-tune's output into `lines`, drawing the progress bar or echoing it."""
    best = None
    bar = progress and sys.stderr.isatty()
    assert p.stdout is not None
    for line in p.stdout:
        lines.append(line)
        m = re.match(r"\s*\[\s*([\d.]+) s\].*?([\d.]+) ms\s*$", line)
        if m:
            ms = float(m.group(2))
            best = ms if best is None else min(best, ms)
        if not progress:
            continue
        if bar and m:
            done = min(float(m.group(1)) / max(budget, 1e-9), 1.0)
            width = 30
            sys.stderr.write(f"\rattn-tune [{'#' * int(done * width):<{width}}] {float(m.group(1)):5.1f}/{budget:g} s"
                             f"  best {best:.3f} ms")
            sys.stderr.flush()
        elif not bar:
            sys.stderr.write(line)
    if bar:
        sys.stderr.write("\n")


def tune(
    source: Union[str, os.PathLike],
    sizes: Mapping[str, int],
    kernel: Optional[str] = None,
    budget: float = 60,
    db: Optional[Union[str, os.PathLike]] = None,
    defines: Optional[Mapping[str, Any]] = None,
    progress: bool = True,
    max_trials: Optional[int] = None,
    baselines: bool = False,
) -> Dict[str, Any]:
    """Runs attn-tune on one kernel of `source` at `sizes` for `budget` seconds and returns its
    report: `output` (everything it printed), `tuned` (the kept configuration, or None when the
    default stayed) and `db` (the database written; attnc.compile and attnc_add_library use the
    database beside the source, attnc-tuning.json, unless told otherwise).

    With progress=True a bar on stderr follows the search (each measured configuration is a
    `[ t s]` line of attn-tune's), or, where stderr is not a terminal, attn-tune's lines.
    `max_trials` also stops the search after that many configurations; `baselines` also measures
    Halide's autoschedulers (attn-tune's default, off here: minutes, for comparison only)."""
    cfg = config()
    cmd = [cfg["attn_tune"], str(source), "--sizes=" + ",".join(f"{k}={v}" for k, v in sizes.items()),
           f"--budget={budget}"]
    if kernel:
        cmd.append(f"--kernel={kernel}")
    if db:
        cmd.append(f"--db={db}")
    if max_trials is not None:
        cmd.append(f"--max-trials={max_trials}")
    if not baselines:
        cmd.append("--no-baselines")
    for k, v in (defines or {}).items():
        cmd += ["-D", f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"]
    lines: list = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        _follow(p, budget, progress, lines)
        rc = p.wait()
    if rc != 0:
        raise AttncError("attn-tune failed:\n" + "".join(lines[-20:]))
    out = "".join(lines)
    tuned = re.search(r"^\s*tuned: (.*)$", out, flags=re.M)
    written = re.search(r"written to (\S+)", out)
    return {"output": out, "tuned": tuned.group(1) if tuned else None,
            "db": written.group(1) if written else None}
