#!/usr/bin/env python3
"""The compliance pages (/ui/) in a real browser: headless Chromium driven by Selenium.

Run by scripts/ui-browser-test, which starts PostgreSQL, the Apple sandbox and `revoker serve`
and hands this script what it needs through the environment (never a secret itself: the API
keys are read from files in the private work directory):

  UI_BASE_URL      http://127.0.0.1:PORT of `revoker serve` (with "http.ui.enabled")
  UI_SANDBOX_URL   http://127.0.0.1:PORT of `revoker sandbox`
  UI_CLIENT_ID     the app registered in both
  UI_FACEBOOK_APP  a Facebook app registered in both (its Data Deletion Request opens a status page)
  UI_WORK          the private work directory: keys/{compliance,billing,support,custody}.key, downloads
  UI_PUBLIC_KEY    the audit public key (PEM), from `revoker audit public-key`
  UI_SERVE_LOG     the log of `revoker serve` (checked for secrets, its tail shown on failure)
  UI_SCREENSHOTS   where the PNGs go
  REVOKER_BIN      the revoker binary (for `revoker audit verify-receipt`)

Prints one line per check ("ok - ..." / "not ok - ..."); exits 1 if any failed.
"""
import csv
import datetime
import html
import io
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# Selenium Manager must never run (it would go online): the driver's path is given below, and
# these make any call to it offline, statless, and failing loudly.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")
os.environ.setdefault("SE_MANAGER_PATH", "/nonexistent/selenium-manager-must-not-run")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

BASE = os.environ["UI_BASE_URL"].rstrip("/")
SANDBOX = os.environ["UI_SANDBOX_URL"].rstrip("/")
CLIENT_ID = os.environ["UI_CLIENT_ID"]
FACEBOOK_APP = os.environ["UI_FACEBOOK_APP"]
WORK = Path(os.environ["UI_WORK"])
PUBLIC_KEY = os.environ["UI_PUBLIC_KEY"]
SERVE_LOG = Path(os.environ["UI_SERVE_LOG"])
SHOTS = Path(os.environ["UI_SCREENSHOTS"])
REVOKER = os.environ["REVOKER_BIN"]
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")

WAIT = 15  # seconds for any one page to show what it should
FINAL_STATES = {"succeeded", "failed", "cancelled"}
CSV_COLUMNS = ["request_id", "requested_at", "requested_by", "client_id", "external_reference", "apple_user_id", "outcome",
               "finished_at", "evidence_archive"]
SECURITY_HEADERS_CHECKED = "CSP default-src 'none' without script-src, X-Frame-Options DENY, nosniff, no-store"

KEYS = {name: (WORK / "keys" / f"{name}.key").read_text().strip() for name in ("compliance", "billing", "support", "custody")}
SECRETS = set(KEYS.values())  # grows with refresh tokens and the session token


class Abort(Exception):
    """A step the rest depends on failed: stop the browser part."""


# ---- reporting -------------------------------------------------------------------------------

results = []


def redact(text):
    text = str(text)
    for secret in sorted(SECRETS, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "[secret]")
    return text


def check(name, condition, detail=""):
    results.append(bool(condition))
    line = ("ok - " if condition else "not ok - ") + name
    if detail and not condition:
        line += f" ({detail})"
    print(redact(line), flush=True)
    return bool(condition)


def step(name, function, critical=False):
    """Runs one group of checks; an exception is a failed check (and stops the run if critical)."""
    try:
        function()
    except Abort:
        raise
    except Exception as error:  # noqa: BLE001 - every failure is reported, then the run goes on
        message = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
        check(f"{name}: finished without error", False, message)
        if critical:
            raise Abort(name) from error


# ---- HTTP outside the browser ----------------------------------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


# No proxy (loopback only), no redirect followed: a 303 is an answer to look at.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)


def http(method, url, headers=None, body=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _opener.open(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def api(method, path, key, payload=None):
    headers = {"Authorization": "Bearer " + KEYS[key], "Accept": "application/json"}
    body = None
    if payload is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(payload).encode()
    status, _, data = http(method, BASE + path, headers, body)
    return status, (json.loads(data) if data else None)


def sandbox(path, payload):
    status, _, data = http("POST", SANDBOX + path, {"Content-Type": "application/json"}, json.dumps(payload).encode())
    if status != 201:
        raise RuntimeError(f"the sandbox answered {status} to {path}")
    return json.loads(data)


def security_headers_ok(headers):
    """What is wrong with a page's security headers; empty when nothing is."""
    wrong = []
    csp = headers.get("Content-Security-Policy") or ""
    directives = {d.strip().split(" ", 1)[0]: d.strip() for d in csp.split(";") if d.strip()}
    if "default-src 'none'" not in csp:
        wrong.append(f"CSP {csp!r} lacks default-src 'none'")
    if "script-src" in directives and directives["script-src"] != "script-src 'none'":
        wrong.append(f"CSP allows scripts: {directives['script-src']!r}")
    if (headers.get("X-Frame-Options") or "").upper() != "DENY":
        wrong.append(f"X-Frame-Options {headers.get('X-Frame-Options')!r}")
    if (headers.get("X-Content-Type-Options") or "").lower() != "nosniff":
        wrong.append(f"X-Content-Type-Options {headers.get('X-Content-Type-Options')!r}")
    if "no-store" not in (headers.get("Cache-Control") or ""):
        wrong.append(f"Cache-Control {headers.get('Cache-Control')!r}")
    return wrong


def set_cookies(headers):
    return headers.get_all("Set-Cookie") or []


# ---- the browser -----------------------------------------------------------------------------

def make_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # required as root
        "--disable-dev-shm-usage",  # containers' /dev/shm is small
        "--disable-gpu",
        "--window-size=1280,900",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-features=MediaRouter,OptimizationHints,Translate,AutofillServerCommunication",
        # No DNS query at all: every name fails locally except loopback (IP literals included).
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    downloads = WORK / "downloads"
    downloads.mkdir(exist_ok=True)
    options.add_experimental_option("prefs", {
        "download.default_directory": str(downloads),
        "download.prompt_for_download": False,
        "download.directory_upgrade": True,
        "safebrowsing.enabled": False,
        "credentials_enable_service": False,
        "profile.password_manager_enabled": False,
    })
    # No driver log: it would record the API key typed into the sign-in form.
    service = Service(executable_path=CHROMEDRIVER, log_output=os.devnull)
    return webdriver.Chrome(service=service, options=options)


def download_into(driver, name):
    """A fresh folder that the browser's next downloads go to."""
    folder = WORK / "downloads" / name
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder), "eventsEnabled": False})
    return folder


