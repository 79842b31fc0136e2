#!/usr/bin/env python3
"""Set up, open and test the course. Uses only the standard library, so it runs on a bare Python.

    python3 course.py lab      # set up, then open JupyterLab on notebooks/
    python3 course.py test     # set up, then run the unit tests and every notebook (pytest --nbval)
    python3 course.py test --quick   # only the quick tests: no notebook, nothing marked slow

Other commands (NB: a notebook, by path, file name or number: 03, 03_first_cuda_kernels):
    setup              only install
    reset [NB ...]     put back the stored (GPU) outputs of notebooks you ran (all by default)
    lecture [NB]       JupyterLab on a scratch copy of the notebooks, outside the repository: the
                       stored GPU outputs to present, cells to run live, the repository untouched
    slides NB ...      a reveal.js slide deck of each notebook, with its stored outputs, written to
                       build/slides/ (open the .slides.html file in a browser); options that
                       follow go to jupyter nbconvert
    execute NB ...     run notebooks in place in this Python and stamp the device and date into
                       their metadata: how GPU outputs are stored (results/ is written then only)
    execute --scratch DIR [NB ...]   a trial run (all notebooks by default) written to DIR, the
                       stored outputs and results/ untouched, e.g. as Colab's T4:
                       COURSE_GPU_PROFILE=t4 python3 course.py execute --scratch /tmp/t4
    results            rebuild the README's results table from results/*.csv
    setup-cells        write the Colab badge and setup cell into every notebook (--check: only check)
    colab              what the notebooks' first cell runs in Colab: install what Colab lacks, its
                       torch, triton, numba and matplotlib kept as they are (--show: print that cell)

Options after lab or lecture go to JupyterLab, for example on a remote GPU machine:
    python3 course.py lab --port=8888 --no-browser
and on your own machine: ssh -N -L 8888:127.0.0.1:8888 user@gpu-host, then open the printed URL.

Where it installs: into the active virtual environment or conda environment if there is one,
otherwise into .venv/ here (created on first use). A torch that is already importable there is
kept; otherwise a machine without an NVIDIA GPU gets the CPU build of torch (not the several-GB CUDA
build). The course itself is installed in editable mode with the packages pyproject.toml lists for
JupyterLab and the tests, which is how "import utils" works in every notebook; in its own .venv/ on
Linux without an NVIDIA GPU, in the versions CI tests (constraints-cpu.txt).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"
VENV = ROOT / ".venv"
JUPYTER_CONFIG = ROOT / "jupyter_config"  # the course's Jupyter settings (quiet log, no news pop-up)
SLIDES_DIR = ROOT / "build" / "slides"    # git-ignored

# The one place that names the published repository: the Colab badges and setup cells are made
# from it by `python3 course.py setup-cells`.
REPO_SLUG = "gpu-course/gpu-programming-for-pytorch-users"
REPO_URL = f"https://github.com/{REPO_SLUG}"
BRANCH = "main"

# What `setup` installs: the package (pyproject.toml: its dependencies and these extras, one list for
# pip, conda's environment.yml and course.py) and, first, torch (left out of pyproject.toml: see there).
EXTRAS = "lab,test"
# The versions CI tests (torch's CPU build included), pinned where the course makes its own .venv on
# Linux without an NVIDIA GPU; constraints-gpu.txt records those of the stored outputs.
CPU_CONSTRAINTS = ROOT / "constraints-cpu.txt"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# What Colab lacks, as (import name, pip requirement). Colab already has torch, triton, numba,
# matplotlib and Jupyter.
COLAB_NEEDS = [("numba_cuda", "numba-cuda>=0.20,<0.31"), ("wurlitzer", "wurlitzer>=3.1"),
               ("ninja", "ninja>=1.11")]
STAMP = ".gpu-course-setup"
NBVAL_ARGS = ["--nbval", "--nbval-current-env", "--nbval-cell-timeout=600",
              "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg")]


def say(msg: str) -> None:
    print(f"[course] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------
# Which Python to install into
# ------------------------------------------------------------------------------------------------
def in_managed_env() -> bool:
    """True inside an activated virtual environment or conda environment."""
    return sys.prefix != sys.base_prefix or bool(os.environ.get("CONDA_PREFIX"))


def venv_python(path: Path = VENV) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def target_python() -> Path:
    """The interpreter the course is installed into and run with (creating .venv if needed)."""
    if in_managed_env():
        return Path(sys.executable)
    py = venv_python()
    if not py.exists():
        say(f"creating a virtual environment in {VENV.name}/ ...")
        venv.EnvBuilder(with_pip=True).create(VENV)
    return py


def run(cmd: list, quiet: bool = False, **kw) -> int:
    """Run a command, dropping pip's noise about unreachable local index folders (and all of its
    output if ``quiet``)."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)
    for line in proc.stdout:
        if not quiet and "is ignored: it is neither a file nor a directory" not in line:
            sys.stdout.write(line)
    return proc.wait()


