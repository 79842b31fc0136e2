"""The course as a learner meets it: `python3 course.py lab` in a real browser.

Starts `course.py lab` on a free port over a scratch copy of notebooks 00 and 03 (the repository's
notebooks are not touched), opens each in headless Chromium through Playwright, runs all cells
and checks that no cell fails, that the banner names the mode and how to get the stored outputs
back, and (03) that the kernels' printf lines and a plot appear on the page. Screenshots go to
build/browser/ (git-ignored).

Needs Playwright for Python (`pip install playwright`, or `pip install -e ".[browser]"`) and a
Chromium: the system's (`apt-get install chromium`: /usr/bin/chromium), the one in
$COURSE_CHROMIUM, or Playwright's own (`python -m playwright install chromium`). Skipped, with
the reason, when either is missing; COURSE_BROWSER_TEST=0 skips it too. Run it alone with

    python -m pytest tests/browser -v

It runs in the mode of the machine (cpu here: notebook 03 builds CUDA C through the emulation, so
a cold build cache takes minutes).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "browser"
NOTEBOOKS = ["00_setup.ipynb", "03_first_cuda_kernels.ipynb"]
RUN_TIMEOUT_S = 840       # one notebook, Run All (pytest's own limit is 900 s a test)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

if os.environ.get("COURSE_BROWSER_TEST") == "0":
    pytest.skip("COURSE_BROWSER_TEST=0", allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="Playwright is not installed (pip install playwright): the browser test is skipped")


def find_chromium() -> str | None:
    """A Chromium to drive: $COURSE_CHROMIUM, the system's, or None for Playwright's own (if it
    has one installed); raises Skip when there is none."""
    env = os.environ.get("COURSE_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    with sync_api.sync_playwright() as p:
        if Path(p.chromium.executable_path).exists():
            return None
    pytest.skip("no Chromium found (apt-get install chromium, or set COURSE_CHROMIUM, or "
                "python -m playwright install chromium): the browser test is skipped")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`python3 course.py lab` on a free port, over a scratch copy of the notebooks; yields the
    base URL with its token."""
    chromium = find_chromium()
    tmp = tmp_path_factory.mktemp("lab")
    work = tmp / "notebooks"
    work.mkdir()
    stored = {name: (ROOT / "notebooks" / name).read_bytes() for name in NOTEBOOKS}
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, work / name)
    port, token = free_port(), "browser-test"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp / "config"),  # not the user's ~/.jupyter
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # The test's own JupyterLab settings: every cell laid out (no windowing), so that scrolling
    # to an output and taking its screenshot is stable.
    tracker = tmp / "config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    log = (tmp / "lab.log").open("w")
    # The options after `lab` go to JupyterLab (a root_dir given there replaces notebooks/).
    proc = subprocess.Popen([sys.executable, str(ROOT / "course.py"), "lab", "--no-browser",
                             f"--port={port}", f"--IdentityProvider.token={token}",
                             f"--ServerApp.root_dir={work}", "--LabApp.expose_app_in_browser=True"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=5) as r:
                    names = {item["name"] for item in json.load(r)["content"]}
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError("JupyterLab did not start:\n" +
                                         (tmp / "lab.log").read_text())
                time.sleep(1)
        assert names == set(NOTEBOOKS), names  # served from the scratch copy
        yield {"base": base, "token": token, "chromium": chromium, "work": work}
        for name, before in stored.items():  # the repository's notebooks are as they were
            assert (ROOT / "notebooks" / name).read_bytes() == before, name
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the server and its kernels, whatever is left
        except ProcessLookupError:
            pass
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=lab["chromium"], headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


# What the page's JupyterLab says about the open notebook (the app is exposed as
# window.jupyterapp by --LabApp.expose_app_in_browser).
STATE_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = [];
  for (const cell of panel.content.model.cells) {
    if (cell.type !== 'code') continue;
    cells.push({count: cell.executionCount, outputs: cell.outputs.toJSON()});
  }
  return {path: panel.context ? panel.context.path : null, kernel: kernel ? kernel.status : null, cells: cells};
}"""


def wait_for(page, predicate, timeout_s, what):
    deadline = time.time() + timeout_s
    state = None
    while time.time() < deadline:
        state = page.evaluate(STATE_JS)
        if state and predicate(state):
            return state
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last state: "
                         f"{json.dumps(state)[:2000]}")


def text_of(output) -> str:
    if output["output_type"] == "stream":
        t = output["text"]
    else:
        t = output.get("data", {}).get("text/plain", "")
    return "".join(t) if isinstance(t, list) else t


def show(page, locator, path: Path) -> None:
    """Scroll an output into view, check that it shows, and save a screenshot of the page."""
    locator.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    assert locator.is_visible(), f"not on the page: {locator}"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_run_all_in_jupyterlab(lab, browser, name):
    start = time.time()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        # ?reset: not the layout the previous page left in the server's workspace (its notebook open
        # too, and for a moment the current tab, so that the commands below would go to it)
        page.goto(f"{lab['base']}/lab/tree/{name}?reset&token={lab['token']}")
        wait_for(page, lambda s: s["path"] == name and s["kernel"] == "idle" and s["cells"], 180, "the kernel")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        wait_for(page, lambda s: s["path"] == name and all(c["count"] is None for c in s["cells"]), 30,
                 "cleared cells")
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        def finished(s):
            failed = any(o["output_type"] == "error" for c in s["cells"] for o in c["outputs"])
            done = all(c["count"] is not None for c in s["cells"])
            return s["path"] == name and (failed or done) and s["kernel"] == "idle"
        state = wait_for(page, finished, RUN_TIMEOUT_S, "Run All to finish")
        errors = [text_of(o) or "\n".join(o.get("traceback", []))[-1500:]
                  for c in state["cells"] for o in c["outputs"] if o["output_type"] == "error"]
        assert not errors, f"{name}: a cell failed:\n{errors[0]}"
        texts = "\n".join(text_of(o) for c in state["cells"] for o in c["outputs"])
        stem = name[:-len(".ipynb")]
        assert f"python3 course.py reset {stem}" in texts  # the banner, with this notebook's name
        if name.startswith("03"):
            printf = page.locator(".jp-OutputArea-output").filter(
                has_text="block 0, thread 0: i = 0").first
            show(page, printf, SHOTS / f"{stem}_printf.png")
            plot = page.locator(".jp-OutputArea-output img").first
            show(page, plot, SHOTS / f"{stem}_plot.png")
            assert plot.evaluate("img => img.naturalWidth") > 100, "the plot has no image"
        else:
            show(page, page.locator(".jp-OutputArea-output").filter(has_text="Mode ").first,
                 SHOTS / f"{stem}_banner.png")
        print(f"{name}: Run All in JupyterLab in Chromium took {time.time() - start:.0f} s")
    finally:
        page.close()