def wait_for_download(folder, pattern, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = [p for p in folder.glob(pattern) if not p.name.endswith(".crdownload")]
        pending = list(folder.glob("*.crdownload"))
        if done and not pending and done[0].stat().st_size > 0:
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern} downloaded into {folder.name}; it holds {sorted(p.name for p in folder.iterdir())}")


DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}


def png_size(path):
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# Words in table cells and summaries broken across lines although the page could show them whole
# (`com.exampl|e.ui`), and whether the page is wider than the window.
BROKEN_WORDS_JS = """
const broken = [];
const room = document.querySelector('main').clientWidth;
for (const cell of document.querySelectorAll('td, dd')) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const words = /\\S+/g;
    let match;
    while ((match = words.exec(node.data)) !== null) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
      const lines = new Set(rects.map(r => Math.round(r.top)));
      const width = rects.reduce((sum, r) => sum + r.width, 0);
      if (lines.size > 1 && width <= room + 1) broken.push(match[0]);
    }
  }
}
return {broken: broken, pageWidth: document.documentElement.scrollWidth, window: window.innerWidth};
"""


def screenshots(driver, page):
    """`page`-desktop.png and `page`-phone.png of the page shown now (a GET page: it is reloaded),
    with its words kept whole where they fit."""
    url = driver.current_url
    for size, metrics in (("desktop", DESKTOP), ("phone", PHONE)):
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        driver.get(url)
        WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.readyState") == "complete")
        layout = driver.execute_script(BROKEN_WORDS_JS)
        check(f"{page} ({size}): no identifier broken that the page could show whole", not layout["broken"], str(layout["broken"][:5]))
        check(f"{page} ({size}): the page is no wider than the window", layout["pageWidth"] <= layout["window"],
              f"{layout['pageWidth']} > {layout['window']}")
        path = SHOTS / f"{page}-{size}.png"
        driver.save_screenshot(str(path))
        expected = (metrics["width"] * metrics["deviceScaleFactor"], metrics["height"] * metrics["deviceScaleFactor"])
        got = png_size(path)
        check(f"screenshot {path.name}, {expected[0]}x{expected[1]}", got == expected, f"{got[0]}x{got[1]}" if got else "not a PNG")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.get(url)


def path_of(driver):
    parts = urllib.parse.urlsplit(driver.current_url)
    return parts.path + (("?" + parts.query) if parts.query else "")


def wait_path(driver, prefix):
    """Whether the browser got to `prefix` (False at once on a page that shows an error)."""
    try:
        WebDriverWait(driver, WAIT).until(lambda d: path_of(d).startswith(prefix) or is_error_page(d))
    except WebDriverException:
        pass
    return path_of(driver).startswith(prefix) and not is_error_page(driver)


def is_error_page(driver):
    """The pages' error page: its title is a status ("403 Forbidden · Revoker compliance")."""
    return re.match(r"\d{3} ", driver.title or "") is not None


def result_rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")


def row_texts(driver):
    """Each result row as {label: text}, from the cells' data-label."""
    rows = []
    for row in result_rows(driver):
        cells = row.find_elements(By.TAG_NAME, "td")
        rows.append({cell.get_attribute("data-label"): cell.text for cell in cells}
                    | {"href": row.find_element(By.CSS_SELECTOR, "a").get_attribute("href")})
    return rows


def page_problem(driver):
    """What an unexpected page says: its heading and error, and a hint for a known cause."""
    parts = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "h1, .error") if e.text]
    text = " / ".join(parts) or driver.title
    if "sent from another site" in text:
        _, headers, _ = http("GET", BASE + "/ui/sign-in")
        policy = headers.get("Referrer-Policy")
        if policy == "no-referrer":
            text += (" [Chromium sends 'Origin: null' with a form posted from a page served with"
                     " 'Referrer-Policy: no-referrer', even to its own origin]")
    return text


def parse_set_cookie(header):
    """A Set-Cookie header as get_cookies() would show it."""
    first, *attributes = [part.strip() for part in header.split(";")]
    name, _, value = first.partition("=")
    cookie = {"name": name, "value": value, "httpOnly": False, "secure": False}
    for attribute in attributes:
        key, _, val = attribute.partition("=")
        key = key.lower()
        if key == "httponly":
            cookie["httpOnly"] = True
        elif key == "secure":
            cookie["secure"] = True
        elif key == "samesite":
            cookie["sameSite"] = val.capitalize()
        elif key == "path":
            cookie["path"] = val
    return cookie


def sign_in_form():
    """(csrf token, sign-in cookie) of a fresh sign-in page."""
    _, headers, body = http("GET", BASE + "/ui/sign-in")
    csrf = re.search(r'name="csrf" value="([^"]+)"', body.decode()).group(1)
    cookie = next(c.split(";")[0] for c in set_cookies(headers) if c.startswith("revoker_sign_in="))
    return csrf, cookie


def sign_in_over_http(key):
    """The session cookie (as a dict) that posting the sign-in form with `key` sets; None if none."""
    csrf, cookie = sign_in_form()
    form = urllib.parse.urlencode({"csrf": csrf, "api_key": KEYS[key]}).encode()
    status, headers, _ = http("POST", BASE + "/ui/sign-in", {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}, form)
    found = [parse_set_cookie(c) for c in set_cookies(headers) if c.startswith("revoker_session=")]
    found = [c for c in found if c["value"]]
    check(f"posting the sign-in form over HTTP (no Origin) with the {key} key: 303 to /ui/search and a session cookie",
          status == 303 and headers.get("Location") == "/ui/search" and len(found) == 1, f"{status} {headers.get('Location')}")
    return found[0] if found else None


