#!/usr/bin/env python3
"""The checks of scripts/check-operations: the alert rules, the dashboard and the runbook, then
a real Prometheus scraping the `revoker serve` that the script started.

Offline: promtool checks and tests the rules; the dashboard is valid JSON and every query names
metrics that Sources/ produces; every runbook_url has its section in docs/runbook.md. Live:
revokes an Apple and a Google grant through the API, lets one request end exhausted under
injected faults, runs Prometheus (127.0.0.1, a temporary data directory, the rules loaded) and
checks through its HTTP API that every metric the rules and the dashboard use was scraped, that
every dashboard query runs, that every rule evaluates and that exactly the alert the exhausted
request raises fires. One line per check, then `N passed, M failed`; exit 1 when a check failed.

Environment (set by scripts/check-operations): OPS_BASE_URL, OPS_SANDBOX_URL, OPS_WORK (its
keys/ops.key holds an admin API key), OPS_APPLE_CLIENT_ID, OPS_GOOGLE_CLIENT_ID,
OPS_RECEIVER_PORT, OPS_SERVE_LOG. No secret is printed.
"""
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "deploy/prometheus/alerts.yaml"
RULE_TESTS = REPO / "deploy/prometheus/alerts.test.yaml"
DASHBOARD = REPO / "deploy/grafana/revoker.json"
RUNBOOK = REPO / "docs/runbook.md"

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}" + (f": {detail}" if detail else ""), flush=True)
    return ok


# ---- PromQL --------------------------------------------------------------------------------------

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names an expression reads (not functions, labels, keywords or strings)."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges, subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for match in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def grafana_to_promql(expr):
    """A dashboard query as Prometheus runs it: Grafana's variables replaced."""
    return expr.replace("$__rate_interval", "1m").replace("$__interval", "15s").replace("$client_id", ".*")


def source_metrics():
    """Metric names the code registers: every "revoker_…" literal in Sources/, with the providers'
    names put into `revoker_\\(provider.rawValue)_…`."""
    providers = re.findall(r'ProviderName\(rawValue: "([a-z0-9_]+)"\)', (REPO / "Sources/RevokerProvider/ProviderName.swift").read_text())
    names = set()
    for path in (REPO / "Sources").rglob("*.swift"):
        text = path.read_text()
        names.update(re.findall(r'"(revoker_[a-z0-9_]+)"', text))
        for suffix in re.findall(r'"revoker_\\\(provider\.rawValue\)(_[a-z0-9_]+)"', text):
            names.update(f"revoker_{provider}{suffix}" for provider in providers)
    return names, providers


def series_base(name):
    """A histogram's series (`_bucket`, `_sum`, `_count`) by its metric's name."""
    return re.sub(r"_(bucket|sum|count)$", "", name)


def dashboard_queries(dashboard):
    queries = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                queries.append((panel.get("title", "?"), target.get("expr", "")))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        if variable.get("type") == "query" and isinstance(query, str):
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            queries.append((f"variable {variable.get('name')}", inner.group(1) if inner else query))
    return queries


