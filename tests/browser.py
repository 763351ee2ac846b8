"""Helpers for the browser tests: Debian's chromium, a JupyterLab server started the way
`make lab` starts it (scripts/lab.sh), and what a person does in JupyterLab's page.

Playwright drives the browser (`executable_path` = Debian's chromium); `playwright
install`, which downloads browsers of its own, is never needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
LAB_SCRIPT = ROOT / "scripts" / "lab.sh"
STDERR = 'application/vnd.jupyter.stderr'


def find_or_install_chromium() -> tuple[str | None, str]:
    """Debian's chromium: the one on PATH, else installed with apt-get where this runs as
    root. Returns (path, "") or (None, why it cannot be had)."""
    found = shutil.which("chromium")
    if found:
        return found, ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "no chromium on PATH, and installing it needs root and apt-get: " \
                     "apt-get install chromium"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log = []
    for args in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=300", "chromium"]):
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900,
                              check=False)
        log.append(f"$ {' '.join(args)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            return None, f"apt-get could not install chromium:\n{''.join(log)[-3000:]}"
    found = shutil.which("chromium")
    return (found, "") if found else (None, "apt-get installed chromium but it is not on PATH")


@contextlib.contextmanager
def chromium_browser():
    """Debian's chromium, headless, under Playwright (`skip` where it cannot be had: no
    root to install it); the report tests share one per module (their `headless_chromium`)."""
    import pytest
    from playwright.sync_api import sync_playwright

    path, why = find_or_install_chromium()
    if path is None:
        pytest.skip(why)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, headless=True)
        yield browser
        browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """JupyterLab from scripts/lab.sh on `folder`, on a free port with a random token, in
    its own process group; everything Jupyter keeps per user lives under `home`."""

    def __init__(self, folder: Path, home: Path, env: dict[str, str], venv: Path):
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log = home / "jupyterlab.log"
        jupyter_env = {
            "JUPYTER_CONFIG_DIR": home / "config", "JUPYTER_RUNTIME_DIR": home / "runtime",
            "JUPYTERLAB_SETTINGS_DIR": home / "settings",
            "JUPYTERLAB_WORKSPACES_DIR": home / "workspaces",
            "IPYTHONDIR": home / "ipython", "MPLCONFIGDIR": home / "matplotlib",
        }
        # no "official Jupyter news?" toast over the screenshots, and no request for it
        notification = home / "settings" / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True)
        (notification / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        args = [str(LAB_SCRIPT), str(folder), "--no-browser", f"--port={self.port}",
                "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
                f"--IdentityProvider.token={self.token}"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **env, **{k: str(v) for k, v in jupyter_env.items()},
                     "VENV": str(venv)})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, method: str = "GET") -> bytes:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}; "
                                   f"log: {self.log}\n{self.log.read_text()[-3000:]}")
            try:
                self.api("/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"JupyterLab did not answer on {self.url} in {timeout_s:.0f} s; "
                           f"log: {self.log}")

    def stop(self) -> None:
        """SIGTERM to the server's process group (Jupyter then shuts its kernels down),
        SIGKILL after 20 s; kernels run in sessions of their own, so each process the
        server started is also ended by pid."""
        stop_tree(self.process, grace_s=20)


def stop_tree(process: subprocess.Popen, grace_s: float) -> None:
    """End `process` (the leader of its own process group) and every process it started,
    also those that left its group, each by pid."""
    try:
        started = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    _, alive = psutil.wait_procs(started, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


# --- JupyterLab's page -----------------------------------------------------------------

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"

# True once the kernel is idle and no cell is running or queued, and either every code
# cell has an execution count or an error stopped the run.
RUN_FINISHED_JS = """() => {
  const panel = document.querySelector('%(panel)s');
  if (!panel) return false;
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .map(p => p.textContent.trim());
  const failed = [...panel.querySelectorAll('[data-mime-type="%(stderr)s"]')]
    .some(o => o.textContent.includes('Traceback'));
  return status === 'idle' && prompts.length > 0 && !prompts.includes('[*]:')
    && (failed || prompts.every(p => /^\\[\\d+\\]:$/.test(p)));
}""" % {"panel": NOTEBOOK, "stderr": STDERR}


def open_notebook(page, server: LabServer, name: str, kernel: str, timeout_s: float = 120) -> None:
    """Open `name` in a workspace of its own (no tabs restored from another test) and wait
    until the status bar says its kernel, named `kernel`, is idle. (Running cells before
    that opens a "Select Kernel" dialog instead.)"""
    workspace = re.sub(r"\W", "", name)
    page.goto(f"{server.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={server.token}")
    page.locator("#jp-main-statusbar").get_by_text(f"{kernel} | Idle", exact=True).wait_for(
        timeout=timeout_s * 1000)


def menu(page, *labels: str) -> None:
    """Click through the menu bar: menu(page, "Run", "Run All Cells")."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{labels[0]}$")).click()
    for label in labels[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")).click()


def run_all_cells(page, timeout_s: float = 300) -> None:
    menu(page, "Run", "Run All Cells")
    page.wait_for_function(RUN_FINISHED_JS, timeout=timeout_s * 1000, polling=500)


def error_outputs(page) -> list[str]:
    """The text of every output that shows an error: a traceback on stderr, or any
    rendered text naming an Error."""
    texts = page.locator(f"{NOTEBOOK} .jp-OutputArea-output").evaluate_all(
        "outs => outs.map(o => [o.dataset.mimeType || '', o.innerText])")
    return [text for mime, text in texts
            if (mime == STDERR and "Traceback" in text) or re.search(r"\w*Error\b", text)]


def rendered_images(page) -> list:
    """The PNG images in outputs that the browser decoded (naturalWidth > 0)."""
    images = page.locator(f"{NOTEBOOK} .jp-OutputArea-output img[src^='data:image/png']")
    return [img for img in images.all()
            if img.evaluate("i => i.complete && i.naturalWidth > 0")]


def screenshot(page, element, path: Path) -> Path:
    """The page as a person sees it with `element` scrolled into view. Cells off screen
    are laid out only when scrolled to (CSS content-visibility), which moves what is below
    them, so this scrolls until the element stays put in the viewport."""
    path.parent.mkdir(parents=True, exist_ok=True)
    box = None
    for _ in range(20):
        element.scroll_into_view_if_needed()
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => "
                      "requestAnimationFrame(r)))")  # two frames: laid out and painted
        now = element.bounding_box()
        if now is not None and now == box:
            break
        box = now
    page.screenshot(path=str(path))
    return path


# --- the published report, from file:// -------------------------------------------------

def open_offline(browser, path: Path, timeout_s: float = 60, width: int = 1280):
    """`path` opened from file:// in a context of its own with the network switched off, in
    a window `width` px wide; returns (page, every URL the page asked for). A request for
    anything but a file is aborted, so it shows up in the list and never stalls the page."""
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    context.route(re.compile(r"^(?!file:|data:)"), lambda route: route.abort())
    page = context.new_page()
    page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_s * 1000)
    return page, requests


def broken_images(page) -> list[str]:
    """The src (cut short) of every <img> the browser did not decode."""
    return page.locator("img").evaluate_all(
        "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0))"
        ".map(i => i.src.slice(0, 80))")