def nav_ok(driver):
    return (driver.find_elements(By.CSS_SELECTOR, 'nav a[href="/ui/search"]')
            and driver.find_elements(By.CSS_SELECTOR, 'nav a[href="/ui/status"]')
            and driver.find_elements(By.ID, "sign-out"))


def search(driver, **fields):
    """Fills the search form (fields by input id; outcome by option value) and submits it."""
    driver.get(BASE + "/ui/search")
    for field_id, value in fields.items():
        if field_id == "outcome":
            Select(driver.find_element(By.ID, "outcome")).select_by_value(value)
        else:
            element = driver.find_element(By.ID, field_id)
            element.clear()
            element.send_keys(value)
    driver.find_element(By.ID, "search").click()
    WebDriverWait(driver, WAIT).until(lambda d: "?" in d.current_url and d.find_elements(By.ID, "result-count"))


# ---- the scenario ----------------------------------------------------------------------------

def main():
    started = time.time()
    SHOTS.mkdir(parents=True, exist_ok=True)
    run = secrets.token_hex(3)  # references unique to this run, should the database be reused
    ref = {
        "alice": f"ui-{run}-alice",
        "bob": f"ui-{run}-bob",
        "ghost": f"ui-{run}-ghost",
        "formula": f"=HYPERLINK(1)-{run}",
        "html": f"<b>x</b>\"'& {run}",
    }
    subject = {name: f"001234.{run}{index:02d}aa.0{index}" for index, name in enumerate(ref)}
    ids, grants = {}, {}
    bulk_refs = [f"ui-{run}-page-{n:02d}" for n in range(50)]

    # -- requests through the API, then until they are final --
    def enqueue():
        # 50 older requests first (made-up tokens), so that the search has a second page.
        for reference in bulk_refs:
            status, body = api("POST", "/v1/revocations", "billing", {
                "client_id": CLIENT_ID, "external_reference": reference, "refresh_token": f"r{secrets.token_hex(16)}.0.made.up"})
            if status != 202:
                raise RuntimeError(f"enqueue {reference}: {status} {body}")
            ids[reference] = body["id"]
        for name, reference in ref.items():
            payload = {"client_id": CLIENT_ID, "external_reference": reference}
            if name == "ghost":
                token = f"r{secrets.token_hex(16)}.0.made.up"
            else:
                minted = sandbox("/sandbox/refresh-tokens", {"client_id": CLIENT_ID, "subject": subject[name]})
                token, grants[name] = minted["value"], minted["grant_id"]
                payload["apple_user_id"] = subject[name]
            SECRETS.add(token)
            payload["refresh_token"] = token
            status, body = api("POST", "/v1/revocations", "billing", payload)
            check(f"enqueue {name} with the billing key: 202", status == 202, f"got {status}")
            if status == 202:
                ids[reference] = body["id"]

        states, deadline = {}, time.time() + 60
        while time.time() < deadline:
            for reference, request_id in ids.items():
                if states.get(reference, {}).get("state") not in FINAL_STATES:
                    _, states[reference] = api("GET", f"/v1/revocations/{request_id}", "billing")
            if all(s.get("state") in FINAL_STATES for s in states.values()):
                break
            time.sleep(0.25)
        pending = [r for r, s in states.items() if s.get("state") not in FINAL_STATES]
        check(f"all {len(ids)} requests final within 60 s", not pending, f"still open: {pending[:3]}")
        for name in ("alice", "bob", "formula", "html"):
            s = states.get(ref[name], {})
            check(f"{name} (live refresh token) ended succeeded/revoked", (s.get("state"), s.get("outcome")) == ("succeeded", "revoked"),
                  f"{s.get('state')}/{s.get('outcome')}")
        s = states.get(ref["ghost"], {})
        check(f"ghost (made-up refresh token) is final: {s.get('state')}/{s.get('outcome')}", s.get("state") in FINAL_STATES)
        ref_outcome["ghost"] = s.get("outcome")
        for name in ("alice", "bob"):
            status, _, data = http("GET", f"{SANDBOX}/sandbox/grants/{grants[name]}")
            check(f"the sandbox's grant of {name} is revoked", status == 200 and json.loads(data).get("revoked") is True)
        status, _ = api("GET", f"/v1/revocations/{ids[ref['alice']]}", "support")
        check("the support key reads requests (revocations:read)", status == 200, f"got {status}")

    ref_outcome = {}
    step("requests enqueued and processed", enqueue, critical=True)

    # -- an account's grants: two held and revoked by its deletion, a third held since --
    account = {"reference": f"acct/{run}?<i>x</i>\"#", "grants": []}

    def custody():
        def hold(name):
            user = f"001234.{run}acct.0{name}"
            minted = sandbox("/sandbox/refresh-tokens", {"client_id": CLIENT_ID, "subject": user})
            SECRETS.add(minted["value"])
            status, body = api("POST", "/v1/grants", "custody", {
                "client_id": CLIENT_ID, "account_reference": account["reference"], "refresh_token": minted["value"], "user_id": user})
            held = status == 201 and (body or {}).get("state") == "held"
            check(f"grant {name} of the account held with the custody key (grants:write): 201 held", held, f"got {status}")
            if held:
                account["grants"].append(body["id"])

        hold(1)
        hold(2)
        path = urllib.parse.quote(account["reference"], safe="")
        status, body = api("POST", f"/v1/accounts/{path}/deletion", "billing", {})
        check("the account's deletion asked with the billing key: 202", status == 202, f"got {status}")
        deletion, deadline = body or {}, time.time() + 60
        while deletion.get("state") != "completed" and time.time() < deadline:
            time.sleep(0.25)
            _, deletion = api("GET", f"/v1/deletions/{body['id']}", "billing")
        check("... it completed within 60 s, outcome revoked", (deletion.get("state"), deletion.get("outcome")) == ("completed", "revoked"),
              f"{deletion.get('state')}/{deletion.get('outcome')}")
        account["deletion"] = deletion.get("id")
        hold(3)

    step("an account's grants held and deleted", custody)

    # -- the sign-in form outside the browser: refusals and headers --
    def sign_in_http():
        status, headers, body = http("GET", BASE + "/ui/")
        check("GET /ui/ signed out: 303 to /ui/sign-in", status in (302, 303) and headers.get("Location") == "/ui/sign-in",
              f"{status} {headers.get('Location')}")
        status, headers, body = http("GET", BASE + "/ui/sign-in")
        wrong = security_headers_ok(headers)
        check(f"/ui/sign-in headers: {SECURITY_HEADERS_CHECKED}", status == 200 and not wrong, "; ".join(wrong) or f"status {status}")
        csrf, cookie = sign_in_form()
        form = urllib.parse.urlencode({"csrf": csrf, "api_key": KEYS["support"]}).encode()
        form_headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
        status, headers, body = http("POST", BASE + "/ui/sign-in", form_headers, form)
        text = body.decode()
        check("sign-in with the support key (no audit:read): 403", status == 403, f"got {status}")
        check("... says it lacks the scope 'audit:read'", "lacks the scope 'audit:read'" in html.unescape(text))
        check("... sets no session cookie", not any(c.startswith("revoker_session=") and not c.startswith("revoker_session=;")
                                                    for c in set_cookies(headers)))
        check("... does not echo the key", KEYS["support"] not in text)
        wrong = security_headers_ok(headers)
        check("the refusal has the security headers", not wrong, "; ".join(wrong))
        # The same form from another site is refused, whatever key it carries.
        status, _, _ = http("POST", BASE + "/ui/sign-in", form_headers | {"Origin": "http://evil.example"},
                            urllib.parse.urlencode({"csrf": csrf, "api_key": KEYS["compliance"]}).encode())
        check("a sign-in form sent from another origin: 403", status == 403, f"got {status}")

    step("sign-in over HTTP", sign_in_http)

    driver = make_driver()
    session = {}
    try:
        browser(driver, ref, ids, subject, session, ref_outcome, account)
    except Abort as abort:
        check(f"the run stopped after '{abort}' failed", False)
    finally:
        try:
            driver.quit()
        except Exception:  # noqa: BLE001
            pass

    # -- no secret in the server's log --
    log = SERVE_LOG.read_text(errors="replace") if SERVE_LOG.exists() else ""
    leaked = [s for s in SECRETS if s and s in log]
    check("the serve log holds no API key, refresh token or session token", not leaked, f"{len(leaked)} found")
    errors = [line for line in log.splitlines() if re.search(r"^\S+ (error|critical) |Fatal error", line)]
    check("the serve log has no error or critical line", not errors, redact(errors[0])[:300] if errors else "")

    failed = results.count(False)
    print(f"# {len(results) - failed} passed, {failed} failed in {time.time() - started:.1f} s; screenshots in {SHOTS}")
    if failed:
        print("# the last 60 lines of the serve log (secrets redacted):")
        for line in log.splitlines()[-60:]:
            print("#   " + redact(line))
    return 1 if failed else 0