def github_anchor(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# ---- offline -------------------------------------------------------------------------------------

def offline():
    result = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    found = re.search(r"SUCCESS: (\d+) rules found", result.stdout)
    check(f"promtool check rules {RULES.relative_to(REPO)}" + (f" ({found.group(1)} rules)" if found else ""),
          result.returncode == 0, (result.stdout + result.stderr).strip()[-2000:])

    result = subprocess.run(["promtool", "test", "rules", RULE_TESTS.name], capture_output=True, text=True, cwd=RULE_TESTS.parent)
    tests = RULE_TESTS.read_text()
    alerts = sorted(set(re.findall(r"^\s*- alert: (\w+)", RULES.read_text(), re.M)))
    check(f"promtool test rules {RULE_TESTS.relative_to(REPO)} ({tests.count('- name:')} tests)",
          result.returncode == 0, (result.stdout + result.stderr).strip()[-3000:])
    untested = [a for a in alerts if not re.search(rf"alertname: {a}\s*\n\s*exp_alerts:\s*\n", tests)]
    silent = [a for a in alerts if not re.search(rf"alertname: {a}\s*\n\s*exp_alerts: \[\]", tests)]
    check(f"every alert ({len(alerts)}) has a test where it fires and one where it stays silent",
          not untested and not silent, f"never fires: {untested}; never silent: {silent}")

    # Each rule's labels and annotations, from promtool's own reading of the file.
    rules_text = RULES.read_text()
    blocks = re.split(r"\n(?=[ \t]*- alert: )", rules_text)[1:]
    anchors = {github_anchor(h) for h in re.findall(r"^#+ (.+)$", RUNBOOK.read_text(), re.M)}
    missing = []
    for block in blocks:
        name = re.search(r"- alert: (\w+)", block).group(1)
        for field in ("severity:", "summary:", "description:", "runbook_url:"):
            if field not in block:
                missing.append(f"{name} lacks {field[:-1]}")
        url = re.search(r'runbook_url: "([^"]+)"', block)
        anchor = url.group(1).split("#", 1)[1] if url and "#" in url.group(1) else None
        if not url or not url.group(1).split("#")[0].endswith("docs/runbook.md") or anchor not in anchors:
            missing.append(f"{name}: runbook_url {url.group(1) if url else None} has no section in docs/runbook.md")
    check(f"every alert ({len(blocks)} rules) has severity, summary, description and a runbook_url to a section of docs/runbook.md",
          not missing, "; ".join(missing))

    try:
        dashboard = json.loads(DASHBOARD.read_text())
    except (OSError, ValueError) as error:
        check(f"{DASHBOARD.relative_to(REPO)} is valid JSON", False, str(error))
        return set(), [], set()
    queries = dashboard_queries(dashboard)
    ids = [p.get("id") for p in dashboard.get("panels", [])]
    shape = []
    if len(ids) != len(set(ids)):
        shape.append("panel ids repeat")
    if not dashboard.get("uid") or not dashboard.get("title"):
        shape.append("no uid or title")
    empty = [title for title, expr in queries if not expr.strip()]
    if empty:
        shape.append(f"panels without a query: {empty}")
    check(f"{DASHBOARD.relative_to(REPO)} is valid JSON: {len(dashboard.get('panels', []))} panels, {len(queries)} queries",
          not shape, "; ".join(shape))

    produced, providers = source_metrics()
    used_by_dashboard = set()
    unknown = []
    for title, expr in queries:
        for name in metric_names(grafana_to_promql(expr)):
            used_by_dashboard.add(name)
            if series_base(name) not in produced and name not in produced:
                unknown.append(f"{name} ({title})")
    check(f"every dashboard query names metrics that Sources/ produces ({len(used_by_dashboard)} metrics)", not unknown, ", ".join(unknown))

    used_by_rules = set()
    for expr in re.findall(r"expr: (?:\|\n((?:\s{10,}.*\n)+)|(.+))", rules_text):
        used_by_rules |= metric_names(expr[0] or expr[1])
    unknown = sorted(n for n in used_by_rules if series_base(n) not in produced and n not in produced)
    check(f"every alert rule names metrics that Sources/ produces ({len(used_by_rules)} metrics)", not unknown, ", ".join(unknown))
    return used_by_rules, queries, used_by_dashboard


# ---- live ----------------------------------------------------------------------------------------

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(method, url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = dict(headers or {})
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _opener.open(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def get_json(url):
    status, data = call("GET", url)
    return status, (json.loads(data) if data else None)


class Receiver(http.server.BaseHTTPRequestHandler):
    """The app backend's webhook endpoint: takes every delivery."""
    received = []

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        Receiver.received.append(json.loads(body).get("type") if body else None)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def wait_for(what, predicate, timeout=60, every=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return None


def prometheus_query(base, expr):
    status, body = get_json(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    return status, body


def live(used_by_rules, queries, used_by_dashboard):
    base = os.environ["OPS_BASE_URL"]
    sandbox = os.environ["OPS_SANDBOX_URL"]
    work = Path(os.environ["OPS_WORK"])
    apple = os.environ["OPS_APPLE_CLIENT_ID"]
    google = os.environ["OPS_GOOGLE_CLIENT_ID"]
    key = (work / "keys/ops.key").read_text().strip()
    auth = {"Authorization": "Bearer " + key}

    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["OPS_RECEIVER_PORT"])), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()

    status, data = call("GET", base + "/metrics")
    check("revoker serve answers /metrics", status == 200 and b"revoker_workers_live" in data, f"status {status}")

    # Prometheus: loopback only, a temporary data directory, the rules loaded, a scrape a second.
    prometheus_dir = Path(tempfile.mkdtemp(prefix="revoker-prometheus-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prometheus_port = s.getsockname()[1]
    target = urllib.parse.urlsplit(base).netloc
    (prometheus_dir / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: revoker\n    static_configs:\n      - targets: ['{target}']\n")
    prometheus_log = open(prometheus_dir / "prometheus.log", "w")
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={prometheus_dir / 'prometheus.yml'}", f"--storage.tsdb.path={prometheus_dir / 'data'}",
         f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn"],
        stdout=prometheus_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    prom = f"http://127.0.0.1:{prometheus_port}"
    try:
        def scraped():
            try:
                status, body = get_json(prom + "/api/v1/targets")
            except OSError:
                return None
            targets = (body or {}).get("data", {}).get("activeTargets", [])
            return status == 200 and targets and all(t.get("health") == "up" for t in targets)

        ok = wait_for("the first scrape", scraped, timeout=60)
        check(f"Prometheus (127.0.0.1:{prometheus_port}, temporary data) scrapes revoker serve", bool(ok),
              (prometheus_dir / "prometheus.log").read_text()[-1500:])
        if not ok:
            return
        # The outcomes as they are before anything happens, so that a rise is seen.
        def result(expr):
            status, body = prometheus_query(prom, expr)
            return (body or {}).get("data", {}).get("result", []) if status == 200 else []

        wait_for("a scrape with the outcomes", lambda: result('revoker_requests_by_outcome{outcome="exhausted"}'))

        # Work through the API: an Apple grant and a Google grant revoked, and one Apple request that
        # outlasts its two attempts while the sandbox answers 503.
        ids = {}
        minted = json.loads(call("POST", sandbox + "/sandbox/refresh-tokens", {"client_id": apple, "subject": "ops-apple-user"})[1])
        status, body = call("POST", base + "/v1/revocations", {"client_id": apple, "external_reference": "ops-apple",
                                                                "user_id": "ops-apple-user", "refresh_token": minted["value"]}, auth)
        ids["apple"] = json.loads(body).get("id") if status == 202 else None
        minted = json.loads(call("POST", sandbox + "/google/sandbox/refresh-tokens", {"client_id": google, "subject": "ops-google-user"})[1])
        status, body = call("POST", base + "/v1/revocations", {"provider": "google", "client_id": google, "external_reference": "ops-google",
                                                                "refresh_token": minted["value"]}, auth)
        ids["google"] = json.loads(body).get("id") if status == 202 else None

        def outcome(request_id):
            status, body = call("GET", f"{base}/v1/revocations/{request_id}", headers=auth)
            shown = json.loads(body) if status == 200 else {}
            return shown.get("outcome") if shown.get("state") in ("succeeded", "failed", "cancelled") else None

        for provider in ("apple", "google"):
            final = wait_for(f"the {provider} request", lambda: ids[provider] and outcome(ids[provider]), timeout=60) if ids[provider] else None
            check(f"{ {'apple': 'an Apple', 'google': 'a Google'}[provider]} grant enqueued through the API is revoked", final == "revoked", f"outcome {final}")

        call("PUT", sandbox + "/sandbox/faults", {"unavailable_rate": 1})
        minted = json.loads(call("POST", sandbox + "/sandbox/refresh-tokens", {"client_id": apple, "subject": "ops-unlucky-user"})[1])
        status, body = call("POST", base + "/v1/revocations", {"client_id": apple, "external_reference": "ops-exhausted",
                                                                "user_id": "ops-unlucky-user", "refresh_token": minted["value"],
                                                                "max_attempts": 2}, auth)
        exhausted_id = json.loads(body).get("id") if status == 202 else None
        final = wait_for("the exhausted request", lambda: outcome(exhausted_id), timeout=60) if exhausted_id else None
        call("PUT", sandbox + "/sandbox/faults", {})
        check("a request that meets only 503s is retried, then ends exhausted", final == "exhausted", f"outcome {final}")
        delivered = wait_for("the webhook deliveries", lambda: len(Receiver.received) >= 3, timeout=60)
        check("the webhook endpoint receives the outcomes", bool(delivered), f"received {Receiver.received}")

        # Every metric the rules and the dashboard use is in the scraped data.
        needed = sorted(used_by_rules | used_by_dashboard)

        def names():
            status, body = get_json(prom + "/api/v1/label/__name__/values")
            return set(body.get("data", [])) if status == 200 else set()

        wait_for("every metric scraped", lambda: set(needed) <= names(), timeout=30, every=0.5)
        present = names()
        for name in needed:
            users = " and ".join(u for u, used in (("the rules", used_by_rules), ("the dashboard", used_by_dashboard)) if name in used)
            check(f"scraped: {name} (used by {users})", name in present)

        # Every dashboard query runs in Prometheus (with Grafana's variables filled in).
        broken = []
        for title, expr in queries:
            status, body = prometheus_query(prom, grafana_to_promql(expr))
            if status != 200 or body.get("status") != "success":
                broken.append(f"{title}: {body.get('error') if body else status}")
        check(f"every dashboard query ({len(queries)}) runs in Prometheus", not broken, "; ".join(broken))

        # The rules evaluate without error, and the exhausted request raises exactly its alert.
        def rules_state():
            status, body = get_json(prom + "/api/v1/rules")
            rules = [r for g in body.get("data", {}).get("groups", []) for r in g.get("rules", [])] if status == 200 else []
            return rules if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules) else None

        rules = wait_for("the rules evaluated", rules_state, timeout=30) or []
        unhealthy = [f"{r.get('name')}: {r.get('lastError')}" for r in rules if r.get("health") != "ok"]
        check(f"Prometheus loaded and evaluates every rule ({len(rules)})", bool(rules) and not unhealthy, "; ".join(unhealthy))
        # The rules as Prometheus read them name no metric that was not scraped.
        loaded = set().union(*(metric_names(r.get("query", "")) for r in rules)) if rules else set()
        check(f"every metric the loaded rules query ({len(loaded)}) was scraped", bool(loaded) and loaded <= names(),
              ", ".join(sorted(loaded - names())))

        def active():
            status, body = get_json(prom + "/api/v1/alerts")
            return {(a["labels"]["alertname"], a["state"]) for a in body.get("data", {}).get("alerts", [])} if status == 200 else set()

        firing = wait_for("RevokerRequestsExhausted", lambda: ("RevokerRequestsExhausted", "firing") in active(), timeout=30)
        check("RevokerRequestsExhausted fires once a request ended exhausted", bool(firing), f"active: {sorted(active())}")
        others = sorted(a for a in active() if a[0] != "RevokerRequestsExhausted")
        check("no other alert is pending or firing on a healthy service", not others, f"active: {others}")
    finally:
        receiver.shutdown()
        prometheus.terminate()
        try:
            prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait()
        prometheus_log.close()
        shutil.rmtree(prometheus_dir, ignore_errors=True)


def main():
    used_by_rules, queries, used_by_dashboard = offline()
    try:
        live(used_by_rules, queries, used_by_dashboard)
    except Exception as error:  # noqa: BLE001 - reported as a failed check, then the summary
        check("the live checks ran to the end", False, f"{type(error).__name__}: {str(error)[:300]}")
    if failed:
        log = Path(os.environ.get("OPS_SERVE_LOG", ""))
        if log.is_file():
            print("--- the end of revoker serve's log ---", file=sys.stderr)
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]), file=sys.stderr)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
