"""Open an HTML page in headless Chromium and check it, through the DevTools protocol.

:func:`check_page` starts Debian's ``chromium`` with ``--remote-debugging-pipe``
(the DevTools protocol over two pipes, file descriptors 3 and 4, messages as JSON
ended by a NUL byte — no port, no websocket library), loads the page, and
reports what a reader's browser would have met:

* console errors and uncaught exceptions (``Runtime.consoleAPICalled`` of type
  ``error``, ``Runtime.exceptionThrown``, ``Log.entryAdded`` of level ``error`` —
  a resource that fails to load is logged there);
* network requests (``Network.requestWillBeSent``) for anything but the page
  itself and ``data:`` URIs — a self-contained page makes none;
* every ``<img>``: whether it decoded (``complete`` and ``naturalWidth > 0``);
* the ``<h2>`` section headings;

and saves a PNG screenshot of the whole page. Used by the report's browser test
(``pytest -m browser``).

Examples
--------
>>> from terrain_analysis.browser import check_page
>>> result = check_page("runs/20261123T214048Z/report.html", screenshot="shot.png")  # doctest: +SKIP
>>> result.problems()  # doctest: +SKIP
[]
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

__all__ = ["BrowserError", "Image", "Page", "PageCheck", "check_page", "find_chromium", "open_page", "page_problems"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    """Chromium could not be started or did not answer in time."""


@dataclass(frozen=True)
class Image:
    """One ``<img>`` of the page after loading.

    Attributes
    ----------
    source : str
        The start of its ``src`` (data URIs cut to 60 characters).
    complete : bool
        Whether loading finished.
    natural_width : int
        Its decoded width in pixels; 0 if it did not decode.
    """

    source: str
    complete: bool
    natural_width: int


@dataclass
class PageCheck:
    """What loading a page in Chromium showed.

    Attributes
    ----------
    url : str
        The page's ``file://`` URL.
    console_errors : list of str
        Console errors, uncaught exceptions and error log entries.
    requests : list of str
        URLs requested other than the page itself and ``data:`` URIs.
    images : list of Image
    headings : list of str
        The text of every ``<h2>``.
    screenshot : Path or None
        Where the screenshot was saved.
    """

    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    screenshot: Path | None = None

    @property
    def broken_images(self) -> list[Image]:
        """The images that did not decode."""
        return [image for image in self.images if not (image.complete and image.natural_width > 0)]

    def problems(self) -> list[str]:
        """One line per console error, request and broken image; empty for a clean page."""
        return (
            [f"console error: {e}" for e in self.console_errors]
            + [f"network request: {u}" for u in self.requests]
            + [f"image did not decode: {i.source}" for i in self.broken_images]
        )


def find_chromium() -> str | None:
    """The path of a Chromium executable on ``PATH``, or None."""
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Pipe:
    """The DevTools protocol over ``--remote-debugging-pipe``: NUL-terminated JSON messages."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int, deadline: float) -> None:
        self._process = process
        self._to = to_browser
        self._from = from_browser
        self._deadline = deadline
        self._buffer = b""
        self._next_id = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(from_browser, selectors.EVENT_READ)
        self.events: list[dict[str, Any]] = []

    def deadline(self, deadline: float) -> None:
        """Replace the time (``time.monotonic()``) by which every answer must have arrived."""
        self._deadline = deadline

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send a command and wait for its answer (events meanwhile are kept in :attr:`events`)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method} failed: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        """Wait for an event (or take it from those already received)."""
        for k, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(k)
        while True:
            event = self._receive()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer before the deadline")
            if not self._selector.select(timeout=left):
                continue
            chunk = os.read(self._from, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium closed the DevTools pipe (exit status {self._process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        decoded: dict[str, Any] = json.loads(message)
        return decoded


_IMAGES_SCRIPT = (
    "JSON.stringify(Array.from(document.images).map(i => "
    "({source: i.getAttribute('src') ? i.getAttribute('src').slice(0, 60) : '', complete: i.complete, "
    "width: i.naturalWidth})))"
)
_HEADINGS_SCRIPT = "JSON.stringify(Array.from(document.querySelectorAll('h2')).map(h => h.textContent.trim()))"


def check_page(
    page: str | os.PathLike[str],
    *,
    screenshot: str | os.PathLike[str] | None = None,
    width: int = 1280,
    timeout: float = 60.0,
    chromium: str | None = None,
) -> PageCheck:
    """Load ``page`` in headless Chromium and report console errors, requests, images and headings.

    Parameters
    ----------
    page : str or path-like
        An HTML file.
    screenshot : str or path-like, optional
        Where to save a PNG of the whole page.
    width : int, default 1280
        Viewport width in CSS pixels.
    timeout : float, default 60
        Seconds for the whole check.
    chromium : str, optional
        The executable; default :func:`find_chromium`.

    Returns
    -------
    PageCheck

    Raises
    ------
    BrowserError
        If no Chromium is found, it fails to start, or it does not finish in time.
    ValueError
        If ``page`` is not a file.
    """
    path = Path(page).resolve()
    if not path.is_file():
        raise ValueError(f"'page' {str(page)!r} is not a file")
    with open_page(path.as_uri(), width=width, timeout=timeout, chromium=chromium) as opened:
        return _check(opened, screenshot)


class Page:
    """A page open in headless Chromium (from :func:`open_page`): evaluate, wait, screenshot.

    Attributes
    ----------
    url : str
        The URL the page was opened at.
    """

    def __init__(self, pipe: _Pipe, session: str, url: str) -> None:
        self._pipe = pipe
        self._session = session
        self.url = url

    @property
    def events(self) -> list[dict[str, Any]]:
        """The DevTools events received so far (console, network, log)."""
        return self._pipe.events

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        answer = self._pipe.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self._session
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"evaluating {expression!r} failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_until(self, expression: str, timeout: float) -> Any:
        """Poll a JavaScript expression every 50 ms until it is truthy.

        Returns its value; raises BrowserError when ``timeout`` seconds pass first.
        """
        until = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > until:
                raise BrowserError(f"{expression!r} was not true within {timeout} s")
            time.sleep(0.05)  # polling the page under the deadline above

    def key(self, key: str, code: str, key_code: int, text: str = "") -> None:
        """Press and release one key as a keyboard user would: ``Tab`` moves the focus, ``Enter`` (text ``"\\r"``)
        activates what has it."""
        down: dict[str, Any] = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                                "windowsVirtualKeyCode": key_code}
        if text:
            down["text"] = text
        for event in (down, {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": key_code}):
            self._pipe.send("Input.dispatchKeyEvent", event, session=self._session)

    def screenshot(self, file: str | os.PathLike[str], full: bool = True) -> Path:
        """Save a PNG of the whole page (``full``) or of the viewport."""
        params: dict[str, Any] = {"format": "png"}
        if full:
            metrics = self._pipe.send("Page.getLayoutMetrics", session=self._session)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            )
        shot = self._pipe.send("Page.captureScreenshot", params, session=self._session)
        path = Path(file)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextlib.contextmanager
def open_page(
    url: str,
    *,
    width: int = 1280,
    height: int = 900,
    timeout: float = 60.0,
    chromium: str | None = None,
) -> Iterator[Page]:
    """Open ``url`` in headless Chromium and yield the :class:`Page` once it has loaded.

    Parameters
    ----------
    url : str
        A ``file://`` or ``http://`` URL.
    width, height : int
        Viewport size in CSS pixels.
    timeout : float, default 60
        Seconds by which every answer of the browser must have arrived, from the start.
    chromium : str, optional
        The executable; default :func:`find_chromium`.

    Raises
    ------
    BrowserError
        If no Chromium is found, it fails to start, or it does not answer in time.
    """
    executable = chromium or find_chromium()
    if executable is None:
        raise BrowserError(f"no Chromium found on PATH (tried {', '.join(_CANDIDATES)}); 'make setup' installs it")
    deadline = time.monotonic() + timeout
    to_read, to_browser = os.pipe()  # browser reads commands on fd 3
    from_browser, to_write = os.pipe()  # and writes answers on fd 4

    def child_fds() -> None:
        # Copies above 4 first, so that neither end is overwritten (or left close-on-exec) when the
        # pipe itself got descriptor 3 or 4; dup2's copies are inherited by chromium.
        reading, writing = os.dup(to_read), os.dup(to_write)
        os.dup2(reading, 3)
        os.dup2(writing, 4)

    with tempfile.TemporaryDirectory(prefix="terrain-chromium-", ignore_cleanup_errors=True) as profile:
        arguments = [
            executable,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--mute-audio",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        process = subprocess.Popen(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,  # noqa: PLW1509 - dup2 into the fixed descriptors the protocol uses
            close_fds=False,  # Python's own descriptors are close-on-exec; 3 and 4 must stay open
            start_new_session=True,  # chromium and its helper processes: one process group, stopped together
        )
        os.close(to_read)
        os.close(to_write)
        pipe = _Pipe(process, to_browser, from_browser, deadline)
        try:
            yield _navigate(pipe, url, width, height)
        finally:
            _stop(pipe, process)
            os.close(to_browser)
            os.close(from_browser)


def _navigate(pipe: _Pipe, url: str, width: int, height: int) -> Page:
    target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.send(f"{domain}.enable", session=session)
    pipe.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )
    pipe.events.clear()  # the blank page's events are not the page's
    pipe.send("Page.navigate", {"url": url}, session=session)
    pipe.wait_for("Page.loadEventFired")
    return Page(pipe, session, url)


def _stop(pipe: _Pipe, process: subprocess.Popen[bytes]) -> None:
    """Close the browser, then make sure nothing of its process group is left (within 10 s)."""
    try:
        pipe.deadline(time.monotonic() + 5)
        pipe.send("Browser.close")
    except (BrowserError, OSError):
        pass  # it is stopped by signal below
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    # Helper processes (zygote, renderer, crashpad) of the group still writing to the profile: stop them
    # and wait until the group is empty, so the profile directory can be removed.
    until = time.monotonic() + 5
    while time.monotonic() < until:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)  # polling the group until it is gone, under the deadline above


def _check(page: Page, screenshot: str | os.PathLike[str] | None) -> PageCheck:
    result = PageCheck(page.url)
    result.images = [
        Image(i["source"], bool(i["complete"]), int(i["width"])) for i in json.loads(page.evaluate(_IMAGES_SCRIPT))
    ]
    result.headings = list(json.loads(page.evaluate(_HEADINGS_SCRIPT)))
    if screenshot is not None:
        result.screenshot = page.screenshot(screenshot)
    result.console_errors, result.requests = page_problems(page)
    return result


def page_problems(page: Page) -> tuple[list[str], list[str]]:
    """The console errors and the requests for anything but the page itself and ``data:`` URIs, so far."""
    errors: list[str] = []
    requests: list[str] = []
    for event in page.events:
        method = event.get("method")
        params = event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"{entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            requested = str(params.get("request", {}).get("url", ""))
            if requested != page.url and not requested.startswith("data:"):
                requests.append(requested)
    return errors, requests
