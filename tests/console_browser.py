#!/usr/bin/env python3
"""The operator console in a real browser: Debian's chromium, headless, driven over the
DevTools protocol through --remote-debugging-pipe (NUL-separated JSON on file descriptors
3 and 4: no websocket library, nothing beyond the standard library).

Against a database of its own, seeded with known counts, served by notify-local (API role,
so no sweeper changes what was seeded) with an operator key, it checks that:
  - the page loads with no console error, no exception and no CSP violation;
  - every control is labelled, the view tabs follow the arrow keys;
  - the overview shows the seeded counts by channel and status;
  - the digest shows the dead-letter growth the seed causes, with its redrive button;
  - a Redrive clicked in the dead-letter view (a real mouse click) changes the database;
  - a notification's detail shows its attempts and webhook events;
  - the campaigns view shows a campaign seeded through the API with its progress, and its
    Cancel button (a real click) cancels it in the database;
  - the templates view lists a template seeded through the API with its latest version and
    locales, shows its versions, and its preview renders the fields as text, never markup;
  - at 1280x800 and at 390 px wide nothing overflows the window sideways.
Each check prints one `console-browser: ok` line; the first failure exits non-zero.

Environment: DATABASE_URL (the server; a database is created and dropped on it),
NOTIFY_LOCAL (the binary; default target/debug/notify-local), CHROMIUM (default chromium),
CONSOLE_SCREENSHOTS (a folder: PNGs of the main views are written there),
CONSOLE_BROWSER_WRONG_COUNT=1 expects one PENDING email more than was seeded, to show that
the check fails.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVER_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
NOTIFY_LOCAL = os.environ.get("NOTIFY_LOCAL", os.path.join(ROOT, "target", "debug", "notify-local"))
CHROMIUM = os.environ.get("CHROMIUM", "chromium")
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
WRONG = os.environ.get("CONSOLE_BROWSER_WRONG_COUNT") == "1"

# What the seed holds, by channel and status.
SEEDED = {
    ("EMAIL", "PENDING"): 7,
    ("EMAIL", "SENT"): 12,
    ("SMS", "SENT"): 5,
    ("EMAIL", "DEAD_LETTERED"): 3,
    ("PUSH", "DEAD_LETTERED"): 2,
    ("SMS", "FAILED"): 1,
}


class Failure(Exception):
    pass


def ok(text):
    print(f"console-browser: ok   {text}", flush=True)


def database_url(name):
    parts = urlsplit(SERVER_URL)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def psql(url, sql):
    done = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise Failure(f"psql failed: {done.stderr.strip()}")
    return done.stdout.strip()


SEED = """
INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority, payload,
    status, scheduled_at, next_attempt_at, attempt_count, max_attempts, last_error, sent_at,
    failed_at, dead_lettered_at, created_at)
SELECT gen_random_uuid(), 'seed-' || s.channel || '-' || s.status || '-' || g, repeat('0', 64),
       lower(s.channel) || '-' || g || '@example.com', s.channel, 1, '{"text": "hello"}',
       s.status, now() - interval '10 minutes',
       CASE WHEN s.status = 'PENDING' THEN now() + interval '1 day' ELSE now() - interval '10 minutes' END,
       CASE WHEN s.status = 'DEAD_LETTERED' THEN 6 WHEN s.status = 'PENDING' THEN 0 ELSE 1 END, 6,
       s.error,
       CASE WHEN s.status = 'SENT' THEN now() - interval '9 minutes' END,
       CASE WHEN s.status = 'FAILED' THEN now() - interval '9 minutes' END,
       CASE WHEN s.status = 'DEAD_LETTERED' THEN now() - interval '5 minutes' END,
       now() - interval '10 minutes' + g * interval '1 second'
FROM (VALUES ('EMAIL', 'PENDING', 7, NULL), ('EMAIL', 'SENT', 12, NULL), ('SMS', 'SENT', 5, NULL),
             ('EMAIL', 'DEAD_LETTERED', 3, 'provider said 503 Service Unavailable'),
             ('PUSH', 'DEAD_LETTERED', 2, 'endpoint disabled'),
             ('SMS', 'FAILED', 1, 'invalid number')) AS s (channel, status, n, error)