def browser(driver, ref, ids, subject, session, ref_outcome, account):
    # -- signed out: the sign-in page --
    def signed_out():
        driver.get(BASE + "/ui/")
        check("the browser at /ui/ lands on /ui/sign-in", path_of(driver) == "/ui/sign-in", path_of(driver))
        check("the sign-in page has #api_key (password), #sign-in", driver.find_element(By.ID, "api_key").get_attribute("type") == "password"
              and driver.find_element(By.ID, "sign-in").is_displayed())
        screenshots(driver, "sign-in")

    step("sign-in page", signed_out, critical=True)

    def sign_in(key):
        if path_of(driver) != "/ui/sign-in" or not driver.find_elements(By.ID, "api_key"):
            driver.get(BASE + "/ui/sign-in")
        field = driver.find_element(By.ID, "api_key")
        field.clear()
        field.send_keys(KEYS[key])
        driver.find_element(By.ID, "sign-in").click()

    # -- the support key is refused --
    def refused():
        sign_in("support")
        try:
            WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#error, .error"))
            error = driver.find_element(By.ID, "error").text
        except WebDriverException:
            error = "no #error; the page says: " + page_problem(driver)
        check("the support key is refused: #error says it lacks the scope 'audit:read'", "lacks the scope 'audit:read'" in error, error)
        names = [c["name"] for c in driver.get_cookies()]
        check("... and the browser holds no session cookie", "revoker_session" not in names, str(names))
        check("... and the page does not show the key", KEYS["support"] not in driver.page_source)

    step("refused key", refused)

    # -- the compliance key signs in --
    def signed_in():
        sign_in("compliance")
        landed = wait_path(driver, "/ui/search")
        check("signing in with the compliance key in the browser lands on /ui/search", landed,
              "" if landed else f"at {path_of(driver)}: {page_problem(driver)}")
        if landed:
            cookies = driver.get_cookies()
            found = [c for c in cookies if c["name"] == "revoker_session"]
            check("one revoker_session cookie in the browser", len(found) == 1, str(len(found)))
            if not found:
                raise Abort("sign-in")
            cookie = found[0]
        else:
            # So that the other pages are still tested: a session opened by the same form posted
            # outside the browser (no Origin header), handed to the browser. Its cookie's
            # attributes are checked as the server set them.
            cookie = sign_in_over_http("compliance")
            if cookie is None:
                raise Abort("sign-in")
            print("# the browser could not sign in; the rest runs with a session opened over HTTP and given to the browser")
            driver.execute_cdp_cmd("Network.setCookie", {
                "name": "revoker_session", "value": cookie["value"], "url": BASE + "/", "path": "/",
                "httpOnly": True, "sameSite": "Strict", "secure": False})
            driver.get(BASE + "/ui/search")
            cookies = driver.get_cookies()
        session["token"] = cookie["value"]
        SECRETS.add(cookie["value"])
        check("... HttpOnly", cookie.get("httpOnly") is True)
        check("... SameSite=Strict", cookie.get("sameSite") == "Strict", str(cookie.get("sameSite")))
        check("... not Secure (plain http on loopback)", cookie.get("secure") is False)
        check("... path /", cookie.get("path") == "/", str(cookie.get("path")))
        check("... its value is not the API key", cookie["value"] != KEYS["compliance"] and KEYS["compliance"] not in cookie["value"])
        check("the API key is in no cookie", not any(KEYS["compliance"] in (c.get("value") or "") for c in cookies))
        if landed:
            check("the sign-in form's cookie is gone", not any(c["name"] == "revoker_sign_in" and c.get("value") for c in cookies))
        stored = driver.execute_script(
            "return JSON.stringify([Object.entries(window.localStorage), Object.entries(window.sessionStorage), document.cookie])")
        check("the API key is not in localStorage, sessionStorage or document.cookie", KEYS["compliance"] not in stored)
        check("document.cookie does not show the session (HttpOnly)", "revoker_session" not in json.loads(stored)[2])
        check("the page does not hold the key", KEYS["compliance"] not in driver.page_source)
        check("the nav has Search, Status and #sign-out", nav_ok(driver))
        scripts = driver.find_elements(By.TAG_NAME, "script")
        check("the page has no <script>", not scripts, str(len(scripts)))

    step("sign-in", signed_in, critical=True)

    # -- search by reference, open the request --
    def by_reference():
        search(driver, reference=ref["alice"])
        rows = row_texts(driver)
        check("searching alice's reference finds exactly one row", len(rows) == 1, str(len(rows)))
        check("... #result-count says 1 request", driver.find_element(By.ID, "result-count").text.startswith("1 request on this page"),
              driver.find_element(By.ID, "result-count").text)
        check("... the row shows the reference, app, Apple user and outcome revoked",
              rows and (rows[0].get("Reference"), rows[0].get("App"), rows[0].get("Apple user"), rows[0].get("Outcome"))
              == (ref["alice"], CLIENT_ID, subject["alice"], "revoked"), str(rows[:1]))
        check("... no #next-page link", not driver.find_elements(By.ID, "next-page"))
        driver.find_element(By.CSS_SELECTOR, '#results a[href^="/ui/requests/"]').click()
        request_path = f"/ui/requests/{ids[ref['alice']]}"
        check("the row links to its request page", wait_path(driver, request_path), path_of(driver))
        outcome = driver.find_element(By.ID, "outcome").text
        check("the request page's #outcome is revoked", outcome == "revoked", outcome)
        events = [li.find_element(By.CSS_SELECTOR, ".event").text for li in driver.find_elements(By.CSS_SELECTOR, "#timeline li")]
        check("the #timeline has enqueued, claimed, revoked and succeeded, in that order",
              all(e in events for e in ("enqueued", "claimed", "revoked", "succeeded"))
              and events.index("enqueued") < events.index("claimed") < events.index("revoked") < events.index("succeeded"),
              ", ".join(events))
        for link in ("receipt-json", "receipt-html", "timeline-csv"):
            check(f"the request page has #{link}", driver.find_elements(By.ID, link))
        check("the request page shows the reference", ref["alice"] in driver.find_element(By.TAG_NAME, "main").text)
        session["request_path"] = request_path
        screenshots(driver, "request")

    step("search by reference and the request page", by_reference)

    # -- the receipt: downloaded, verified offline, tampering detected --
    def receipt():
        request_id = ids[ref["alice"]]
        if path_of(driver) != f"/ui/requests/{request_id}":
            driver.get(f"{BASE}/ui/requests/{request_id}")
        folder = download_into(driver, "receipt")
        driver.find_element(By.ID, "receipt-json").click()
        file = wait_for_download(folder, "*.json")
        check(f"#receipt-json downloads receipt-{request_id}.json", file.name == f"receipt-{request_id}.json", file.name)
        check("... a JSON receipt naming the request", isinstance(json.loads(file.read_bytes()), dict) and request_id in file.read_text())
        clean_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("REVOKER_")}
        verify = subprocess.run([REVOKER, "audit", "verify-receipt", str(file), "--public-key", PUBLIC_KEY],
                                capture_output=True, text=True, env=clean_env, timeout=60)
        check("revoker audit verify-receipt accepts it offline (exit 0)", verify.returncode == 0,
              f"exit {verify.returncode}: {(verify.stdout + verify.stderr).strip()[:200]}")
        check("... and reports outcome revoked", "outcome revoked" in verify.stdout, verify.stdout.strip()[:200])
        # One byte changed: a letter of the reference, so the file is still well-formed JSON.
        data = bytearray(file.read_bytes())
        at = data.find(ref["alice"].encode())
        if at < 0:
            at = len(data) // 2
        at += len(ref["alice"]) - 1
        data[at] ^= 0x01
        tampered = WORK / "downloads" / "receipt-tampered.json"
        tampered.write_bytes(bytes(data))
        verify = subprocess.run([REVOKER, "audit", "verify-receipt", str(tampered), "--public-key", PUBLIC_KEY],
                                capture_output=True, text=True, env=clean_env, timeout=60)
        check("the receipt with one byte flipped fails verify-receipt (exit 1, NOT valid)",
              verify.returncode == 1 and "NOT valid" in verify.stdout, f"exit {verify.returncode}")
        # The timeline CSV and the printable receipt, through the same session.
        folder = download_into(driver, "timeline")
        driver.find_element(By.ID, "timeline-csv").click()
        file = wait_for_download(folder, "*.csv")
        rows = list(csv.DictReader(io.StringIO(file.read_bytes().decode("utf-8-sig"), newline="")))
        events = [row.get("event") for row in rows]
        check("#timeline-csv downloads the events (enqueued … succeeded)", "enqueued" in events and "succeeded" in events,
              f"{file.name}: {events}")
        driver.find_element(By.ID, "receipt-html").click()
        WebDriverWait(driver, WAIT).until(lambda d: "receipt.html" in d.current_url)
        text = driver.find_element(By.TAG_NAME, "body").text
        check("#receipt-html shows a printable receipt of the request", request_id in text and ref["alice"] in text)

    step("receipt", receipt)

    # -- other search fields --
    def by_fields():
        search(driver, apple_user_id=subject["bob"], outcome="revoked")
        rows = row_texts(driver)
        check("searching bob's Apple user id with outcome revoked finds bob only",
              [r.get("Reference") for r in rows] == [ref["bob"]], str([r.get("Reference") for r in rows]))
        check("... the form keeps the chosen outcome",
              Select(driver.find_element(By.ID, "outcome")).first_selected_option.get_attribute("value") == "revoked")
        if ref_outcome.get("ghost"):
            search(driver, reference=ref["ghost"], outcome=ref_outcome["ghost"])
            rows = row_texts(driver)
            check(f"searching ghost with outcome {ref_outcome['ghost']} finds it", len(rows) == 1, str(len(rows)))
        today = datetime.datetime.now(datetime.timezone.utc).date()
        query = urllib.parse.urlencode({"reference": ref["alice"], "from": today.isoformat(), "to": today.isoformat()})
        driver.get(f"{BASE}/ui/search?{query}")
        check("searching alice from today to today finds her", len(result_rows(driver)) == 1)
        check("... the date inputs keep the days", driver.find_element(By.ID, "from").get_attribute("value") == today.isoformat())
        later = (today + datetime.timedelta(days=1)).isoformat()
        driver.get(f"{BASE}/ui/search?" + urllib.parse.urlencode({"reference": ref["alice"], "from": later}))
        count = driver.find_element(By.ID, "result-count").text
        check("searching alice from tomorrow finds nothing", not result_rows(driver) and count.startswith("0 requests"), count)
        search(driver, client_id="com.example.not-this-one")
        check("searching another app's client_id finds nothing", not result_rows(driver))

    step("search fields", by_fields)

    # -- the HTML reference shown as text --
    def escaping():
        search(driver, reference=ref["html"])
        rows = row_texts(driver)
        check("searching the <b>x</b>\"'& reference finds exactly one row", len(rows) == 1, str(len(rows)))
        check("... the reference input shows it as typed", driver.find_element(By.ID, "reference").get_attribute("value") == ref["html"])
        check("... no <b> element inside #results", len(driver.find_elements(By.CSS_SELECTOR, "#results b")) == 0)
        cells = [c for c in driver.find_elements(By.CSS_SELECTOR, '#results td[data-label="Reference"]') if c.text == ref["html"]]
        check("... its text is shown literally and visible", len(cells) == 1 and cells[0].is_displayed())
        driver.find_element(By.CSS_SELECTOR, '#results a[href^="/ui/requests/"]').click()
        wait_path(driver, "/ui/requests/")
        check("its request page has no <b> element and shows the text",
              not driver.find_elements(By.CSS_SELECTOR, "main b") and ref["html"] in driver.find_element(By.TAG_NAME, "main").text)

    step("HTML escaping", escaping)

    # -- an account's page, from the search --
    def account_page():
        reference = account["reference"]
        expected = "/ui/accounts/" + urllib.parse.quote(reference, safe="")
        search(driver, reference=reference)
        links = driver.find_elements(By.CSS_SELECTOR, "#results a.account")
        check("searching the account's reference finds its two revocations, each reference a link",
              len(result_rows(driver)) == 2 and len(links) == 2 and all(link.text == reference for link in links),
              f"{len(result_rows(driver))} rows, {len(links)} links")
        if not links:
            return
        links[0].click()
        check("the link opens /ui/accounts/<the reference percent-encoded>", wait_path(driver, expected) and path_of(driver) == expected,
              path_of(driver))
        check("... its heading shows the reference as text", driver.find_element(By.ID, "account-reference").text == reference,
              driver.find_element(By.ID, "account-reference").text)
        check("... no <i> element in it", not driver.find_elements(By.CSS_SELECTOR, "main i"))
        grants = {row.get_attribute("id").removeprefix("grant-"):
                  {cell.get_attribute("data-label"): cell.text for cell in row.find_elements(By.TAG_NAME, "td")}
                  for row in driver.find_elements(By.CSS_SELECTOR, "#grants tbody tr")}
        check(f"... #grants lists the account's {len(account['grants'])} grants", sorted(grants) == sorted(account["grants"]),
              f"{len(grants)} rows")
        states = [grants.get(grant, {}).get("State") for grant in account["grants"]]
        check("... the two deleted are revoked, the one held since is held", states == ["revoked", "revoked", "held"], str(states))
        check("... each shows provider apple and the app",
              grants and all((g.get("Provider"), g.get("App")) == ("apple", CLIENT_ID) for g in grants.values()))
        check("... the revoked ones link to their revoke requests",
              len(driver.find_elements(By.CSS_SELECTOR, "#grants a.revoke-request")) == 2)
        rows = driver.find_elements(By.ID, f"deletion-{account.get('deletion')}")
        cells = {cell.get_attribute("data-label"): cell.text for cell in rows[0].find_elements(By.TAG_NAME, "td")} if rows else {}
        check("... #deletions shows the deletion completed, outcome revoked, by api:billing",
              (cells.get("State"), cells.get("Outcome"), cells.get("By")) == ("completed", "revoked", "api:billing"), str(cells))
        check("... no token, key or session in the page", not any(secret in driver.page_source for secret in SECRETS if secret))
        session["account_path"] = expected
        screenshots(driver, "account")
        # The search page's account field opens the same page; a revocation links back to it.
        driver.get(BASE + "/ui/search")
        driver.find_element(By.ID, "account").send_keys(reference)
        driver.find_element(By.ID, "open-account").click()
        check("the search page's account field opens the same page", wait_path(driver, expected) and path_of(driver) == expected,
              path_of(driver))
        driver.find_element(By.CSS_SELECTOR, "#grants a.revoke-request").click()
        wait_path(driver, "/ui/requests/")
        check("the revoke request's page shows outcome revoked", driver.find_element(By.ID, "outcome").text == "revoked")
        driver.find_element(By.ID, "account-link").click()
        check("... and its reference links back to the account", wait_path(driver, expected) and path_of(driver) == expected,
              path_of(driver))

    step("an account's page", account_page)

    # -- everything: pages, CSV export, screenshots --
    def everything():
        search(driver)
        rows = row_texts(driver)
        count = driver.find_element(By.ID, "result-count").text
        check("a search with no criteria shows 50 rows and says there are more",
              len(rows) == 50 and count == "50 requests on this page, more below.", f"{len(rows)} rows, {count!r}")
        shown = {r.get("Reference") for r in rows}
        check("... the newest first: the five requests of this scenario are on the first page",
              all(r in shown for r in ref.values()), str(sorted(set(ref.values()) - shown)))
        check("... no <b> element inside #results", len(driver.find_elements(By.CSS_SELECTOR, "#results b")) == 0)
        html_cells = [c for c in driver.find_elements(By.CSS_SELECTOR, '#results td[data-label="Reference"]') if c.text == ref["html"]]
        check("... the <b>x</b> reference is visible as text", len(html_cells) == 1 and html_cells[0].is_displayed())
        screenshots(driver, "search")
        first_page = {r["href"] for r in row_texts(driver)}

        folder = download_into(driver, "search-csv")
        driver.find_element(By.ID, "export-csv").click()
        file = wait_for_download(folder, "*.csv")
        check("#export-csv downloads revocations-….csv", re.fullmatch(r"revocations-[0-9T-]+\.csv", file.name) is not None, file.name)
        raw = file.read_bytes().decode("utf-8-sig")  # as sent: read_text() would turn CRLF into LF
        table = list(csv.reader(io.StringIO(raw, newline="")))
        check("... its header row is " + ",".join(CSV_COLUMNS), table and table[0] == CSV_COLUMNS, str(table[:1]))
        references = [row[4] for row in table[1:] if len(row) > 4]
        expected = [r for r in ids if not r.startswith("=")]
        missing = [r for r in expected if r not in references]
        check(f"... every enqueued reference is in it ({len(ids)})", not missing, f"missing {missing[:3]}")
        check("... =HYPERLINK(1) is guarded as '=HYPERLINK(1)", "'" + ref["formula"] in references and ref["formula"] not in references)
        check("... the <b>x</b>\"'& reference reads back unchanged", ref["html"] in references)
        check("... no line starts a formula", not any(re.match(r"^[=+\-@]", field) for row in table for field in row))
        crlf = raw.count("\r\n")
        check("... rows end with CRLF", raw.endswith("\r\n") and crlf == len(table), f"{crlf} CRLF, {len(table)} rows")

        driver.find_element(By.ID, "next-page").click()
        WebDriverWait(driver, WAIT).until(lambda d: "cursor=" in d.current_url)
        second = row_texts(driver)
        check("#next-page shows the older requests, none of the first page's",
              len(second) >= 5 and not ({r["href"] for r in second} & first_page), f"{len(second)} rows")

    step("all requests, CSV export and paging", everything)

    # -- status --
    def status_page():
        driver.get(BASE + "/ui/search")
        driver.find_element(By.CSS_SELECTOR, 'nav a[href="/ui/status"]').click()
        wait_path(driver, "/ui/status")
        depth = driver.find_element(By.ID, "queue-depth").text
        check(f"the status page shows a queue depth number: {depth}", re.fullmatch(r"\d+", depth) is not None)
        check("... 0: every request is final", depth == "0", depth)
        oldest = driver.find_element(By.ID, "oldest-due").text
        paused = driver.find_element(By.ID, "paused-count").text
        check("... #oldest-due and #paused-count are shown", bool(oldest) and re.fullmatch(r"\d+", paused) is not None,
              f"{oldest!r}, {paused!r}")
        check("... and #failures or #no-failures",
              bool(driver.find_elements(By.ID, "failures")) != bool(driver.find_elements(By.ID, "no-failures")))
        check("... the nav is there", nav_ok(driver))
        screenshots(driver, "status")

    step("status page", status_page)

    # -- every page's headers, outside the browser, with the browser's session --
    def headers():
        cookie = {"Cookie": "revoker_session=" + session["token"]}
        pages = ["/ui/search", "/ui/search?reference=" + urllib.parse.quote(ref["html"]), "/ui/status",
                 f"/ui/requests/{ids[ref['alice']]}"] + ([session["account_path"]] if session.get("account_path") else [])
        for page in pages:
            status, headers, body = http("GET", BASE + page, cookie)
            wrong = security_headers_ok(headers)
            shown = page.split("?")[0] + ("?…" if "?" in page else "")
            check(f"{shown} headers: {SECURITY_HEADERS_CHECKED}", status == 200 and not wrong, "; ".join(wrong) or f"status {status}")
            check(f"{shown} has no <script", b"<script" not in body.lower())
        for page, kind in ((f"/ui/requests/{ids[ref['alice']]}/events.csv", "text/csv"), ("/ui/search.csv", "text/csv")):
            status, headers, _ = http("GET", BASE + page, cookie)
            check(f"{page.split('/')[-1]} is an attachment ({kind}), no-store",
                  status == 200 and (headers.get("Content-Disposition") or "").startswith("attachment;")
                  and (headers.get("Content-Type") or "").startswith(kind) and "no-store" in (headers.get("Cache-Control") or ""),
                  f"{status} {headers.get('Content-Disposition')} {headers.get('Cache-Control')}")
        status, headers, _ = http("GET", BASE + "/ui/search", {"Cookie": "revoker_session=" + "A" * 43})
        check("a made-up session token is sent to the sign-in page", status in (302, 303) and headers.get("Location") == "/ui/sign-in",
              f"{status} {headers.get('Location')}")
        status, headers, _ = http("POST", BASE + "/ui/sign-out",
                                  cookie | {"Content-Type": "application/x-www-form-urlencoded"}, b"csrf=not-the-token")
        check("a sign-out form without the session's token is refused (403)", status == 403, f"got {status}")

    step("response headers", headers)

    # -- sign out --
    def sign_out():
        driver.get(BASE + "/ui/search")
        csrf = driver.find_element(By.CSS_SELECTOR, 'form[action="/ui/sign-out"] input[name="csrf"]').get_attribute("value")
        driver.find_element(By.ID, "sign-out").click()
        landed = wait_path(driver, "/ui/sign-in")
        check("signing out in the browser lands on the sign-in page", landed,
              "" if landed else f"at {path_of(driver)}: {page_problem(driver)}")
        if landed:
            check("... and the browser holds no session cookie",
                  not any(c["name"] == "revoker_session" and c.get("value") for c in driver.get_cookies()))
        else:
            # The same form posted outside the browser (no Origin header), so that what follows
            # is still tested.
            status, headers, _ = http("POST", BASE + "/ui/sign-out", {
                "Cookie": "revoker_session=" + session["token"], "Content-Type": "application/x-www-form-urlencoded"},
                urllib.parse.urlencode({"csrf": csrf}).encode())
            cleared = [c for c in set_cookies(headers) if c.startswith("revoker_session=")]
            check("posting the sign-out form over HTTP (no Origin): 303 to /ui/sign-in?signed_out=1, the cookie cleared",
                  status == 303 and headers.get("Location") == "/ui/sign-in?signed_out=1"
                  and len(cleared) == 1 and parse_set_cookie(cleared[0])["value"] == "",
                  f"{status} {headers.get('Location')}")
            print("# the browser could not sign out; the session was closed over HTTP, the browser keeps a stale cookie")
            driver.get(BASE + "/ui/sign-in?signed_out=1")
        notice = driver.find_elements(By.ID, "notice")
        check("... the sign-in page says 'You are signed out.' (#notice)", notice and notice[0].text == "You are signed out.",
              notice[0].text if notice else "no #notice")
        driver.get(BASE + "/ui/search")
        check("/ui/search after signing out goes to the sign-in page", path_of(driver) == "/ui/sign-in", path_of(driver))
        status, headers, _ = http("GET", BASE + "/ui/search", {"Cookie": "revoker_session=" + session["token"]})
        check("the old session token no longer opens a page (closed on the server)",
              status in (302, 303) and headers.get("Location") == "/ui/sign-in", f"{status} {headers.get('Location')}")

    step("sign-out", sign_out)

    # -- a person's data deletion request, on its public status page (no key) --
    def deletion_status():
        callback = {"url": f"{BASE}/v1/facebook/data-deletion/{FACEBOOK_APP}", "app_id": FACEBOOK_APP, "user_id": "7000123"}
        status, _, data = http("POST", SANDBOX + "/facebook/sandbox/callbacks", {"Content-Type": "application/json"},
                               json.dumps(callback).encode())
        answer = json.loads(data) if status == 200 else {}
        check("Facebook's Data Deletion Request callback: 200", answer.get("status") == 200, str(answer.get("status")))
        reply = json.loads(answer.get("body") or "{}")
        code, url = reply.get("confirmation_code", ""), reply.get("url", "")
        check("... answered with a confirmation code and the status page's URL",
              re.fullmatch(r"[A-Z2-7]{20}", code) is not None and url == f"{BASE}/deletion-status/{code}", f"{code!r} {url!r}")
        driver.delete_all_cookies()
        driver.get(url)
        state = driver.find_elements(By.ID, "state")
        check("the status page opens in the browser, without a session, and says the request is in progress",
              bool(state) and state[0].text.startswith("In progress"), state[0].text if state else page_problem(driver))
        text = driver.find_element(By.TAG_NAME, "body").text
        check("... shows the code and when it arrived", code in text and bool(driver.find_elements(By.ID, "received")))
        check("... shows neither the person's id nor the app's", "7000123" not in text and FACEBOOK_APP not in text)
        screenshots(driver, "deletion-status")  # desktop and phone: no wider than the window
        status, headers, body = http("GET", url)
        wrong = security_headers_ok(headers)
        check(f"the status page's headers: {SECURITY_HEADERS_CHECKED}", status == 200 and not wrong, "; ".join(wrong) or f"status {status}")
        check("... and it has no <script", b"<script" not in body.lower())
        reason = "We keep invoices for ten years, as tax law requires. <b>not bold</b>"
        status, decided = api("POST", f"/v1/erasures/{code}/decision", "billing", {"state": "refused", "justification": reason})
        check("the backend refuses with a justification: 200", status == 200, f"{status} {decided}")
        driver.refresh()
        state = driver.find_elements(By.ID, "state")
        justification = driver.find_elements(By.ID, "justification")
        check("after the refresh the page says it was not deleted, and why, as written (markup shown as text)",
              bool(state) and state[0].text.startswith("Not deleted") and bool(justification) and justification[0].text == reason,
              justification[0].text if justification else page_problem(driver))
        screenshots(driver, "deletion-status-refused")
        driver.get(BASE + "/deletion-status/" + "A" * 20)
        message = driver.find_elements(By.ID, "message")
        check("a code that matches no request: the page says so, nothing else",
              bool(message) and "No request has this code" in message[0].text and code not in driver.page_source,
              message[0].text if message else page_problem(driver))

    step("a data deletion request's status page", deletion_status)


if __name__ == "__main__":
    sys.exit(main())