def pip_install(py: Path, *args) -> list:
    """The command of ``pip install`` in ``py``'s environment with ``args``."""
    return [str(py), "-m", "pip", "install", "--disable-pip-version-check", *args]


def pip(py: Path, *args, quiet: bool = False) -> int:
    return run(pip_install(py, *args), quiet=quiet)


def has_module(py: Path, name: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"
    return subprocess.run([str(py), "-c", code], capture_output=True).returncode == 0


def has_nvidia_gpu() -> bool:
    """Is an NVIDIA driver present? (Then pip's default torch, which is built for CUDA, is right.)"""
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def dist_name(dist: str) -> str:
    """A distribution's name as pip compares names: Numba_CUDA is numba-cuda.

    >>> dist_name("Numba_CUDA"), dist_name("typing_extensions")
    ('numba-cuda', 'typing-extensions')
    """
    return re.sub(r"[-_.]+", "-", dist.strip()).lower()


def pins(constraints: Path = CPU_CONSTRAINTS) -> list:
    """The ``(name, version)`` pairs that a pip constraints file pins with ``==``."""
    found = []
    for line in constraints.read_text().splitlines():
        dist, sep, version = line.split("#")[0].split(";")[0].partition("==")
        if sep:
            found.append((dist.strip(), version.strip()))
    return found


def pinned(name: str, constraints: Path = CPU_CONSTRAINTS) -> str | None:
    """The version that a pip constraints file pins ``name`` to (``None`` if it pins none).

    >>> pinned("torch")
    '2.13.0+cpu'
    """
    return next((version for dist, version in pins(constraints) if dist_name(dist) == dist_name(name)), None)


def use_cpu_constraints(managed_env: bool | None = None, platform_: str = sys.platform,
                        gpu: bool | None = None) -> bool:
    """Whether `setup` pins the versions CI tests (constraints-cpu.txt): in the course's own .venv/
    on Linux without an NVIDIA GPU, where that set was tested. An environment the user manages keeps
    its own versions (only pyproject.toml's ranges apply there), and so does a GPU machine.

    >>> use_cpu_constraints(False, "linux", False), use_cpu_constraints(True, "linux", False)
    (True, False)
    >>> use_cpu_constraints(False, "linux", True), use_cpu_constraints(False, "darwin", False)
    (False, False)
    """
    managed_env = in_managed_env() if managed_env is None else managed_env
    gpu = has_nvidia_gpu() if gpu is None else gpu
    return not managed_env and platform_.startswith("linux") and not gpu


def install_torch(py: Path) -> None:
    """Keep an importable torch; otherwise install the CPU build where there is no GPU (the
    version CI tests, from the configured package sources, else from PyTorch's CPU index)."""
    if has_module(py, "torch"):
        return
    if sys.platform.startswith("linux") and not has_nvidia_gpu():
        version = pinned("torch")   # '2.13.0+cpu'
        say(f"no torch and no NVIDIA GPU: installing the CPU build of torch {version}")
        # A local or mirrored CPU wheel first (fast, no large download; where there is none, pip
        # only says that it found none, so that is not shown), then PyTorch's CPU index.
        if pip(py, "-q", f"torch=={version}", quiet=True) == 0:
            return
        if pip(py, "-q", f"torch=={version}", "--index-url", TORCH_CPU_INDEX) == 0:
            return
        say(f"torch {version} is not on PyTorch's CPU index: installing its newest CPU build")
        if pip(py, "-q", "torch", "--index-url", TORCH_CPU_INDEX) == 0:
            return
        raise SystemExit("[course] could not install torch for the CPU; install it yourself "
                         f"(see https://pytorch.org/get-started/locally/) and run this again")
    say("no torch: installing torch from PyPI")
    if pip(py, "-q", "torch") != 0:
        raise SystemExit("[course] could not install torch")


# torch's requirements and theirs (what `pip install torch` brings along), which `locked_rest` leaves to
# install_torch, so that the two pips of `setup` never install one package at once (a test checks the set
# against the installed torch's metadata)
TORCH_REQUIRES = {"filelock", "fsspec", "jinja2", "markupsafe", "mpmath", "networkx", "setuptools", "sympy",
                  "typing-extensions"}


def locked_rest(constraints: Path = CPU_CONSTRAINTS) -> list:
    """The pins (``name==version``) of ``constraints`` other than torch and what it brings along.

    >>> rest = [r.split("==")[0] for r in locked_rest()]
    >>> "numba" in rest, "torch" in rest, "sympy" in rest
    (True, False, False)
    """
    return [f"{dist}=={version}" for dist, version in pins(constraints)
            if dist_name(dist) not in TORCH_REQUIRES | {"torch"}]


def start_locked_install(py: Path):
    """Start pip on :func:`locked_rest` (``--no-deps``: exactly those versions) in the background, where
    `setup` pins the versions CI tests into a fresh environment: it runs beside install_torch, on the
    core that pip leaves idle, instead of after it. The process. Quiet: install_course then installs
    whatever it left, and shows pip's errors."""
    return subprocess.Popen(pip_install(py, "-q", "--no-deps", *locked_rest()), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def install_course(py: Path, constrained: bool) -> None:
    """``pip install -e .[lab,test]``: the course in editable mode (so ``import utils`` works from
    any folder of the environment) with what JupyterLab and the tests need; with the versions CI
    tests where ``constrained``, falling back to the newest that pyproject.toml allows if those do
    not install here (another Python, say)."""
    course = f"{ROOT}[{EXTRAS}]"
    if constrained:   # pip's errors are not shown if those fail: the retry shows its own
        if pip(py, "-q", "-c", CPU_CONSTRAINTS, "-e", course, quiet=True) == 0:
            return
        say(f"the versions of {CPU_CONSTRAINTS.name} do not install here: installing the newest "
            "versions that pyproject.toml allows instead")
    if pip(py, "-q", "-e", course) != 0:
        raise SystemExit("[course] pip could not install the course (see above)")


# Runs toolchain.warm_cache in the target Python with only torch installed: the emulation's modules are
# loaded without the package's __init__ files (which import numpy, triton, numba, not there yet).
WARM_EMULATION = """
import sys, types
for name in ("gpu_course", "gpu_course.cuda", "gpu_course.cuda.emulation"):
    package = types.ModuleType(name)
    package.__path__ = [name.replace(".", "/")]
    sys.modules[name] = package
from gpu_course.cuda.emulation import toolchain
toolchain.warm_cache()
"""


def warm_emulation(py: Path):
    """Start building the CPU emulation's precompiled headers and runtime (``toolchain.warm_cache``) in
    the background, where the emulation will run (no NVIDIA GPU) and a second core is free for it; the
    process, or None. Quiet: where it fails, the first emulated build does that work and says why."""
    if has_nvidia_gpu() or (os.cpu_count() or 1) < 2 or not has_module(py, "torch"):
        return None
    return subprocess.Popen([str(py), "-c", WARM_EMULATION], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def finish_warming(proc, timeout: float = 300) -> None:
    """Wait for :func:`warm_emulation`'s process, at most ``timeout`` seconds (it takes about 50 on 2
    cores); past that, stop it: the first emulated build does what it left, and a half-built file is
    never used (each is written under a temporary name, then renamed)."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        say("building the CPU emulation's headers ahead took too long: left to the first build")


def setup_fingerprint() -> str:
    """A hash of what decides the install: a change to either file makes `setup` run pip again."""
    h = hashlib.sha256()
    for name in ("pyproject.toml", CPU_CONSTRAINTS.name):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()[:16]


def setup() -> Path:
    """Install the course into the target environment (skipped when nothing changed)."""
    py = target_python()
    prefix = Path(subprocess.run([str(py), "-c", "import sys; print(sys.prefix)"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    stamp = prefix / STAMP
    if stamp.exists() and stamp.read_text().strip() == setup_fingerprint() and \
            has_module(py, "torch") and has_module(py, "utils"):
        return py
    say(f"installing the course into {prefix}")
    constrained = use_cpu_constraints()
    # pip installs on one core: with the versions pinned, the course's other packages go in beside torch
    rest = start_locked_install(py) if constrained and not has_module(py, "torch") else None
    install_torch(py)
    warming = warm_emulation(py)   # g++ on a core while pip installs the rest
    if rest is not None:
        rest.wait()
    install_course(py, constrained)
    if warming is not None:
        finish_warming(warming)
    stamp.write_text(setup_fingerprint() + "\n")
    return py


# ------------------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------------------
def cmd_setup(args) -> int:
    py = setup()
    say(f"ready: {py}")
    return 0


def lab_env(env=None) -> dict:
    """The environment JupyterLab runs in: the course's Jupyter settings (jupyter_config/) come
    first on JUPYTER_CONFIG_PATH, so they apply without touching the user's ~/.jupyter."""
    env = dict(os.environ if env is None else env)
    paths = [str(JUPYTER_CONFIG)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)
                                     if p and p != str(JUPYTER_CONFIG)]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    return env


def given(args: list, *options) -> bool:
    """Do Jupyter's command-line ``args`` set one of ``options`` (``--x`` or ``--x=...``)?"""
    return any(a.split("=")[0] in options for a in args)


def browser_args(args: list, find_browser=None) -> list:
    """``["--no-browser"]`` when no web browser can be started here (a remote or headless machine)
    and the options do not say what to do: Jupyter would only warn that it found none."""
    if given(args, "--no-browser", "--browser", "--ServerApp.open_browser", "--ServerApp.browser"):
        return []
    if find_browser is None:
        import webbrowser
        find_browser = webbrowser.get
    try:
        find_browser()
        return []
    except Exception:  # webbrowser.Error: none registered
        return ["--no-browser"]


def run_lab(py: Path, root_dir: Path, args: list, open_nb: str | None = None,
            env: dict | None = None) -> int:
    """JupyterLab on ``root_dir`` (at the notebook ``open_nb``, a name in it, if given) with the
    course's settings; extra ``args`` are JupyterLab's options (``--port``, ``--ip``, ...)."""
    # Containers and cloud machines often run as root, which Jupyter refuses without this flag.
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    no_browser = browser_args(args)
    if no_browser:
        say("no web browser found here: open the URL printed below in yours "
            "(on a remote machine, forward the port first: see the README)")
    # the URL printed and opened leads to the notebook
    start = [f"--LabApp.default_url=/lab/tree/{open_nb}"] if open_nb else []
    # a folder of the user's own wins (Jupyter takes one root_dir only)
    folder = [] if given(args, "--ServerApp.root_dir", "--notebook-dir", "--ServerApp.notebook_dir") \
        else [f"--ServerApp.root_dir={root_dir}"]
    return run_server([str(py), "-m", "jupyter", "lab", *folder, *root, *no_browser, *start,
                       *args], env=lab_env(env))


def run_server(cmd: list, **kw) -> int:
    """Run a server until it stops. A SIGTERM to course.py is passed on, so stopping course.py
    stops the server (no orphan keeps the port); Ctrl-C reaches the server directly (it asks to
    confirm), so course.py just keeps waiting for it."""
    import signal
    proc = subprocess.Popen(cmd, **kw)
    old = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_lab(args) -> int:
    py = setup()
    say("starting JupyterLab on notebooks/ (Ctrl-C to stop)")
    return run_lab(py, NOTEBOOKS, args)


def usable_cpus() -> int | None:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # macOS, Windows
        return os.cpu_count()


def xdist_args(cpus: int | None, gpu: bool = False) -> list:
    """pytest-xdist's arguments: one worker per core, at most 4 (each runs torch and notebook kernels),
    none on one core, and none with a GPU: the notebooks' timing claims need the GPU to themselves.
    Groups (conftest.py) keep a notebook and its solutions on one worker.

    >>> xdist_args(2), xdist_args(64), xdist_args(1), xdist_args(16, gpu=True)
    (['-n', '2', '--dist', 'loadgroup'], ['-n', '4', '--dist', 'loadgroup'], [], [])
    """
    n = 1 if gpu else min(cpus or 1, 4)
    return ["-n", str(n), "--dist", "loadgroup"] if n > 1 else []


QUICK = "--quick"


def pytest_args(args: list, cpus: int | None, gpu: bool) -> list:
    """pytest's arguments for ``course.py test [--quick] [pytest options]``: the tests and every
    notebook (nbval), or with ``--quick`` the tests not marked ``slow`` and no notebook; spread
    over workers by :func:`xdist_args`; the user's options last, so that they win.

    >>> pytest_args([], 2, False)[:2], pytest_args(["--quick", "-x"], 2, False)
    (['tests', 'notebooks'], ['tests', '-m', 'not slow', '-p', 'no:nbval', '-n', '2', '--dist', 'loadgroup', '-x'])
    """
    rest = [a for a in args if a != QUICK]
    # --quick runs no notebook: without nbval's plugin each worker starts ~2 s sooner (nbformat's
    # JSON-schema checks compile a grammar at import)
    what = ["tests", "-m", "not slow", "-p", "no:nbval"] if QUICK in args else ["tests", "notebooks", *NBVAL_ARGS]
    return [*what, *xdist_args(cpus, gpu), *rest]


def cmd_test(args) -> int:
    """Unit tests, then every notebook top to bottom with its outputs compared (nbval) and its
    exercises judged, on up to 4 pytest-xdist workers without a GPU, serially with one (a ``-n`` in
    ``args`` overrides it). ``--quick``: only the tests not marked slow, no notebook."""
    py = setup()
    return subprocess.call([str(py), "-m", "pytest", *pytest_args(args, usable_cpus(), has_nvidia_gpu())],
                           cwd=ROOT)


def colab_missing(find_spec=None) -> list:
    """The pip requirements Colab lacks, judged by what can be imported."""
    import importlib.util
    find_spec = find_spec or importlib.util.find_spec
    return [req for mod, req in COLAB_NEEDS if find_spec(mod) is None]


# What Colab's image has and the course uses as it is: pinned at the installed versions while the rest
# goes in, so that pip fails rather than replace one of them (a reinstalled torch costs minutes and GBs).
COLAB_KEEP = ("torch", "triton", "numba", "matplotlib", "numpy")


def colab_pins(version=None) -> list:
    """``["torch==2.8.0", ...]``: the :data:`COLAB_KEEP` packages installed here, at their versions.

    >>> colab_pins({"torch": "2.8.0", "numba": "0.60.0"}.get)
    ['torch==2.8.0', 'numba==0.60.0']
    """
    if version is None:
        from importlib import metadata

        def version(name):
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                return None
    return [f"{n}=={v}" for n in COLAB_KEEP if (v := version(n))]


def cmd_colab(args) -> int:
    """What the notebooks' first cell runs in Colab, after cloning the course: install what Colab lacks
    (:data:`COLAB_NEEDS`) with what it has (:data:`COLAB_KEEP`) pinned as it is. ``--show``: print
    that first cell."""
    if "--show" in args:
        print(SETUP_CELL)
        return 0
    pins = colab_pins()
    missing = colab_missing()
    if not missing:
        say("Colab setup: nothing to install" + (f" (keeping {', '.join(pins)})" if pins else ""))
        return 0
    say(f"Colab setup: installing {' '.join(missing)}" + (f", keeping {', '.join(pins)}" if pins else ""))
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix="-colab-pins.txt", delete=False) as f:
        f.write("".join(p + "\n" for p in pins))
    try:
        return pip(Path(sys.executable), "-q", "-c", f.name, *missing)
    finally:
        os.unlink(f.name)


# The notebooks' first two cells, written by `setup-cells` from here so the repository is named once.
# The setup cell speaks to the learner: what it does in Colab and on their own machine.
SETUP_MARK = "# Setup: in Colab,"
OLD_SETUP_MARKS = ("# Setup (same in every notebook",)  # earlier wordings, replaced by `setup-cells`
SETUP_CELL = f'''{SETUP_MARK} this cell downloads the course and installs the packages Colab lacks
# (about a minute, the first time in a session). On your own machine it does nothing: there the
# course is already installed (`python3 course.py lab`), which is what makes `import utils` work.
# The stored outputs come from a run on an NVIDIA Hopper GPU (an H100 or an H200), which the next
# cell's stored output names. On Colab's free T4 (an older GPU) the sections that need a newer one
# (bf16, TF32, more shared memory...) are skipped, each saying why in one line.
import os, subprocess, sys
if "google.colab" in sys.modules:
    COURSE_DIR = os.environ.get("COURSE_DIR", "/content/gpu-course")
    if not os.path.isdir(COURSE_DIR):
        repo = os.environ.get("COURSE_REPO", "{REPO_URL}")
        subprocess.run(["git", "clone", "-q", "--depth", "1", repo, COURSE_DIR], check=True)
    subprocess.run([sys.executable, os.path.join(COURSE_DIR, "course.py"), "colab"], check=True)
    sys.path.insert(0, COURSE_DIR)'''


def is_setup_cell(cell) -> bool:
    """Whether ``cell`` is the Colab setup cell, in the current wording or an earlier one."""
    return cell.get("id") == "course-setup" or (
        cell["cell_type"] == "code" and _src(cell).startswith((SETUP_MARK, *OLD_SETUP_MARKS)))


def badge(nb_name: str) -> str:
    url = f"https://colab.research.google.com/github/{REPO_SLUG}/blob/{BRANCH}/notebooks/{nb_name}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _lines(text: str) -> list:
    return text.splitlines(keepends=True)


def write_setup_cells(path: Path, write: bool = True) -> bool:
    """Put the badge first in cell 0 and the setup cell as cell 1; return True if that changes
    the notebook (written back only if ``write``)."""
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    changed = False
    if not cells or cells[0]["cell_type"] != "markdown":
        raise SystemExit(f"[course] {path.name}: the first cell must be the title (markdown)")
    title = _src(cells[0])
    # the text after an existing badge line, or the whole title cell after a blank line
    body = title.partition("\n")[2] if title.startswith("[![Open In Colab]") else "\n" + title
    new0 = badge(path.name) + "\n" + body
    if _src(cells[0]) != new0:
        cells[0]["source"] = _lines(new0)
        changed = True
    setup_cell = {"cell_type": "code", "execution_count": None, "id": "course-setup",
                  "metadata": {}, "outputs": [], "source": _lines(SETUP_CELL)}
    if len(cells) > 1 and cells[1]["cell_type"] == "code" and is_setup_cell(cells[1]):
        if _src(cells[1]) != SETUP_CELL:
            cells[1]["source"] = _lines(SETUP_CELL)
            changed = True
    else:
        cells.insert(1, setup_cell)
        changed = True
    if changed and write:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


def cmd_setup_cells(args) -> int:
    check = "--check" in args
    stale = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if not write_setup_cells(path, write=not check):
            continue
        if check:
            stale.append(path.name)
        else:
            say(f"updated {path.name}")
    if stale:
        say(f"out of sync (run `python3 course.py setup-cells`): {', '.join(stale)}")
        return 1
    return 0


README_BEGIN = "<!-- results:begin (made by `python3 course.py results`; do not edit) -->"
README_END = "<!-- results:end -->"


def cmd_results(args) -> int:
    """Rebuild the README's results table from results/*.csv (needs only the standard library
    plus the course's own environment, so it runs in the target Python)."""
    py = target_python()
    code = "import utils; print(utils.results_markdown(utils.stored_results()))"
    table = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "COURSE_MODE": "cpu"})
    if table.returncode != 0:
        sys.stderr.write(table.stderr)
        return 1
    readme = ROOT / "README.md"
    text = readme.read_text()
    head, sep, tail = text.partition(README_BEGIN)
    if not sep or README_END not in tail:
        raise SystemExit(f"[course] README.md lacks the markers {README_BEGIN} ... {README_END}")
    tail = tail.split(README_END, 1)[1]
    readme.write_text(f"{head}{README_BEGIN}\n{table.stdout.strip()}\n{README_END}{tail}")
    say("README.md results table rebuilt")
    return 0


