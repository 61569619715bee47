"""The student page in a real browser: headless Chromium (Debian's) loads the form, a file is put
in its file input and the form is submitted (driven over the DevTools protocol; the page itself
runs no script), the feedback page reloads itself until the grade is done, and the test reads the
rendered DOM. The DOM and a phone-sized screenshot are kept in the test's folder (path printed)."""
from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from tests.support.grading import SUBMISSIONS, grade
from tests.support.serving import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(autouse=True)
def _chromium_installed():
    """A missing browser fails these tests, never skips them: scripts/services installs it."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: scripts/services installs it (scripts/test runs it)")

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}


class Browser:
    """Headless Chromium of the test's own, and one DevTools session on its first tab."""

    def __init__(self, folder: Path):
        profile = folder / "chromium-profile"
        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        port_file = profile / "DevToolsActivePort"
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        while True:
            try:
                tabs = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
                page = next(t for t in tabs if t["type"] == "page")
                break
            except (httpx.HTTPError, StopIteration):
                assert time.monotonic() < deadline, "chromium has no tab"
                time.sleep(0.2)
        self.devtools_url = page["webSocketDebuggerUrl"]
        self.ws = None  # the DevTools session, opened by the fixture
        self._ids = itertools.count(1)

    def call(self, method: str, **params) -> dict:
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == message_id:
                assert "error" not in message, message
                return message["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except AssertionError:  # the page is between two loads
                value = None
            if value:
                return value
            assert time.monotonic() < deadline, f"never true in the page: {expression}"
            time.sleep(0.3)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=20)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path)
    try:
        with connect(b.devtools_url, max_size=None, open_timeout=30) as b.ws:
            yield b
    finally:
        b.close()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, "--slots", "1")
    yield s
    s.stop()


def test_a_student_uploads_in_the_browser_and_reads_the_feedback(server, browser, tmp_path):
    submission = SUBMISSIONS / "buggy" / "mask_after_softmax__loop.py"
    browser.call("Emulation.setDeviceMetricsOverride", **PHONE)
    browser.call("Page.enable")
    browser.call("Page.navigate", url=server.url + "/")
    browser.wait_for("document.readyState === 'complete' && !!document.getElementById('file')", 60)
    # What a student does: choose the exercise, pick the file, press the button.
    document = browser.call("DOM.getDocument")["root"]["nodeId"]
    file_input = browser.call("DOM.querySelector", nodeId=document, selector="input[type=file]")["nodeId"]
    browser.call("DOM.setFileInputFiles", nodeId=file_input, files=[str(submission)])
    assert browser.evaluate("document.getElementById('exercise').value") == "causal-self-attention"
    browser.evaluate("document.getElementById('submit').click()")
    browser.wait_for("location.pathname.startsWith('/grades/')", 60)
    assert browser.wait_for("document.querySelector('meta[http-equiv=refresh]') !== null "
                            "|| document.getElementById('result') !== null", 60)
    browser.wait_for("document.getElementById('result') !== null", 240)  # reloaded itself until done

    dom = browser.call("DOM.getOuterHTML", nodeId=browser.call("DOM.getDocument")["root"]["nodeId"])["outerHTML"]
    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    (tmp_path / "feedback.html").write_text(dom)
    (tmp_path / "feedback.png").write_bytes(shot)
    print(f"\nrendered feedback kept in {tmp_path / 'feedback.html'} and {tmp_path / 'feedback.png'}")

    # The same verdict as the terminal: the score, the bug paragraph, the points table, what went wrong.
    cli = grade(submission)
    expected_score = f"{cli.result['score']:g} / {cli.result['max_score']:g}"
    assert browser.evaluate("document.getElementById('score').textContent.trim()") == expected_score
    assert browser.evaluate("[...document.querySelectorAll('[data-bug]')].map(e => e.dataset.bug)") == \
        [b["id"] for b in cli.result["bugs"]]
    bug_text = browser.evaluate("document.querySelector('[data-bug]').innerText")
    assert cli.result["bugs"][0]["fix"] in bug_text.replace("\n", " ")
    titles = browser.evaluate("[...document.querySelectorAll('#points tbody tr:not(.total) td:nth-child(2)')]"
                              ".map(e => e.textContent)")
    names = [t["name"] for t in cli.result["tests"] if t["max_score"]]
    assert len(titles) >= 5 and all(title and any(n.startswith(title) for n in names) for title in titles)
    assert "What went wrong" in dom
    # Readable on a phone: nothing wider than the screen.
    assert browser.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert shot.startswith(b"\x89PNG")


def test_chromium_dump_dom_of_a_feedback_page(server, tmp_path):
    """The page as `chromium --dump-dom` renders it, after a form post made as the browser makes it."""
    submission = SUBMISSIONS / "correct" / "einsum.py"
    answer = server.client.post("/grades", files={"file": (submission.name, submission.read_bytes(), "text/x-python")},
                                data={"exercise": "causal-self-attention"}, follow_redirects=False)
    assert answer.status_code == 303
    url = server.url + answer.headers["location"]
    deadline = time.monotonic() + 240
    while 'id="result"' not in server.client.get(url).text:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    profile = tmp_path / "profile"
    dumped = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                             "--dump-dom", url], capture_output=True, text=True, timeout=120)
    shot = tmp_path / "correct.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                    f"--screenshot={shot}", "--window-size=390,1400", url], capture_output=True, timeout=120)
    (tmp_path / "correct.html").write_text(dumped.stdout)
    print(f"\ndumped DOM kept in {tmp_path / 'correct.html'}, screenshot {shot}")
    assert 'data-status="graded"' in dumped.stdout and 'id="score">100 / 100<' in dumped.stdout
    assert "What went wrong" not in dumped.stdout
    assert shot.read_bytes().startswith(b"\x89PNG")


DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}


def _open_form_and_upload(browser: Browser, server: Server, path: Path) -> None:
    browser.call("Page.navigate", url=server.url + "/")
    browser.wait_for("document.readyState === 'complete' && !!document.getElementById('file')", 60)
    document = browser.call("DOM.getDocument")["root"]["nodeId"]
    file_input = browser.call("DOM.querySelector", nodeId=document, selector="input[type=file]")["nodeId"]
    browser.call("DOM.setFileInputFiles", nodeId=file_input, files=[str(path)])
    browser.evaluate("document.getElementById('submit').click()")


def test_every_page_a_student_meets_is_a_page_that_fits_the_screen(server, browser, tmp_path):
    """Each error a student can meet (a file over its kind's limit, one over the upload limit, a
    form without a file, an unknown address, too many uploads) is an HTML page in the page's words,
    never JSON; the form announces the limits it applies; a long file name wraps; the feedback of an
    unexplained mistake leads with the score and its one sentence, the probes' numbers folded away.
    Each page is shot at a phone's and a desktop's width (kept in the test's folder)."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    browser.call("Page.enable")

    def look(name: str, metrics: dict) -> str:
        """The page's text, after checking that it is HTML and fits the width; its screenshot kept."""
        browser.wait_for("document.readyState === 'complete'", 60)
        assert browser.evaluate("document.contentType") == "text/html", name
        text = browser.evaluate("document.body.innerText")
        assert '{"detail"' not in text, (name, text)
        assert browser.evaluate("document.documentElement.scrollWidth") <= metrics["width"], name
        for suffix, whole in (("", False), ("-full", True)):  # what the screen shows first, and all of it
            shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=whole)["data"]
            (shots / f"{name}-{metrics['width']}{suffix}.png").write_bytes(base64.b64decode(shot))
        return text

    big_py = tmp_path / "big.py"
    big_py.write_bytes(b"x = 1\n" + b"#" * (600 * 1024))
    huge = tmp_path / "huge.ipynb"
    huge.write_bytes(b"{" + b" " * (17 * 1024 * 1024) + b"}")
    long_name = tmp_path / ("my_attention_solution_final_version_really_final_" * 3 + ".py")
    long_name.write_bytes((SUBMISSIONS / "unknown" / "cosine_attention.py").read_bytes())
    for metrics in (PHONE, DESKTOP):
        browser.call("Emulation.setDeviceMetricsOverride", **metrics)
        browser.call("Page.navigate", url=server.url + "/")
        form = look("form", metrics)
        assert "a .py of at most 512 KB, or a notebook (.ipynb) of at most 16 MB" in form, form

        _open_form_and_upload(browser, server, big_py)
        browser.wait_for("!!document.getElementById('error')", 60)
        assert "the grader takes a .py file of at most 512 KB" in look("too-large-py", metrics)

        _open_form_and_upload(browser, server, huge)
        browser.wait_for("document.body && document.body.innerText.includes('too large')", 60)
        assert "The grader takes a .py file of at most 512 KB" in look("too-large-upload", metrics)

        browser.call("Page.navigate", url=server.url + "/no/such/page")
        assert "does not name a page" in look("not-found", metrics)
        browser.call("Page.navigate", url=server.url + "/grades")
        assert "takes uploads from the form only" in look("not-a-page", metrics)

    # A form sent without its file field (a script, an old browser): a page, not FastAPI's 422.
    bare = httpx.post(server.url + "/grades", data={"exercise": "causal-self-attention"}, timeout=30)
    assert bare.status_code == 400 and bare.headers["content-type"].startswith("text/html"), bare.text[:300]
    assert "Choose a file" in bare.text or "Choose your .py" in bare.text

    # The feedback of an unexplained mistake under a long name, at both widths.
    browser.call("Emulation.setDeviceMetricsOverride", **PHONE)
    _open_form_and_upload(browser, server, long_name)
    browser.wait_for("document.getElementById('result') !== null", 240)
    feedback_url = browser.evaluate("location.href")
    for metrics in (PHONE, DESKTOP):
        browser.call("Emulation.setDeviceMetricsOverride", **metrics)
        browser.call("Page.navigate", url=feedback_url)
        browser.wait_for("document.getElementById('result') !== null", 60)
        text = look("feedback-unexplained", metrics)
        # The score and the one sentence first, before the table and before any probe's numbers.
        assert text.index("Score") < text.index("Test group"), text[:600]
        summary = browser.evaluate("document.getElementById('summary').innerText")
        assert "no mistake in the catalog" in summary and "largest difference" not in summary, summary
        assert browser.evaluate("document.querySelector('#diagnosis details').open") is False
        # folded away until the student opens it (each failed case's got / expected comes below the table)
        assert "largest difference" not in text.partition("What went wrong")[0]
        assert browser.evaluate("document.querySelector('#summary').compareDocumentPosition("
                                "document.getElementById('points')) & Node.DOCUMENT_POSITION_FOLLOWING")

    # Too many uploads from one address: a page that says when to come back.
    answers = [httpx.post(server.url + "/grades", files={"file": ("x.txt", b"no")}, timeout=30) for _ in range(12)]
    limited = next(a for a in answers if a.status_code == 429)
    assert limited.headers["content-type"].startswith("text/html") and "try again in" in limited.text
    print(f"\nscreenshots kept in {shots}")
