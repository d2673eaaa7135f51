"""A headless Chromium (Debian's package, installed by .ci/browser/install.sh) driven over the
DevTools protocol with the `websockets` client the lock already pins: open a page, click
elements by their text as a user would, read what is rendered, take screenshots."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Chromium's own start-up traffic (updates, sync, Google's hosts) is refused on a closed network
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
    "--remote-debugging-port=0",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One tab, spoken to over its DevTools websocket."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.ids = itertools.count(1)

    def call(self, method: str, timeout: float = 30, **params: Any) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for(ready, timeout)

    def wait_for(self, condition: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"Boolean({condition})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {condition}")
            time.sleep(0.1)

    def text(self) -> str:
        """What the page shows, as the user reads it."""
        return self.evaluate("document.body.innerText")

    def click_text(self, text: str, timeout: float = 15) -> None:
        """Click the innermost visible element whose text is exactly ``text`` (as a user clicks a
        menu entry), once it is there."""
        find = (
            "[...document.querySelectorAll('body *')].filter(el => el.offsetParent !== null && "
            f"el.innerText && el.innerText.trim() === {json.dumps(text)})"
            ".sort((a, b) => a.querySelectorAll('*').length - b.querySelectorAll('*').length)[0]"
        )
        self.wait_for(find, timeout)
        self.evaluate(f"({find}).click()")
        time.sleep(0.3)  # React re-renders on the click's state change

    def frame_text(self, timeout: float = 15) -> str:
        """What the page's (first) inner frame shows: the report displays an HTML result in an
        iframe from a data: URL, which the page's own scripts may not read."""
        deadline = time.monotonic() + timeout
        while True:
            children = self.call("Page.getFrameTree")["frameTree"].get("childFrames", [])
            if children:
                world = self.call("Page.createIsolatedWorld", frameId=children[0]["frame"]["id"])
                result = self.call(
                    "Runtime.evaluate",
                    expression="document.body ? document.body.innerText : ''",
                    contextId=world["executionContextId"],
                    returnByValue=True,
                )
                text = result["result"].get("value") or ""
                if text or time.monotonic() > deadline:
                    return text
            elif time.monotonic() > deadline:
                raise TimeoutError("the page has no inner frame")
            time.sleep(0.2)

    def view_result(self, name: str, timeout: float = 15) -> None:
        """Press the view button (the eye) in the results list's row named ``name``."""
        button = (
            "[...document.querySelectorAll('tr')].filter(tr => tr.cells.length && "
            f"tr.cells[0].innerText.trim() === {json.dumps(name)})"
            ".map(tr => tr.querySelector('a[href=\"#\"]'))[0]"
        )
        self.wait_for(button, timeout)
        self.evaluate(f"({button}).click()")
        time.sleep(0.5)

    def screenshot(self, path: str | Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


@contextlib.contextmanager
def browser(timeout: float = 60) -> Iterator[Page]:
    """A fresh headless Chromium with an empty profile, and its first tab."""
    from websockets.sync.client import connect

    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (.ci/browser/install.sh installs Debian's package)")
    with tempfile.TemporaryDirectory(prefix="shiftwork-chromium-") as profile:
        proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            port = _devtools_port(proc, timeout)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as resp:
                tabs = [t for t in json.load(resp) if t.get("type") == "page"]
            with connect(tabs[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout) as ws:
                page = Page(ws)
                page.call("Page.enable")
                yield page
        finally:
            proc.kill()
            proc.wait()


def _devtools_port(proc: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
            # keep reading its log, so that a full pipe never blocks it
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return int(m.group(1))
    raise RuntimeError("chromium did not start its DevTools server:\n" + "".join(seen[-20:]))