CROSS JOIN LATERAL generate_series(1, s.n) AS g;
INSERT INTO delivery_attempts (notification_id, attempt, worker, started_at, finished_at, outcome, error)
SELECT id, a, 'worker-1', now() - interval '6 minutes', now() - interval '6 minutes', 'TEMPORARY', last_error
FROM notifications, generate_series(1, 2) AS a WHERE status = 'DEAD_LETTERED';
INSERT INTO webhook_events (id, type, notification_id, status, attempt_count, redrive_generation,
    occurred_at, dispatch_state, dispatch_attempts, delivered_at)
SELECT gen_random_uuid(), 'notification.dead_lettered', id, 'DEAD_LETTERED', 6, 0,
       dead_lettered_at, 'DELIVERED', 1, dead_lettered_at + interval '1 second'
FROM notifications WHERE status = 'DEAD_LETTERED';
"""


class Chromium:
    """A headless chromium and one page, over the DevTools pipe."""

    def __init__(self, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire():
            # Copies first, so that neither end is overwritten before it is placed.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [CHROMIUM, "--headless", "--remote-debugging-pipe", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--hide-scrollbars", "--window-size=1280,800", f"--user-data-dir={profile}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        # 3 and 4 are kept open in the child, where wire() has put the pipe's ends.
        self.log = open(os.path.join(profile + ".log"), "w")
        self.process = subprocess.Popen(args + ["about:blank"],
                                        pass_fds=(3, 4, to_browser_r, from_browser_w),
                                        preexec_fn=wire, stdout=self.log, stderr=self.log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 browser=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise Failure("chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise Failure("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, browser=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise Failure(f"evaluating {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=15):
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise Failure(f"timed out waiting for {what} (last value {value!r})")

    def click(self, selector):
        """A real mouse click at the middle of the element."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        if not box:
            raise Failure(f"nothing to click at {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1],
                                                   "button": "left", "clickCount": 1})

    def key(self, key, code, key_code):
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": key_code})

    def problems(self):
        """Console errors, uncaught exceptions and browser-logged errors (CSP included)."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console." + params["type"] + ": " + json.dumps(params.get("args")))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params.get("exceptionDetails")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
        return found

    def screenshot(self, name, whole_page=False):
        if not SCREENSHOTS:
            return
        os.makedirs(SCREENSHOTS, exist_ok=True)
        params = {"format": "png"}
        if whole_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = self.call("Page.captureScreenshot", params)["data"]
        path = os.path.join(SCREENSHOTS, name)
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
        ok(f"screenshot {os.path.relpath(path, ROOT)}")

    def viewport(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})

    def close(self):
        try:
            self.call("Browser.close", browser=True, timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


# Content seeded through the API once the server runs.
TEMPLATE = {
    "channel": "EMAIL",
    "defaultLocale": "en",
    "locales": {
        "en": {"subject": "Hello {{ name }}", "text": "Welcome, {{ name }}",
               "html": "<p>Welcome, <b>{{ name }}</b></p>"},
        "pt": {"subject": "Olá {{ name }}", "text": "Bem-vindo, {{ name }}"},
    },
    "sampleData": {"name": "Ada"},
}
CAMPAIGN = {
    "idempotencyKey": "console-spring", "name": "Spring launch", "channel": "EMAIL",
    "template": {"id": "welcome", "data": {"name": "friend"}},
    "audience": {"recipientIds": ["r1", "r2", "r3", "r4"]},
}


def call_api(base, key, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "authorization": "Bearer " + key, "content-type": "application/json", "accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raise Failure(f"{method} {path} answered {error.code}: {error.read().decode(errors='replace')}")


def seed_content(base, key, url):
    """One template in two versions and one campaign, halfway expanded (the API role runs no
    sweeper, so it stays EXPANDING)."""
    version = dict(TEMPLATE, locales=dict(TEMPLATE["locales"], en=dict(TEMPLATE["locales"]["en"], subject="Hi {{ name }}")))
    call_api(base, key, "POST", "/templates/welcome/versions", version)
    call_api(base, key, "POST", "/templates/welcome/versions", TEMPLATE)
    campaign = call_api(base, key, "POST", "/campaigns", CAMPAIGN)
    psql(url, f"UPDATE campaigns SET expanded = 2 WHERE id = '{campaign['id']}'")
    ok(f"seeded template welcome (2 versions) and campaign {campaign['id']} (2 of 4 expanded) through the API")
    return campaign["id"]


def start_server(url, work):
    log = open(os.path.join(work, "server.log"), "w+")
    env = dict(os.environ, DATABASE_URL=url, APP_ROLE="api", PORT="0", RUST_LOG="warn")
    server = subprocess.Popen([NOTIFY_LOCAL], env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        log.seek(0)
        found = re.search(r"listening on (http://\S+)", log.read())
        if found:
            base = found.group(1)
            for _ in range(100):
                try:
                    urllib.request.urlopen(base + "/health", timeout=2)
                    return server, base
                except Exception:
                    time.sleep(0.1)
        if server.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    raise Failure("notify-local did not start:\n" + log.read())


def run(browser, base, url, key, campaign):
    expected = dict(SEEDED)
    if WRONG:
        expected[("EMAIL", "PENDING")] += 1
        print("console-browser: CONSOLE_BROWSER_WRONG_COUNT=1: expecting 8 PENDING emails, 7 seeded")

    browser.viewport(1280, 800)
    browser.call("Page.navigate", {"url": base + "/console"})
    browser.wait_for("document.readyState === 'complete' && !!document.getElementById('key')", "the page")
    ok("GET /console loaded in chromium " + browser.evaluate("navigator.userAgent.match(/Chrome\\/[0-9.]+/)[0]"))

    unlabelled = browser.evaluate(
        "[...document.querySelectorAll('input, select')].filter(e => e.labels.length === 0).map(e => e.id)")
    if unlabelled:
        raise Failure(f"controls without a label: {unlabelled}")
    ok("every input and select has a label")

    # The key, typed as a person would, kept in sessionStorage only.
    browser.evaluate("document.getElementById('key').focus()")
    browser.call("Input.insertText", {"text": key})
    browser.click("#key-form button[type=submit]")
    browser.wait_for(f"sessionStorage.getItem('notifyQueueOperatorKey') === {json.dumps(key)}", "the key stored")
    if browser.evaluate("localStorage.length + document.cookie.length") != 0:
        raise Failure("the key reached localStorage or a cookie")
    ok("the operator key is kept in sessionStorage only")

    cells = " && ".join(
        f"(document.querySelector('[data-cell=\"{c} {s}\"]') || {{}}).textContent === '{n}'"
        for (c, s), n in expected.items())
    try:
        browser.wait_for(cells, "the seeded counts", timeout=12)
    except Failure:
        shown = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('[data-cell]')].map(e => [e.dataset.cell, e.textContent]))")
        wrong = {f"{c} {s}": (n, shown.get(f"{c} {s}")) for (c, s), n in expected.items()
                 if shown.get(f"{c} {s}") != str(n)}
        raise Failure(f"counts shown differ from the expected ones (expected, shown): {wrong}")
    dead_total = browser.evaluate("document.getElementById('total-DEAD_LETTERED').textContent")
    if dead_total != "5":
        raise Failure(f"dead-lettered total shows {dead_total!r}, seeded 5")
    ok("the overview shows the seeded counts: " + ", ".join(f"{c} {s} {n}" for (c, s), n in expected.items()))
    browser.screenshot("overview.png")

    # Keyboard: the arrow key moves from the Overview tab to the Digest tab.
    browser.evaluate("document.getElementById('tab-overview').focus()")
    browser.key("ArrowRight", "ArrowRight", 39)
    browser.wait_for("document.getElementById('tab-digest').getAttribute('aria-selected') === 'true'"
                     " && document.activeElement.id === 'tab-digest' && !document.getElementById('digest').hidden",
                     "the digest tab selected by the arrow key")
    ok("the view tabs follow the arrow keys")
    browser.wait_for("!!document.querySelector('[data-code=DLQ_GROWTH] button')", "the DLQ_GROWTH finding")
    title = browser.evaluate("document.querySelector('[data-code=DLQ_GROWTH] h3 .title').textContent")
    if "5 notifications dead-lettered" not in title:
        raise Failure(f"the digest's DLQ_GROWTH title is {title!r}")
    ok(f"the digest shows {title!r} with its redrive button")
    browser.screenshot("digest.png")

    browser.click("#tab-dlq")
    browser.wait_for("document.querySelectorAll('#dlq-table tbody tr').length === 5", "five dead letters")
    ok("the dead-letter view lists the 5 dead-lettered notifications")
    browser.evaluate("document.getElementById('dlq-channel').value = 'PUSH'")
    browser.click("#dlq-filter button[type=submit]")
    browser.wait_for("document.querySelectorAll('#dlq-table tbody tr').length === 2", "two PUSH dead letters")
    ok("the channel filter shows the 2 PUSH ones")
    browser.screenshot("dead-letters.png")
    target = browser.evaluate("document.querySelector('#dlq-table tbody tr').dataset.id")
    before = psql(url, f"SELECT status || ' ' || redrive_count FROM notifications WHERE id = '{target}'")
    browser.click(f"button[data-redrive=\"{target}\"]")
    deadline = time.time() + 10
    after = before
    while time.time() < deadline and after == before:
        time.sleep(0.1)
        after = psql(url, f"SELECT status || ' ' || redrive_count FROM notifications WHERE id = '{target}'")
    if after != "PENDING 1":
        raise Failure(f"the redrive click left {target} at {after!r} (was {before!r})")
    browser.wait_for("document.querySelectorAll('#dlq-table tbody tr').length === 1", "the row to leave the list")
    ok(f"a Redrive clicked in the page changed the database: {target} {before} -> {after}")

    # A notification's detail, opened from the list.
    browser.click("#dlq-table tbody tr td button")
    browser.wait_for("/is DEAD_LETTERED/.test(document.getElementById('detail-status').textContent)",
                     "the detail view")
    rows = browser.evaluate("[...document.querySelectorAll('#detail-body tbody')].map(b => b.rows.length)")
    if rows != [2, 1]:
        raise Failure(f"detail tables hold {rows} rows; expected 2 attempts and 1 webhook event")
    ok("the detail view shows 2 attempts and 1 webhook event")
    browser.screenshot("notification.png", whole_page=True)

    # Campaigns: progress of the audience, and a Cancel that reaches the database.
    browser.click("#tab-campaigns")
    row = f"#campaigns-table tr[data-id=\"{campaign}\"]"
    browser.wait_for(f"!!document.querySelector('{row} button[data-cancel]')", "the seeded campaign")
    shown = browser.evaluate(
        f"(() => {{ const r = document.querySelector('{row}'); return {{"
        " name: r.cells[0].textContent, status: r.cells[1].textContent,"
        " bars: [...r.querySelectorAll('progress')].map(p => [p.getAttribute('aria-label'), p.value, p.max]),"
        " text: r.cells[2].textContent }; })()")
    if (shown["name"], shown["status"]) != ("Spring launch", "EXPANDING") \
            or shown["bars"] != [["Expanded", 2, 4], ["Finished", 0, 4]]:
        raise Failure(f"the campaign row shows {shown}")
    ok(f"the campaigns view shows Spring launch EXPANDING with its progress: {shown['text']}")
    browser.screenshot("campaigns.png")
    browser.click(f"{row} button[data-cancel]")
    deadline = time.time() + 10
    status = "EXPANDING"
    while time.time() < deadline and status == "EXPANDING":
        time.sleep(0.1)
        status = psql(url, f"SELECT status FROM campaigns WHERE id = '{campaign}'")
    if status != "CANCELLED":
        raise Failure(f"the Cancel click left the campaign {status}")
    browser.wait_for(f"document.querySelector('{row}').cells[1].textContent === 'CANCELLED'"
                     f" && !document.querySelector('{row} button[data-cancel]')", "the cancelled campaign")
    ok("a Cancel clicked in the page cancelled the campaign in the database")

    # Templates: the listing, a template's versions and a preview shown as text.
    browser.click("#tab-templates")
    browser.wait_for("!!document.querySelector('#templates-table tr[data-id=welcome]')", "the seeded template")
    cells = browser.evaluate("[...document.querySelector('#templates-table tr[data-id=welcome]').cells]"
                             ".slice(0, 4).map(c => c.textContent)")
    if cells != ["welcome", "EMAIL", "2", "en, pt (default en)"]:
        raise Failure(f"the template row shows {cells}")
    ok(f"the templates view lists welcome: {cells}")
    browser.click("button[data-template=welcome]")
    browser.wait_for("document.querySelectorAll('#versions-table tbody tr').length === 2", "two versions")
    browser.click("#versions-table button[data-version='1']")
    browser.wait_for("/Hi \\{\\{ name \\}\\}/.test(document.getElementById('versions-table').textContent)",
                     "version 1's source")
    ok("the template shows its 2 versions and version 1's source")
    browser.evaluate("document.getElementById('preview-locale').value = 'pt-BR';"
                     " document.getElementById('preview-data').value = '{\"name\": \"<i>Bo</i>\"}'")
    browser.click("#preview-form button[type=submit]")
    browser.wait_for("!!document.querySelector('#preview-fields pre[data-field=subject]')", "the pt preview")
    subject = browser.evaluate("document.querySelector('#preview-fields pre[data-field=subject]').textContent")
    if subject != "Olá <i>Bo</i>":
        raise Failure(f"the pt-BR preview's subject is {subject!r}")
    browser.evaluate("document.getElementById('preview-locale').value = 'en'")
    browser.click("#preview-form button[type=submit]")
    browser.wait_for("!!document.querySelector('#preview-fields pre[data-field=html]')", "the en preview")
    html = browser.evaluate("document.querySelector('#preview-fields pre[data-field=html]').textContent")
    markup = browser.evaluate("document.querySelectorAll('#preview-body p, #preview-body b, #preview-body i').length")
    if html != "<p>Welcome, <b>&lt;i&gt;Bo&lt;&#x2f;i&gt;</b></p>" or markup != 0:
        raise Failure(f"the en preview shows html {html!r} with {markup} rendered element(s)")
    ok("the preview renders pt-BR (as pt) and en, the HTML body as text, never as markup")
    browser.screenshot("templates.png", whole_page=True)

    for width, height in ((1280, 800), (390, 844)):
        browser.viewport(width, height)
        for tab in ("overview", "digest", "dlq", "campaigns", "templates", "detail"):
            browser.click(f"#tab-{tab}")
            time.sleep(0.2)
            overflow = browser.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if overflow > 0:
                wide = browser.evaluate(
                    "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right"
                    " > window.innerWidth + 1).slice(0, 8)"
                    ".map(e => e.tagName + '#' + e.id + '.' + e.className)")
                raise Failure(f"the {tab} view overflows {width} px by {overflow} px: {wide}")
        ok(f"no view overflows a {width}x{height} window sideways")
    browser.click("#tab-overview")
    time.sleep(0.3)
    browser.screenshot("overview-narrow.png", whole_page=True)

    problems = browser.problems()
    if problems:
        raise Failure("the page logged errors:\n  " + "\n  ".join(problems))
    ok("no console error, exception or CSP violation")


def main():
    if not shutil.which(CHROMIUM):
        print(f"console-browser: {CHROMIUM} not found (apt-get install chromium)", file=sys.stderr)
        return 2
    name = f"console_browser_{os.getpid()}"
    url = database_url(name)
    work = tempfile.mkdtemp(prefix="console-browser-")
    server = browser = None
    try:
        psql(SERVER_URL, f"CREATE DATABASE {name}")
        env = dict(os.environ, DATABASE_URL=url)
        subprocess.run([NOTIFY_LOCAL, "migrate"], env=env, check=True, capture_output=True)
        key = subprocess.run([NOTIFY_LOCAL, "keys", "create", "--scope", "operator", "--name", "console"],
                             env=env, check=True, capture_output=True, text=True).stdout.strip()
        psql(url, SEED)
        ok("seeded " + name + ": " + ", ".join(f"{c} {s} {n}" for (c, s), n in SEEDED.items()))
        server, base = start_server(url, work)
        ok(f"notify-local (APP_ROLE=api, operator key required) at {base}")
        campaign = seed_content(base, key, url)
        browser = Chromium(os.path.join(work, "profile"))
        run(browser, base, url, key, campaign)
        print("console-browser: passed", flush=True)
        return 0
    except Failure as failure:
        print(f"console-browser: FAILED {failure}", file=sys.stderr, flush=True)
        return 1
    finally:
        if browser:
            browser.close()
        if server:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        try:
            psql(SERVER_URL, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except Failure as failure:
            print(f"console-browser: {failure}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