SAVE_ENV = "COURSE_SAVE_RESULTS"  # read by gpu_course.results: only `execute` writes results/


def drop_results(device: str, notebook: str, results_dir: Path = ROOT / "results") -> int:
    """Remove ``notebook``'s rows for ``device`` from its results file before the notebook runs
    again, so the file holds exactly what the stored outputs show (one run, one record). Returns
    how many rows were removed."""
    import csv
    import re
    path = results_dir / (re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") + ".csv")
    if not path.exists():
        return 0
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    keep = [r for r in rows if not (r["notebook"] == notebook and r["device"] == device)]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(keep)
    return len(rows) - len(keep)


EXECUTE_CHILD = "COURSE_EXECUTE_CHILD"  # set when `execute` runs itself again in the course's Python
# What `execute` records of the Python that ran a notebook (in the notebook's metadata, beside the
# device), printed as JSON by that Python: constraints-gpu.txt is kept from it.
VERSIONS_PROBE = """import json, sys, torch
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
print(json.dumps({"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU",
                  "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                               **{n: version(n) for n in ("triton", "numba", "numba-cuda", "numpy", "helion")}}}))
"""


def execute_python(managed_env: bool | None = None, venv_py: Path | None = None) -> tuple:
    """The Python that `execute` runs notebooks in, and why, installing nothing: the active virtual
    or conda environment; else the course's .venv/ if it exists; else the Python that runs
    course.py (a GPU machine whose packages come from its image and PYTHONPATH, with no .venv/).

    >>> execute_python(False, Path("/nonexistent/python"))[1]
    'no active environment and no .venv/ here: this Python'
    """
    managed_env = in_managed_env() if managed_env is None else managed_env
    venv_py = venv_python() if venv_py is None else venv_py
    if managed_env:
        return Path(sys.executable), "the active environment"
    if venv_py.exists():
        return venv_py, "the course's .venv/"
    return Path(sys.executable), "no active environment and no .venv/ here: this Python"


SCRATCH = "--scratch"


def execute_args(args: list) -> tuple:
    """``(notebook arguments, scratch folder or None)`` of ``execute [--scratch DIR] NB ...``; with
    ``--scratch`` and no notebook named, every notebook of the course.

    >>> execute_args(["03", "--scratch", "/tmp/t4"])
    (['03'], PosixPath('/tmp/t4'))
    >>> execute_args(["03"])
    (['03'], None)
    """
    if SCRATCH not in args:
        return list(args), None
    i = args.index(SCRATCH)
    if i + 1 >= len(args):
        raise SystemExit(f"course.py execute: {SCRATCH} needs a folder: {SCRATCH} DIR")
    rest = args[:i] + args[i + 2:]
    return rest or [p.stem for p in _tracked_notebooks()], Path(args[i + 1]).resolve()


def cmd_execute(args) -> int:
    """Run notebooks top to bottom in place, in the course's Python (:func:`execute_python`), and
    note in each notebook's metadata where and when its outputs were made and with which versions
    (how GPU outputs get stored). Benchmarks are saved to results/ during this run only (and the
    notebook's earlier rows for this device are dropped).

    ``--scratch DIR``: a trial run (e.g. under ``COURSE_GPU_PROFILE=t4``, every notebook when none is
    named): each notebook still runs in notebooks/ (its relative paths hold) but its executed copy is
    written to DIR, the stored notebooks and results/ untouched, claims not strict (see gpu_course.claims)."""
    names, scratch = execute_args(args)
    paths = find_notebooks("execute", names)
    if not os.environ.get(EXECUTE_CHILD):
        py, why = execute_python()
        say(f"execute: the notebooks run in {py} ({why})")
        if os.path.abspath(py) != os.path.abspath(sys.executable):
            more = [SCRATCH, str(scratch)] if scratch else []
            return subprocess.call([str(py), str(Path(__file__).resolve()), "execute",
                                    *map(str, paths), *more], env={**os.environ, EXECUTE_CHILD: "1"})
    if scratch:
        if scratch == NOTEBOOKS.resolve():
            raise SystemExit("course.py execute: --scratch must name a folder other than notebooks/")
        scratch.mkdir(parents=True, exist_ok=True)
        os.environ.pop(SAVE_ENV, None)
    import datetime
    import nbformat
    from nbclient import NotebookClient
    probe = json.loads(subprocess.run([sys.executable, "-c", VERSIONS_PROBE], capture_output=True,
                                      text=True, check=True).stdout)
    device, versions = probe["device"], probe["versions"]
    failed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        say(f"executing {path.name} on {device} ..." + (f" (into {scratch})" if scratch else ""))
        if not scratch:
            if device != "CPU":
                drop_results(device, path.stem)
            os.environ[SAVE_ENV] = "1"
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception as e:  # keep the partial outputs: they show where it failed
            say(f"{path.name} failed: {type(e).__name__}: {str(e).splitlines()[-1] if str(e) else ''}")
            failed += 1
        nb.metadata["course"] = {"outputs_from": device, "torch": versions["torch"],
                                 "versions": versions,
                                 "executed": datetime.datetime.now(datetime.timezone.utc)
                                 .strftime("%Y-%m-%d %H:%M UTC")}
        if scratch:
            nb.metadata["course"]["scratch"] = {k: v for k, v in os.environ.items()
                                                if k in ("COURSE_GPU_PROFILE", "COURSE_FAKE_CC", "COURSE_MODE")}
        nbformat.write(nb, scratch / path.name if scratch else path)
    if scratch:
        say(f"execute: {len(paths) - failed} of {len(paths)} notebooks finished; executed copies in {scratch}")
    return 1 if failed else 0


class NotebookNotFound(Exception):
    pass


def find_notebook(name: str, notebooks: Path | None = None) -> Path:
    """A notebook of the course from what a user types: a path, a file name, a stem or its number
    (``03``, ``03_first_cuda_kernels``, ``notebooks/03_first_cuda_kernels.ipynb``)."""
    notebooks = notebooks or NOTEBOOKS
    path = Path(name)
    if path.suffix == ".ipynb" and path.is_file():
        return path.resolve()
    stem = path.name[:-len(".ipynb")] if path.name.endswith(".ipynb") else path.name
    every = sorted(notebooks.glob("*.ipynb"))
    known = [p for p in every if not _is_copy(p)]  # JupyterLab's 03_x-Copy1.ipynb is not the course's
    hits = [p for p in every if p.stem == stem] or \
           [p for p in known if stem and p.stem.split("_")[0] == stem]
    if len(hits) != 1:
        names = ", ".join(p.stem for p in known)
        raise NotebookNotFound(f"no such notebook: {name} (the notebooks: {names})")
    return hits[0]


def _is_copy(path: Path) -> bool:
    """A copy JupyterLab made (File > Duplicate: ``03_x-Copy1.ipynb``), not a notebook of the course.

    >>> _is_copy(Path("03_first_cuda_kernels-Copy1.ipynb")), _is_copy(Path("03_first_cuda_kernels.ipynb"))
    (True, False)
    """
    return bool(re.search(r"-Copy\d*$", path.stem))


def _tracked_notebooks() -> list:
    """The notebooks of the course that git knows (what ``reset`` can restore)."""
    r = subprocess.run(["git", "ls-files", "-z", "--", "*.ipynb"], cwd=NOTEBOOKS,
                       capture_output=True, text=True)
    names = [n for n in r.stdout.split("\0") if n and "/" not in n] if r.returncode == 0 else []
    return sorted(NOTEBOOKS / n for n in names) or \
        [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if not _is_copy(p)]


def find_notebooks(cmd: str, args: list) -> list:
    """Resolve the notebook arguments of ``cmd`` (main() reports a bad one, with status 2)."""
    try:
        return [find_notebook(a) for a in args]
    except NotebookNotFound as e:
        raise NotebookNotFound(f"course.py {cmd}: {e}") from None


def cmd_reset(args) -> int:
    """Put back the stored outputs of notebooks (all of them by default) from git: running a
    notebook replaces the GPU outputs its prose discusses with this machine's."""
    paths = find_notebooks("reset", args) or _tracked_notebooks()
    files = [str(p) for p in paths]
    staged = subprocess.run(["git", "diff", "--cached", "--name-only", "--", *files], cwd=ROOT,
                            capture_output=True, text=True).stdout.split()
    # from the last commit, not the index: `git add` must not keep a learner's edits
    r = subprocess.run(["git", "checkout", "HEAD", "--", *files], cwd=ROOT, capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"course.py reset: git could not restore the notebooks: {r.stderr.strip()}",
              file=sys.stderr)
        return 1
    say(f"restored the stored outputs of {len(paths)} notebook(s)")
    if staged:
        say(f"{', '.join(Path(f).name for f in staged)}: the changes staged with git add were "
            f"undone too (the notebook is as in the last commit)")
    copies = [p.name for p in sorted(NOTEBOOKS.glob("*-Copy*.ipynb")) if _is_copy(p)]
    if copies and not args:
        say(f"left alone: {', '.join(copies)} (copies made in JupyterLab; delete them if unwanted)")
    return 0


# ------------------------------------------------------------------------------------------------
# For the instructor: slides and lecture mode
# ------------------------------------------------------------------------------------------------
def _heading_level(line: str) -> int:
    """1, 2 or 3 for a Markdown heading line ``#``, ``##`` or ``###``; 0 otherwise."""
    hashes = len(line) - len(line.lstrip("#"))
    return hashes if 1 <= hashes <= 3 and line[hashes:hashes + 1] == " " else 0


def slide_type(cell) -> str:
    """The reveal.js role of a cell when the notebook says none (``metadata.slideshow``): a ``#``
    or ``##`` heading starts a slide, ``###`` a sub-slide (below it), the Colab setup cell is left
    out, everything else continues the current slide."""
    if is_setup_cell(cell):
        return "skip"
    if cell["cell_type"] == "markdown":
        first = next((line for line in _src(cell).splitlines() if line.strip()), "")
        level = _heading_level(first)
        if level:
            return "slide" if level <= 2 else "subslide"
    return "-"


def split_at_headings(cell) -> list:
    """A Markdown cell cut before each heading that is not its first line (outside code fences),
    so that a heading below some closing text still starts its own slide."""
    lines, parts, fence = _src(cell).splitlines(keepends=True), [[]], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and _heading_level(line) and any(l.strip() for l in parts[-1]):
            parts.append([])
        parts[-1].append(line)
    cells = []
    for k, part in enumerate(parts):
        new = {**cell, "source": "".join(part).rstrip("\n"), "metadata": dict(cell["metadata"])}
        if k:
            new["id"] = f"{cell.get('id', 'cell')}-{k}"[-64:]
        cells.append(new)
    return cells


def with_slide_types(nb: dict) -> dict:
    """A copy of ``nb`` with a slide type on every cell (Markdown cells cut at headings first).
    A cell's own ``slideshow`` metadata wins and keeps the cell whole, so an instructor can
    override any cell. The first cell (badge and title) opens the first slide."""
    nb = json.loads(json.dumps(nb))
    cells = []
    for i, cell in enumerate(nb["cells"]):
        meta = cell.setdefault("metadata", {})
        if "slide_type" in meta.get("slideshow", {}):
            cells.append(cell)
            continue
        for part in split_at_headings(cell) if i and cell["cell_type"] == "markdown" else [cell]:
            kind = "slide" if i == 0 else slide_type(part)
            part["metadata"] = {**part["metadata"],
                                "slideshow": {**meta.get("slideshow", {}), "slide_type": kind}}
            cells.append(part)
    nb["cells"] = cells
    return nb


def build_slides(path: Path, out_dir: Path, py: Path, nbconvert_args=()) -> Path:
    """Write ``out_dir/<stem>.slides.html``, a reveal.js deck of the notebook's stored outputs
    (nothing is executed), made by nbconvert from a copy with slide types; ``nbconvert_args``
    are passed on (``--SlidesExporter.reveal_url_prefix=...``, say)."""
    import tempfile
    nb = with_slide_types(json.loads(path.read_text()))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        r = subprocess.run([str(py), "-m", "jupyter", "nbconvert", "--to", "slides",
                            "--SlidesExporter.reveal_scroll=True", "--output-dir", str(out_dir),
                            *nbconvert_args, str(copy)], capture_output=True, text=True,
                           timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"[course] nbconvert could not make slides of {path.name}:\n{r.stderr}")
    return out_dir / f"{path.stem}.slides.html"


def cmd_slides(args) -> int:
    names = [a for a in args if not a.startswith("-")]
    if not names:
        print("course.py slides: name the notebooks, for example: python3 course.py slides 03",
              file=sys.stderr)
        return 2
    paths = find_notebooks("slides", names)
    py = setup()
    for path in paths:
        deck = build_slides(path, SLIDES_DIR, py, [a for a in args if a.startswith("-")])
        say(f"slides: {deck}")
    return 0


LECTURE_ENV = "COURSE_LECTURE_DIR"  # set for the kernels of `lecture`; read by utils.banner()


def lecture_dir() -> Path:
    """Where `lecture` keeps its scratch copy: outside the repository, in the user's cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-course" / "lecture"


def make_lecture_copy(dest: Path, notebooks: Path | None = None) -> list:
    """Copy every notebook, with its stored outputs, into ``dest`` (replacing earlier copies, so
    each lecture starts from the stored outputs again); return the copies."""
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(p, dest / p.name))
            for p in sorted((notebooks or NOTEBOOKS).glob("*.ipynb"))]


def cmd_lecture(args) -> int:
    """JupyterLab on a scratch copy of the notebooks: the stored GPU outputs are shown as they are
    and only the copy changes when cells run, so the repository's notebooks stay as stored."""
    nb_args, lab_args = (args[:1], args[1:]) if args and not args[0].startswith("-") else ([], args)
    paths = find_notebooks("lecture", nb_args)
    py = setup()
    dest = lecture_dir()
    make_lecture_copy(dest)
    say(f"lecture: a fresh copy of the notebooks with their stored outputs is in {dest}; "
        "running cells changes only that copy (Ctrl-C to stop)")
    return run_lab(py, dest, lab_args, open_nb=paths[0].name if paths else None,
                   env={**os.environ, LECTURE_ENV: str(dest)})


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "setup": cmd_setup, "reset": cmd_reset,
            "lecture": cmd_lecture, "slides": cmd_slides, "execute": cmd_execute, "results": cmd_results, "setup-cells": cmd_setup_cells,
            "colab": cmd_colab}


def main(argv: list) -> int:
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    if not argv or argv[0] not in COMMANDS:
        what = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(f"course.py: {what}. Commands: {', '.join(COMMANDS)}. "
              f"python3 course.py --help says what each does.", file=sys.stderr)
        return 2
    try:
        return COMMANDS[argv[0]](argv[1:])
    except NotebookNotFound as e:
        print(e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
