#!/usr/bin/env python3
"""The phases and checks of scripts/failover-test: the PostgreSQL leader killed under load.

Each phase sends a realistic load to both `revoker serve` replicas (revocations over HTTP and
over SQL, grants registered with codes, accounts deleted by reference, Apple and Google
notifications), kills the leader at 30 % of it (`scripts/ha-stack kill-postgres` or
`kill-member`), waits for the backlog to drain and then checks, from the sandbox's grant
reports, the webhook receiver's log and the database, that nothing acknowledged is missing. One
line per check, a table of figures, then `N passed, M failed`; exit 1 when a check failed.

Environment (set by scripts/failover-test): FO_REPO, FO_REVOKER, FO_STACK, FO_WORK (keys/ holds
the API key and the webhook secret; revoker-a.json, revoker-b.json, serve-*.log, witness-*.jsonl),
FO_DATABASE_URL, FO_SANDBOX_URL, FO_APPLE_CLIENT_IDS, FO_GOOGLE_CLIENT_ID, FO_RECEIVER_PORT,
FO_SERVE_PORTS, FO_SERVE_PIDS, FO_SERVE_NAMES. Standard library only, and psql. No secret
(token, code, key) is printed or put on a command line.
"""
import argparse
import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ENV = os.environ
REPO = Path(ENV.get("FO_REPO", Path(__file__).resolve().parent.parent))
REVOKER = ENV.get("FO_REVOKER", "")
STACK = ENV.get("FO_STACK", "")
WORK = Path(ENV.get("FO_WORK", "/nonexistent"))
DB = ENV.get("FO_DATABASE_URL", "")
SANDBOX = ENV.get("FO_SANDBOX_URL", "")
APPLE_A, APPLE_B = (ENV.get("FO_APPLE_CLIENT_IDS", ",").split(",") + ["", ""])[:2]
GOOGLE = ENV.get("FO_GOOGLE_CLIENT_ID", "")
SERVE_PORTS = [int(p) for p in ENV.get("FO_SERVE_PORTS", "").split(",") if p]
SERVE_PIDS = [int(p) for p in ENV.get("FO_SERVE_PIDS", "").split(",") if p]
# Seconds after the database is writable again within which workers, the backlog and every
# request in flight must move on (--slack).
SLACK = 5.0
SERVE_NAMES = ENV.get("FO_SERVE_NAMES", "a,b").split(",")
ENDPOINT = "failover-backend"

LATENCY_MS = 75  # sandbox latency: calls to the provider are in flight when the leader dies
CALLERS = 24  # concurrent API callers, as many app backend threads
OP_DEADLINE = 240  # a caller gives up on one operation after this many seconds
FINAL_STATES = {"succeeded", "failed", "cancelled"}
# An attempt that ended one of these ways before the kill was not in flight at it.
SETTLED = {"succeeded", "failed", "cancelled", "retry_scheduled", "released", "rescued"}
TRANSIENT_SQLSTATES = ("08", "25006", "57P", "40001", "40P01", "53300", "55000")

passed = failed = 0
report_lines = []


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        line = f"PASS {name}"
    else:
        failed += 1
        line = f"FAIL {name}" + (f": {detail}" if detail else "")
    print(line, flush=True)
    report_lines.append(line)
    return ok


def say(text):
    print(f"failover-test: {text}", file=sys.stderr, flush=True)


# ---- calls -----------------------------------------------------------------------------------------

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(method, url, body=None, headers=None, timeout=30):
    """(status, headers, body bytes); status 0 for a connection error or timeout."""
    data = json.dumps(body).encode() if body is not None else None
    headers = dict(headers or {})
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _opener.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()
    except (OSError, http.client.HTTPException) as error:
        return 0, {}, str(error).encode()


def jbody(data):
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {}


def psql(sql, stdin=None, timeout=20, connect_timeout=3):
    """(exit status, stdout, stderr) of psql through HAProxy; SQLSTATE-only error messages."""
    env = dict(ENV, PGCONNECT_TIMEOUT=str(connect_timeout), PGOPTIONS="-c statement_timeout=15000")
    script = "\\set VERBOSITY sqlstate\n\\set ON_ERROR_STOP 1\n" + sql
    if stdin is not None:
        script = script.replace("{STDIN}", stdin)
    try:
        result = subprocess.run(["psql", DB, "-X", "-q", "-t", "-A", "-F", "\t"], input=script, capture_output=True,
                                text=True, env=env, timeout=timeout)
        return result.returncode, result.stdout, result.stderr
    except subprocess.TimeoutExpired:
        return 124, "", "timeout"


def query(sql, timeout=60):
    """Rows (lists of strings) of a read, retried while the database is away; None if it never answers."""
    deadline = time.time() + timeout
    while True:
        code, out, err = psql(sql, timeout=max(5, min(30, timeout)))
        if code == 0:
            return [line.split("\t") for line in out.splitlines() if line != ""]
        if time.time() > deadline:
            say(f"query failed: {err.strip()[:200]}")
            return None
        time.sleep(0.5)


def ha(*args, timeout=300):
    result = subprocess.run([str(REPO / "scripts/ha-stack"), *args, "--dir", STACK], capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout.strip(), result.stderr.strip()


# ---- the webhook receiver ----------------------------------------------------------------------------

class Receiver(http.server.BaseHTTPRequestHandler):
    """The app backend's endpoint: checks the signature and records every delivery."""
    secret = b""
    log = []
    lock = threading.Lock()
    bad_signatures = 0

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        at = time.time()
        wid, ts, sig = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", ""), self.headers.get("webhook-signature", "")
        expected = base64.b64encode(hmac.new(Receiver.secret, f"{wid}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
        good = any(hmac.compare_digest(part.split(",", 1)[-1], expected) for part in sig.split())
        event = jbody(body)
        with Receiver.lock:
            if not good:
                Receiver.bad_signatures += 1
            Receiver.log.append({"at": at, "id": wid, "type": event.get("type"), "client_id": event.get("client_id"),
                                 "cursor": event.get("cursor"), "signed": good})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def cursor_key(cursor):
    txid, position = cursor.split("-")
    return int(txid), int(position)


# ---- the sandbox --------------------------------------------------------------------------------------

def provider_of(client_id):
    return "google" if client_id == GOOGLE else "apple"


def sandbox_prefix(client_id):
    return SANDBOX + ("/google/sandbox" if client_id == GOOGLE else "/sandbox")


def mint(client_id, subject, kind):
    """A code or refresh token the sandbox issues: (value, sandbox grant id)."""
    path = "/codes" if kind == "authorization_code" else "/refresh-tokens"
    for _ in range(20):
        status, _, data = call("POST", sandbox_prefix(client_id) + path, {"client_id": client_id, "subject": subject})
        if status in (200, 201):
            minted = jbody(data)
            return minted["value"], minted["grant_id"]
        time.sleep(0.2)
    raise RuntimeError(f"the sandbox did not mint a {kind} ({status})")


def sandbox_grants():
    reports = {}
    for client in (APPLE_A, GOOGLE):
        status, _, data = call("GET", sandbox_prefix(client) + "/grants", timeout=120)
        if status != 200:
            raise RuntimeError(f"GET {sandbox_prefix(client)}/grants answered {status}")
        for report in json.loads(data):
            reports[report["id"]] = report
    return reports


# ---- one operation, as an app backend does it ------------------------------------------------------------

class Answers:
    """Every answer the API gave, for the 503/500 counts."""
    lock = threading.Lock()
    rows = []  # (time, where, status, retry_after present)

    @classmethod
    def add(cls, where, status, retry_after):
        with cls.lock:
            cls.rows.append((time.time(), where, status, retry_after))


class Op:
    def __init__(self, index, kind, slot, **fields):
        self.index, self.kind, self.slot = index, kind, slot
        self.fields = fields
        self.grants = []  # [(client_id, sandbox grant id, credential kind, subject)]
        self.ack_status = None
        self.ack_id = None
        self.ack_ids = []  # grant ops: one Revoker grant id per grant
        self.ack_at = None
        self.tries = 0
        self.in_doubt = False  # a try ended without an answer: it may have been stored
        self.answered_failed = False  # a grant answered 422 with the grant failed: an answer, not a loss
        self.error = None
        self.done = threading.Event()
        self.skipped = None

    @property
    def acked(self):
        return self.ack_status is not None and 200 <= self.ack_status < 300 or self.answered_failed


def api_call(op, replica, method, path, body, ok, key):
    """Calls until `ok(status)` or a final refusal, honouring Retry-After on 503 as callers do."""
    url = f"http://127.0.0.1:{SERVE_PORTS[replica]}{path}"
    auth = {"Authorization": "Bearer " + key}
    deadline = time.time() + OP_DEADLINE
    while True:
        op.tries += 1
        status, headers, data = call(method, url, body, auth)
        retry_after = headers.get("Retry-After") if status else None
        Answers.add(op.kind, status, retry_after is not None)
        if ok(status):
            return status, jbody(data)
        if status in (400, 401, 403, 404, 409, 422):
            return status, jbody(data)
        if status == 0:
            op.in_doubt = True
            wait = 1.0
        elif status == 503:
            wait = min(float(retry_after or 1), 10.0)
        else:  # a 500 is a failure (counted above); a caller would still try again
            op.in_doubt = True
            wait = 1.0
        if time.time() + wait > deadline:
            return status, jbody(data)
        time.sleep(wait)


def sql_enqueue(op, client_id, reference, kind, credential, user_id):
    """revoker.enqueue_revocation from the app's own transaction. The credential goes through
    psql's standard input into a temporary table, so it is never part of a statement's text
    (PostgreSQL logs the text of a failing statement) nor of a command line."""
    sql = ("CREATE TEMP TABLE fo_in (credential text);\nCOPY fo_in FROM STDIN;\n{STDIN}\n\\.\n"
           f"SELECT revoker.enqueue_revocation('{client_id}', '{reference}', '{kind}', (SELECT credential FROM fo_in), "
           f"apple_user_id => '{user_id}');\n")
    deadline = time.time() + OP_DEADLINE
    while True:
        op.tries += 1
        code, out, err = psql(sql, stdin=credential, timeout=30)
        if code == 0 and re.fullmatch(r"[0-9a-f-]{36}", out.strip()):
            Answers.add("sql", 200, False)
            return 200, out.strip()
        state = (re.search(r"ERROR:\s+([0-9A-Z]{5})", err) or [None, ""])[1]
        transient = code in (1, 2, 124) and not state or any(state.startswith(s) for s in TRANSIENT_SQLSTATES)
        Answers.add("sql", 0 if not state else f"sqlstate {state}", False)
        if not transient or time.time() > deadline:
            op.error = f"psql exit {code} {state or err.strip()[:80]}"
            return None, None
        op.in_doubt = op.in_doubt or code in (2, 124) or state.startswith("08") or state.startswith("57P")
        time.sleep(0.5)


def notify(op, replica, client_id, subject):
    """The provider tells Revoker the user ended the grant; the sandbox sends it, we resend
    (the same message, by its jti) until Revoker answers 2xx, as Apple and Google retry."""
    base = f"http://127.0.0.1:{SERVE_PORTS[replica]}"
    if client_id == GOOGLE:
        first = ("/google/sandbox/risc", {"url": base + "/v1/google/risc", "audience": GOOGLE, "subject": subject, "type": "tokens-revoked"})
        replay = "/google/sandbox/risc/replay"
    else:
        first = ("/sandbox/notifications", {"url": base + "/v1/apple/notifications", "client_id": client_id, "subject": subject,
                                            "type": "consent-revoked"})
        replay = "/sandbox/notifications/replay"
    deadline = time.time() + OP_DEADLINE
    jti = None
    while True:
        op.tries += 1
        if jti is None:
            status, _, data = call("POST", SANDBOX + first[0], first[1])
        else:
            status, _, data = call("POST", SANDBOX + replay, {"jti": jti})
        delivery = jbody(data) if status == 200 else {}
        jti = delivery.get("jti", jti)
        answered = delivery.get("status", 0)
        Answers.add("notification", answered, None)
        if 200 <= answered < 300:
            return answered, jti
        if answered in (400, 401, 403, 404, 409, 422) or time.time() > deadline:
            return answered, jti
        op.in_doubt = op.in_doubt or answered == 0 or answered >= 500 and answered != 503
        time.sleep(5 if answered == 503 else 1)


def run_op(op, key, by_index):
    replica = op.index % 2
    f = op.fields
    try:
        if op.kind in ("http", "sql"):
            client, kind, subject, reference = f["client_id"], f["credential_kind"], f["subject"], f["reference"]
            value, grant = mint(client, subject, kind)
            op.grants.append((client, grant, kind, subject))
            if op.kind == "http":
                body = {"provider": provider_of(client), "client_id": client, "external_reference": reference, "user_id": subject, kind: value}
                status, answer = api_call(op, replica, "POST", "/v1/revocations", body, lambda s: s in (200, 202), key)
                op.ack_id = answer.get("id")
            else:
                status, op.ack_id = sql_enqueue(op, client, reference, kind, value, subject)
            op.ack_status = status
        elif op.kind == "grant":
            statuses = []
            for client in f["clients"]:
                subject = f["subject"]
                value, grant = mint(client, subject, "authorization_code")
                op.grants.append((client, grant, "authorization_code", subject))
                body = {"provider": provider_of(client), "client_id": client, "account_reference": f["account"], "authorization_code": value}
                status, answer = api_call(op, replica, "POST", "/v1/grants", body, lambda s: s in (200, 201, 202), key)
                statuses.append(status)
                failed_grant = status == 422 and answer.get("state") == "failed" and answer.get("id")
                op.answered_failed = op.answered_failed or bool(failed_grant)
                op.ack_ids.append(answer.get("id") if status in (200, 201, 202) or failed_grant else None)
            op.ack_status = max(statuses) if all(s in (200, 201, 202) for s in statuses) else next(s for s in statuses if s not in (200, 201, 202))
            op.answered_failed = op.answered_failed and all(i for i in op.ack_ids)
            op.ack_id = ",".join(str(i) for i in op.ack_ids)
        elif op.kind in ("delete", "notify"):
            target = by_index[f["target"]]
            if not target.done.wait(OP_DEADLINE) or not target.acked:
                op.skipped = f"its grant op {target.index} was not acknowledged"
                return
            if op.kind == "delete":
                path = "/v1/accounts/" + urllib.parse.quote(f["account"], safe="") + "/deletion"
                status, answer = api_call(op, replica, "POST", path, None, lambda s: s in (200, 201, 202), key)
                op.ack_status, op.ack_id = status, answer.get("id")
            else:
                # The user ends a grant Revoker holds: one answered 202 (its exchange still under
                # way) is waited for, as the backend hears grant.held; else the sandbox would end
                # the code before the exchange and the grant would fail code_rejected.
                gid = target.ack_ids[0]
                deadline = time.time() + OP_DEADLINE
                while target.ack_status == 202 and time.time() < deadline:
                    status, _, data = call("GET", f"http://127.0.0.1:{SERVE_PORTS[replica]}/v1/grants/{gid}", headers={"Authorization": "Bearer " + key})
                    if status == 200 and jbody(data).get("state") != "pending":
                        break
                    time.sleep(0.5)
                client, _, _, subject = target.grants[0]
                status, jti = notify(op, replica, client, subject)
                op.ack_status, op.ack_id = status, jti
        if op.acked:
            op.ack_at = time.time()
    except Exception as error:  # noqa: BLE001 - recorded and reported as an operation that failed
        op.error = f"{type(error).__name__}: {str(error)[:200]}"
    finally:
        op.done.set()


def build_ops(phase, n):
    """The phase's operations with their place (0..1) in the load; deletions and notifications
    come after the grant they concern."""
    rng = random.Random(f"failover-{phase}")
    ops = []
    counts = {"http": round(n * 0.35), "sql": round(n * 0.20), "grant": round(n * 0.25)}
    counts["delete"] = min(round(n * 0.12), (counts["grant"] + 1) // 2)
    counts["notify"] = min(round(n * 0.08), counts["grant"] // 4)
    revoke_mix = [(APPLE_A, "refresh_token"), (APPLE_A, "refresh_token"), (APPLE_B, "authorization_code"), (GOOGLE, "refresh_token"),
                  (APPLE_B, "refresh_token")]
    sql_mix = [(APPLE_A, "refresh_token"), (GOOGLE, "refresh_token"), (APPLE_B, "authorization_code"), (APPLE_B, "refresh_token")]
    for kind in ("http", "sql"):
        for i in range(counts[kind]):
            client, credential_kind = (revoke_mix if kind == "http" else sql_mix)[i % (5 if kind == "http" else 4)]
            ops.append(Op(0, kind, rng.random(), client_id=client, credential_kind=credential_kind,
                          subject=f"fo{phase}-{kind}-{i}.user", reference=f"fo{phase}-{kind}-{i}"))
    grants = []
    for i in range(counts["grant"]):
        clients = [[APPLE_A, GOOGLE], [APPLE_B], [GOOGLE], [APPLE_A]][i % 4]
        op = Op(0, "grant", rng.random() * 0.75, clients=clients, account=f"fo{phase}-acct-{i}", subject=f"fo{phase}-acct-{i}.user")
        grants.append(op)
        ops.append(op)
    for i in range(counts["delete"]):
        target = grants[2 * i]
        ops.append(Op(0, "delete", min(1.0, target.slot + 0.1 + rng.random() * 0.15), account=target.fields["account"], target=target))
    singles = [g for i, g in enumerate(grants) if i % 2 == 1]  # single-grant accounts no deletion touches
    for i in range(counts["notify"]):
        target = singles[i]
        ops.append(Op(0, "notify", min(1.0, target.slot + 0.1 + rng.random() * 0.15), target=target))
    ops.sort(key=lambda o: o.slot)
    for i, op in enumerate(ops):
        op.index = i
    for op in ops:
        if "target" in op.fields:
            op.fields["target"] = op.fields["target"].index
    return ops


# ---- watching the database and the workers -------------------------------------------------------------

LIVE_SQL = (
    "SELECT extract(epoch FROM clock_timestamp()), pg_is_in_recovery(), (SELECT count(*) FROM revoker.workers w WHERE EXISTS ("
    "SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE "
    "datname = current_database()) AND l.classid = 1920364290::oid AND l.objid = revoker.worker_lock(w.owner)::oid AND l.objsubid = 2));\n")


class Monitor(threading.Thread):
    """Every 0.5 s: the live workers by the database (the liveness locks, as `revoker status`
    counts them) and by each replica's /metrics."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []  # (time, live by the database or None, [live by /metrics of each replica or None])
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            at = time.time()
            code, out, _ = psql(LIVE_SQL, timeout=3, connect_timeout=1)
            live = None
            if code == 0 and out.strip():
                parts = out.strip().split("\t")
                live = int(parts[2]) if parts[1] == "f" else None
            metrics = []
            for port in SERVE_PORTS:
                status, _, data = call("GET", f"http://127.0.0.1:{port}/metrics", timeout=1)
                found = re.search(rb"^revoker_workers_live(?:\{[^}]*\})? ([0-9.e+]+)$", data, re.M) if status == 200 else None
                metrics.append(int(float(found.group(1))) if found else None)
            self.samples.append((at, live, metrics))
            self.stop.wait(max(0.0, 0.5 - (time.time() - at)))


def cluster_healthy(sync):
    rows = query("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
                 + (" AND sync_state IN ('sync', 'quorum')" if sync else "") + ";\n", timeout=5)
    return bool(rows) and int(rows[0][0]) >= 1


def wait_healthy(sync, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cluster_healthy(sync):
            return True
        time.sleep(1)
    return False


# ---- a phase -------------------------------------------------------------------------------------------

def walreceiver_pids():
    """The stack's WAL receivers (the standby's): children of a postmaster whose data lives in FO_STACK."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "walreceiver" not in (entry / "cmdline").read_text(errors="replace"):
                continue
            parent = next(l.split()[1] for l in (entry / "status").read_text().splitlines() if l.startswith("PPid:"))
            if STACK and STACK in Path(f"/proc/{parent}/cmdline").read_text(errors="replace"):
                pids.append(int(entry.name))
        except (OSError, StopIteration):
            continue
    return pids


def run_phase(phase, kill, n, duration, key, sync, lag=0.0):
    say(f"phase {phase}: kill-{kill}, {n} operations over ~{duration:.0f} s, the kill at 30 %")
    ops = build_ops(phase, n)
    by_index = {op.index: op for op in ops}
    figures = {"phase": phase, "kill": kill, "operations": len(ops), "by_kind": {}}
    for op in ops:
        figures["by_kind"][op.kind] = figures["by_kind"].get(op.kind, 0) + 1
    answers_from = len(Answers.rows)
    with Receiver.lock:
        received_from = len(Receiver.log)
    logs_from = {name: (WORK / f"serve-{name}.log").stat().st_size for name in SERVE_NAMES}

    leader = ha("leader")[1].split()
    figures["leader_before"] = leader[0] if leader else None
    monitor = Monitor()
    monitor.start()
    start = time.time()
    figures["start"] = start
    work = queue.Queue()
    dispatched = [0]
    kill_at = int(len(ops) * 0.3)
    kill_info = {}

    def caller():
        while True:
            op = work.get()
            if op is None:
                return
            run_op(op, key, by_index)

    def killer():
        while dispatched[0] < kill_at:
            time.sleep(0.05)
        held = []
        if lag > 0:
            # The standby stops receiving while the leader goes on committing (asynchronously).
            held = walreceiver_pids()
            for pid in held:
                os.kill(pid, signal.SIGSTOP)
            kill_info["lag_held"] = len(held)
            time.sleep(lag)
        before = time.time()
        code, out, err = ha("kill-postgres" if kill == "postgres" else "kill-member")
        # The SIGKILL is the command's last act (it first asks Patroni who leads): its return is the kill.
        kill_info["at"] = time.time()
        kill_info["command_s"] = round(kill_info["at"] - before, 2)
        kill_info["victim"] = out.split()[0] if out else None
        kill_info["kill_output"] = (out, err[-300:], code)
        for pid in held:
            # Killed, not resumed: what it had not yet written dies with it, as WAL in flight on a
            # network that failed with the leader would (its postmaster starts another one).
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        say(f"phase {phase}: {('kill-' + kill)} of {kill_info['victim']} at +{kill_info['at'] - start:.1f} s")
        args = ["wait-primary", "--timeout", "180"] + (["--not", kill_info["victim"]] if kill == "member" and kill_info["victim"] else [])
        code, out, err = ha(*args, timeout=200)
        kill_info["writable"] = time.time() if code == 0 else None
        kill_info["wait_primary"] = (out, err[-300:], code)

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    kill_thread = threading.Thread(target=killer, daemon=True)
    kill_thread.start()
    for op in ops:
        delay = start + op.slot * duration - time.time()
        if delay > 0:
            time.sleep(delay)
        work.put(op)
        dispatched[0] += 1
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    load_end = time.time()
    kill_thread.join()
    T = kill_info["at"]
    W = kill_info.get("writable")
    say(f"phase {phase}: load answered at +{load_end - T:.1f} s after the kill; waiting for the backlog to drain")

    # The backlog drained: nothing pending or running, no grant or deletion under way, no SQL
    # intake unsealed, and the webhook endpoint past every event but the checkpoints.
    drained_seen = None
    deadline = time.time() + 600
    while time.time() < deadline:
        rows = query(
            "SELECT (SELECT count(*) FROM revoker.revocation_requests WHERE state IN ('pending', 'running')),"
            " (SELECT count(*) FROM revoker.grants WHERE state IN ('pending', 'revoking')),"
            " (SELECT count(*) FROM revoker.account_deletions WHERE state = 'pending'),"
            " (SELECT count(*) FROM revoker.credential_intake),"
            f" (SELECT count(*) FROM revoker.events e, revoker.webhook_deliveries d WHERE d.endpoint = '{ENDPOINT}' AND e.type <> 'audit.checkpoint'"
            "   AND (d.cursor_txid IS NULL OR (e.txid, e.position) > (d.cursor_txid, d.cursor_position)));\n", timeout=30)
        if rows and all(v == "0" for v in rows[0]):
            drained_seen = time.time()
            break
        time.sleep(0.5)
    time.sleep(2)  # a few more samples of the workers after the drain
    monitor.stop.set()
    monitor.join()
    figures["drained_seen"] = drained_seen

    result = assess(phase, kill, ops, figures, T, W, start, load_end, kill_info, monitor, answers_from, received_from, logs_from, sync)
    return result


def seconds(value):
    return None if value is None else round(value, 1)


def assess(phase, kill, ops, figures, T, W, start, load_end, kill_info, monitor, answers_from, received_from, logs_from, sync):
    print(f"--- phase {phase}: kill-{kill} ({'synchronous' if sync else 'asynchronous'} replication) ---", flush=True)
    figures["victim"] = kill_info.get("victim")
    figures["kill_at_s"] = seconds(T - start)
    figures["kill_to_writable_s"] = seconds(W - T) if W else None
    figures["kill_to_load_answered_s"] = seconds(load_end - T)
    leader = ha("leader")[1].split()
    figures["leader_after"] = leader[0] if leader else None
    check(f"phase {phase}: HAProxy took a write again after the kill-{kill} ({figures['kill_to_writable_s']} s; leader "
          f"{figures['victim']} -> {figures['leader_after']})", W is not None, str(kill_info.get("wait_primary")))
    check(f"phase {phase}: the backlog drained (nothing pending, running, being exchanged, unsealed or undelivered)",
          figures["drained_seen"] is not None, "still not drained after 600 s")

    # ---- the database as it is now ----
    t0 = start - 5
    requests = {r[0]: {"state": r[1], "outcome": r[2] or None, "purpose": r[3], "grant_id": r[4] or None, "deletion_id": r[5] or None,
                       "finished": float(r[6]) if r[6] else None, "reference": r[7], "created": float(r[8])}
                for r in query("SELECT id, state, coalesce(outcome, ''), purpose, coalesce(grant_id::text, ''), coalesce(deletion_id::text, ''),"
                               " coalesce(extract(epoch FROM finished_at)::text, ''), external_reference, extract(epoch FROM created_at)"
                               f" FROM revoker.revocation_requests WHERE created_at >= to_timestamp({t0});\n") or []}
    grants = {r[0]: {"state": r[1], "end_reason": r[2] or None, "hold": r[3] or None, "revoke": r[4] or None, "account": r[5],
                     "ended": float(r[6]) if r[6] else None, "held": float(r[7]) if r[7] else None}
              for r in query("SELECT id, state, coalesce(end_reason, ''), coalesce(hold_request_id::text, ''), coalesce(revoke_request_id::text, ''),"
                             " account_reference, coalesce(extract(epoch FROM ended_at)::text, ''), coalesce(extract(epoch FROM held_at)::text, '')"
                             f" FROM revoker.grants WHERE created_at >= to_timestamp({t0});\n") or []}
    deletions = {r[0]: {"state": r[1], "outcome": r[2] or None, "completed": float(r[3]) if r[3] else None}
                 for r in query("SELECT id, state, coalesce(outcome, ''), coalesce(extract(epoch FROM completed_at)::text, '')"
                                f" FROM revoker.account_deletions WHERE requested_at >= to_timestamp({t0});\n") or []}
    messages = {r[0] for r in query(f"SELECT message_id FROM revoker.provider_messages WHERE received_at >= to_timestamp({t0});\n") or []}
    audit = query("SELECT request_id, event, extract(epoch FROM occurred_at), coalesce(attempt, 0), actor FROM revoker.audit_events"
                  f" WHERE request_id IS NOT NULL AND occurred_at >= to_timestamp({t0}) ORDER BY id;\n", timeout=120) or []
    trail = {}
    for request_id, event, at, attempt, actor in audit:
        trail.setdefault(request_id, []).append((event, float(at), int(attempt), actor))

    # The database took writes again (on the new leader, or the restarted one) no earlier than the
    # start of the monitor's last failed probe before its first good one. Commits stamped between
    # the kill and then are the old leader's backends finishing after their postmaster died.
    after_kill = [(at, live) for at, live, _ in monitor.samples if at >= T]
    first_good = next((i for i, (_, live) in enumerate(after_kill) if live is not None), None)
    back_from = after_kill[first_good - 1][0] if first_good else T
    figures["database_back_from_s"] = seconds(back_from - T)
    orphans = sum(1 for events in trail.values() for e in events if T <= e[1] < back_from)
    figures["commits_by_the_old_leader_after_kill"] = orphans

    # ---- in flight at the kill: an attempt claimed before it whose end was not committed before it ----
    in_flight = {}
    for request_id, events in trail.items():
        before = [e for e in events if e[1] < back_from]
        claims = [i for i, e in enumerate(before) if e[0] == "claimed"]
        if claims and not any(e[0] in SETTLED for e in before[claims[-1] + 1:]):
            after = [e for e in events if e[1] >= back_from]
            in_flight[request_id] = {"claimed": before[claims[-1]][1], "last_before": before[-1][0],
                                     "next": after[0][0] if after else None, "next_at": after[0][1] if after else None}
    waits = [v["next_at"] - T for v in in_flight.values() if v["next_at"] is not None]
    stuck = [r for r, v in in_flight.items() if v["next_at"] is None]
    rescued = [(r, e[1] - T) for r, events in trail.items() for e in events if e[0] == "rescued" and e[1] >= T]
    released = [(r, e[1] - T) for r, events in trail.items() for e in events if e[0] == "released" and e[1] >= T]
    figures["in_flight_at_kill"] = len(in_flight)
    figures["longest_wait_after_kill_s"] = seconds(max(waits)) if waits else None
    figures["rescued_after_kill"] = len(rescued)
    figures["longest_rescue_after_kill_s"] = seconds(max(w for _, w in rescued)) if rescued else None
    figures["released_after_kill"] = len(released)

    finished_after = sorted(e[1] for events in trail.values() for e in events if e[0] in ("succeeded", "failed") and e[1] >= back_from)
    revoked_after = sorted(e[1] for r, events in trail.items() if requests.get(r, {}).get("purpose") == "revoke"
                           for e in events if e[0] in ("succeeded", "failed") and e[1] >= back_from)
    figures["kill_to_first_revocation_s"] = seconds(revoked_after[0] - T) if revoked_after else None
    figures["kill_to_first_request_finished_s"] = seconds(finished_after[0] - T) if finished_after else None
    with Receiver.lock:
        received = Receiver.log[received_from:]
    last_work = max([v["finished"] for v in requests.values() if v["finished"]] + [v["completed"] for v in deletions.values() if v["completed"]]
                    + [d["at"] for d in received if d["type"] != "audit.checkpoint"] + [T])
    figures["kill_to_drained_s"] = seconds(last_work - T)

    # Live workers: each sample after the kill, by the database's liveness locks.
    after = [(at, live, m) for at, live, m in monitor.samples if at >= T]
    dropped = next((at for at, live, _ in after if live is not None and live < 2 or live is None), None)
    back = next((at for at, live, _ in after if dropped is not None and at > dropped and live == 2), None)
    metrics_back = next((at for at, _, m in after if dropped is not None and at > dropped and all(v == 2 for v in m)), None)
    figures["live_workers_back_s"] = seconds(back - T) if back else None
    figures["live_workers_back_by_metrics_s"] = seconds(metrics_back - T) if metrics_back else None
    figures["live_workers_at_end"] = after[-1][1] if after else None
    figures["live_workers_by_metrics_at_end"] = after[-1][2] if after else None

    writable = (W - T) if W else None
    limit = (writable + SLACK) if writable is not None else None
    check(f"phase {phase}: live workers back to 2 within the switch + {SLACK:g} s (back at {figures['live_workers_back_s']} s, writable at "
          f"{seconds(writable)} s; /metrics says 2 on both at {figures['live_workers_back_by_metrics_s']} s)",
          back is not None and limit is not None and back - T <= limit,
          f"last samples (database, /metrics a, b): {[(round(at - T, 1), live, m) for at, live, m in after[-4:]]}")
    check(f"phase {phase}: the backlog resumed within the switch + {SLACK:g} s (first revocation finished {figures['kill_to_first_revocation_s']} s "
          f"after the kill, writable at {seconds(writable)} s)",
          revoked_after and limit is not None and revoked_after[0] - T <= limit, "no revocation finished after the kill" if not revoked_after else "")
    # Both workers live through the whole test (only the database dies): a rescue after the kill
    # took a request from a worker that still had it, or one whose lease ran out while nobody
    # handed it back. Either way the request's attempt was cut off.
    rescue_rows = []
    for request_id, events in trail.items():
        for i, e in enumerate(events):
            if e[0] == "rescued" and e[1] >= T:
                claim = next((c for c in reversed(events[:i]) if c[0] == "claimed"), None)
                worked = [c[0] for c in events[:i] if claim and c[1] >= claim[1] and c[0] not in ("claimed",)]
                rescue_rows.append(f"{request_id} attempt {e[2]}: claimed +{round(claim[1] - T, 1) if claim else '?'} s by {claim[3] if claim else '?'}, "
                                   f"rescued +{round(e[1] - T, 1)} s ({', '.join(worked) or 'nothing recorded'} in between)")
    figures["rescued_detail"] = rescue_rows[:40]
    check(f"phase {phase}: no request was rescued from a live worker after the kill ({len(rescue_rows)} rescued; both workers lived throughout)",
          not rescue_rows, "; ".join(rescue_rows[:6]))
    late = sorted(((r, round(v["next_at"] - T, 1), v["next"]) for r, v in in_flight.items() if v["next_at"] and limit is not None and v["next_at"] - T > limit),
                  key=lambda x: -x[1])
    check(f"phase {phase}: no request waited for a lease beyond the switch + {SLACK:g} s ({len(in_flight)} in flight at the kill, longest until "
          f"its next step {figures['longest_wait_after_kill_s']} s; {len(rescued)} rescued, {len(released)} released after the kill)",
          not late and not stuck, f"waited: {late[:10]}; never moved again: {stuck[:10]}")

    # ---- what callers were answered ----
    answers = Answers.rows[answers_from:]
    api = [a for a in answers if a[1] in ("http", "grant", "delete")]
    figures["api_answers"] = len(api)
    figures["api_503"] = sum(1 for a in api if a[2] == 503)
    figures["api_503_with_retry_after"] = sum(1 for a in api if a[2] == 503 and a[3])
    figures["api_500"] = sum(1 for a in api if a[2] == 500)
    figures["api_other_5xx"] = sum(1 for a in api if isinstance(a[2], int) and a[2] >= 500 and a[2] not in (500, 503))
    figures["api_connection_errors"] = sum(1 for a in api if a[2] == 0)
    figures["notification_answers"] = {str(k): sum(1 for a in answers if a[1] == "notification" and a[2] == k)
                                       for k in sorted({a[2] for a in answers if a[1] == "notification"}, key=str)}
    figures["sql_errors"] = {str(k): sum(1 for a in answers if a[1] == "sql" and a[2] == k) for k in sorted({a[2] for a in answers if a[1] == "sql" and a[2] != 200}, key=str)}
    check(f"phase {phase}: API callers saw 503 with Retry-After during the switch, never 500 ({figures['api_503']} × 503, "
          f"{figures['api_503_with_retry_after']} with Retry-After; {figures['api_500']} × 500; {figures['api_other_5xx']} other 5xx; "
          f"{figures['api_connection_errors']} connection errors, of {len(api)} answers)",
          figures["api_500"] == 0 and figures["api_other_5xx"] == 0 and figures["api_503"] == figures["api_503_with_retry_after"]
          and figures["api_connection_errors"] == 0)
    bad_notes = {k: v for k, v in figures["notification_answers"].items() if k not in ("200", "202", "503")}
    check(f"phase {phase}: Revoker answered the providers' notifications 2xx or 503, never 500 ({figures['notification_answers']})", not bad_notes)

    # ---- every acknowledged item exists and is final as expected ----
    sandbox = sandbox_grants()
    for_grant = {}  # Revoker grant id -> (op, sandbox grant)
    for op in ops:
        if op.kind == "grant":
            for (client, sgrant, _, _), gid in zip(op.grants, op.ack_ids):
                if gid:
                    for_grant[gid] = (op, client, sgrant)
    deleted = {by.fields["account"] for by in ops if by.kind == "delete" and by.acked}
    notified = {ops[by.fields["target"]].fields["account"] for by in ops if by.kind == "notify" and by.acked}
    in_flight_grants = set()
    for request_id in in_flight:
        if requests.get(request_id, {}).get("grant_id"):
            in_flight_grants.add(requests[request_id]["grant_id"])

    missing, wrong, not_acked, named = [], [], [], []
    lost_items = []  # (what, id, how it was acknowledged): each must be in a write_lost row
    for op in ops:
        if op.skipped:
            not_acked.append(f"{op.kind} #{op.index}: skipped ({op.skipped})")
            continue
        if not op.acked:
            not_acked.append(f"{op.kind} #{op.index}: {op.ack_status} {op.error or ''}".strip())
            continue
        if op.kind in ("http", "sql"):
            request = requests.get(op.ack_id)
            if request is None:
                missing.append(f"request {op.ack_id} ({op.kind} #{op.index}, acknowledged {op.ack_status})")
                lost_items.append(("request", op.ack_id, op.kind))
            elif request["state"] not in FINAL_STATES:
                wrong.append(f"request {op.ack_id} is {request['state']}")
            elif request["outcome"] != "revoked":
                allowed = op.ack_id in in_flight and request["outcome"] in ("already_invalid", "exchange_lost")
                (named if allowed else wrong).append(f"request {op.ack_id} ended {request['outcome']}" + (" (in flight at the kill)" if allowed else ""))
        elif op.kind == "grant":
            account = op.fields["account"]
            for gid in op.ack_ids:
                grant = grants.get(gid)
                if grant is None:
                    missing.append(f"grant {gid} ({account}, acknowledged {op.ack_status})")
                    lost_items.append(("grant", gid, "http"))
                    continue
                expected = "revoked" if account in deleted else "dead" if account in notified else "held"
                if grant["state"] != expected:
                    # Its hold's exchange, or its revocation, was in flight at the kill.
                    allowed = (grant["state"] == "failed" and grant["end_reason"] == "exchange_lost" and grant["hold"] in in_flight
                               or expected == "revoked" and grant["state"] == "dead" and grant["end_reason"] == "already_invalid"
                               and grant["revoke"] in in_flight)
                    (named if allowed else wrong).append(f"grant {gid} ({account}) is {grant['state']}/{grant['end_reason']}, expected {expected}"
                                                        + (" (its exchange in flight at the kill)" if allowed else ""))
        elif op.kind == "delete":
            deletion = deletions.get(op.ack_id)
            target = ops[op.fields["target"]]
            # Every grant of the account lost its exchange in flight at the kill: nothing was held to revoke.
            exchanges_lost = bool(target.ack_ids) and all(
                grants.get(gid, {}).get("state") == "failed" and grants[gid].get("end_reason") == "exchange_lost"
                and grants[gid].get("hold") in in_flight for gid in target.ack_ids)
            if deletion is None:
                missing.append(f"deletion {op.ack_id} ({op.fields['account']}, acknowledged {op.ack_status})")
                lost_items.append(("deletion", op.ack_id, "http"))
            elif deletion["state"] != "completed" or deletion["outcome"] not in (
                    ("revoked", "nothing_held") if target.answered_failed or exchanges_lost else ("revoked",)):
                wrong.append(f"deletion {op.ack_id} ({op.fields['account']}) is {deletion['state']}/{deletion['outcome']}")
            elif deletion["outcome"] == "nothing_held" and exchanges_lost:
                named.append(f"deletion {op.ack_id} ({op.fields['account']}) ended nothing_held: its grants' exchanges were in flight at the kill")
        elif op.kind == "notify":
            if op.ack_id not in messages:
                missing.append(f"notification {op.ack_id} (about {ops[op.fields['target']].fields['account']}, answered {op.ack_status})")
                lost_items.append(("message", op.ack_id, "http"))
    figures["acknowledged"] = sum(1 for op in ops if op.acked)
    figures["lost"] = missing
    figures["not_acknowledged"] = not_acked
    check(f"phase {phase}: every operation was acknowledged 2xx within {OP_DEADLINE} s ({figures['acknowledged']} of {len(ops)})",
          not not_acked, "; ".join(not_acked[:10]))
    check(f"phase {phase}: 0 acknowledged requests, grants, deletions or notifications lost ({len(missing)} missing)", not missing,
          "; ".join(missing[:20]))
    check(f"phase {phase}: every acknowledged item is final with the expected outcome ({len(named)} named as in flight at the kill)",
          not wrong, "; ".join(wrong[:15]))

    # ---- the providers' counts ----
    twice, unrevoked, exchanges, allowed_named = [], [], [], []

    def judge_revokes(report, label, flight):
        """One revoke call is right; a second only for a request in flight at the kill."""
        if report["revoke_calls"] == 1:
            return
        if flight and report["revoke_calls"] == 2:
            allowed_named.append(f"{label}: revoked twice, in flight at the kill")
        else:
            twice.append(f"{label}: {report['revoke_calls']} revoke calls")
    for op in ops:
        if op.kind in ("http", "sql") and op.grants:
            client, sgrant, kind, _ = op.grants[0]
            report = sandbox.get(sgrant)
            flight = op.acked and op.ack_id in in_flight
            if not op.acked or report is None:
                continue
            if kind == "authorization_code" and (report["code_exchanges"] != 1 or report["rejected_code_exchanges"] != 0):
                outcome = requests.get(op.ack_id, {}).get("outcome")
                if flight and report["code_exchanges"] == 1 and outcome == "exchange_lost":
                    allowed_named.append(f"sandbox grant {sgrant} (request {op.ack_id}): code exchanged once, exchange_lost, left live at the provider")
                    continue
                exchanges.append(f"sandbox grant {sgrant} (request {op.ack_id}): {report['code_exchanges']} exchanges, "
                                 f"{report['rejected_code_exchanges']} refused")
            if not report["revoked"]:
                unrevoked.append(f"sandbox grant {sgrant} (request {op.ack_id}, {client})")
            else:
                judge_revokes(report, f"sandbox grant {sgrant} (request {op.ack_id})", flight)
        elif op.kind == "grant":
            account = op.fields["account"]
            for (client, sgrant, _, _), gid in zip(op.grants, op.ack_ids + [None] * (len(op.grants) - len(op.ack_ids))):
                report = sandbox.get(sgrant)
                if not gid or report is None:
                    continue
                grant = grants.get(gid, {})
                flight = gid in in_flight_grants
                if grant.get("state") == "failed":
                    if not (flight and grant.get("end_reason") == "exchange_lost" and report["code_exchanges"] == 1):
                        exchanges.append(f"sandbox grant {sgrant} (grant {gid}): failed {grant.get('end_reason')}, "
                                         f"{report['code_exchanges']} exchanges, {report['rejected_code_exchanges']} refused")
                    elif not report["revoked"]:
                        allowed_named.append(f"sandbox grant {sgrant} (grant {gid}): exchange_lost, left live at the provider")
                    continue
                if report["code_exchanges"] != 1 or report["rejected_code_exchanges"] != 0:
                    if flight and report["code_exchanges"] == 1 and grant.get("end_reason") == "exchange_lost":
                        allowed_named.append(f"sandbox grant {sgrant} (grant {gid}): exchange_lost, left live at the provider")
                        continue
                    exchanges.append(f"sandbox grant {sgrant} (grant {gid}): {report['code_exchanges']} exchanges, {report['rejected_code_exchanges']} refused")
                if account in deleted:
                    if not report["revoked"]:
                        unrevoked.append(f"sandbox grant {sgrant} (grant {gid}, account {account} deleted)")
                    else:
                        judge_revokes(report, f"sandbox grant {sgrant} (grant {gid})", flight)
                elif account in notified:
                    if report["revoke_calls"] != 0 or not report.get("revoked_by_user"):
                        wrong.append(f"sandbox grant {sgrant} (grant {gid}): ended by the user, yet {report['revoke_calls']} revoke calls")
                elif report["revoke_calls"] != 0:
                    twice.append(f"sandbox grant {sgrant} (grant {gid}, account not deleted): {report['revoke_calls']} revoke calls")
    figures["named_in_flight"] = named + allowed_named
    figures["revoked_twice_beyond_in_flight"] = len(twice)
    check(f"phase {phase}: the providers revoked every acknowledged grant ({len(unrevoked)} not revoked)", not unrevoked, "; ".join(unrevoked[:15]))
    check(f"phase {phase}: 0 grants revoked twice beyond those in flight at the kill ({len(allowed_named)} named: "
          f"{'; '.join(allowed_named[:10]) or 'none'})", not twice, "; ".join(twice[:15]))
    check(f"phase {phase}: every code exchanged exactly once (exchange_lost only in flight)", not exchanges, "; ".join(exchanges[:15]))

    # ---- webhooks: every event delivered at least once, in order per app ----
    clients = (APPLE_A, APPLE_B, GOOGLE)
    snapshot = query("SELECT id, cursor, client_id, type FROM revoker.events WHERE client_id IN ('" + "','".join(clients) + "')"
                     f" AND occurred_at >= to_timestamp({start});\n") or []
    deadline = time.time() + 60
    while True:
        with Receiver.lock:
            got = {d["id"] for d in Receiver.log}
        undelivered = [row for row in snapshot if row[0] not in got]
        if not undelivered or time.time() > deadline:
            break
        time.sleep(0.5)
    with Receiver.lock:
        log = list(Receiver.log)
    feed_ids = {row[0] for row in query("SELECT id FROM revoker.events;\n") or []}
    phantom = [d for d in log[received_from:] if d["id"] not in feed_ids]
    seen, order_errors, repeats = {}, [], 0
    last = {}
    for d in log:
        if d["id"] in seen:
            repeats += 1
            continue
        seen[d["id"]] = True
        if not d["cursor"]:
            continue
        position = cursor_key(d["cursor"])
        if d["client_id"] in last and position <= last[d["client_id"]]:
            order_errors.append(f"{d['client_id']}: {d['cursor']} after {last[d['client_id']]}")
        last[d["client_id"]] = position
    figures["events"] = len(snapshot)
    figures["deliveries"] = len(log) - received_from
    figures["redeliveries"] = repeats
    figures["deliveries_not_in_feed"] = len(phantom)
    check(f"phase {phase}: every event ({len(snapshot)}) was delivered to the webhook at least once ({repeats} repeats so far)",
          not undelivered, f"{len(undelivered)} undelivered, e.g. {[(r[0], r[3], r[1]) for r in undelivered[:5]]}")
    check(f"phase {phase}: each app's events arrived in feed order", not order_errors, "; ".join(order_errors[:10]))
    check(f"phase {phase}: every delivery was signed with the endpoint's secret", Receiver.bad_signatures == 0, f"{Receiver.bad_signatures} bad")
    check(f"phase {phase}: every event delivered is still in the feed ({len(phantom)} delivered, then gone)", not phantom,
          "; ".join(f"{d['id']} {d['type']} {d['cursor']}" for d in phantom[:10]))

    # ---- the audit trail ----
    rows = query(f"SELECT min(extract(epoch FROM created_at)), count(*) FROM revoker.audit_checkpoints WHERE created_at > to_timestamp({T});\n")
    first_checkpoint = float(rows[0][0]) if rows and rows[0][0] else None
    figures["kill_to_checkpoint_s"] = seconds(first_checkpoint - T) if first_checkpoint else None
    figures["checkpoints_after_kill"] = int(rows[0][1]) if rows else 0
    check(f"phase {phase}: a checkpoint was signed within 60 s of the kill ({figures['kill_to_checkpoint_s']} s; "
          f"{figures['checkpoints_after_kill']} since)", first_checkpoint is not None and first_checkpoint - T <= 60)
    verify = audit_verify()
    figures["audit_verify"] = verify["summary"]
    check(f"phase {phase}: revoker audit verify --witness (both replicas' witness files) is intact ({verify['summary']})",
          verify["code"] == 0, verify["detail"])

    # ---- loss detection (asynchronous replication may lose commits) ----
    signals = detection_signals(T, logs_from)
    figures["revoker_loss_signals"] = signals
    figures["revoker_timeline_checks"] = timeline_checks(logs_from)
    for line in figures["revoker_timeline_checks"]:
        print(f"note: phase {phase}: {line}", flush=True)
    if lost_items:
        # Each write Revoker answered for must be in a write_lost row of its own. One the backend
        # committed through the SQL function was lost with the backend's own transaction: Revoker
        # never answered for it, and says so in docs/runbook.md.
        rows = query("SELECT detail FROM revoker.audit_events WHERE event = 'write_lost';\n") or []
        recorded = {token for row in rows for token in (row[0] or "").split()}
        answered = [item for item in lost_items if item[2] != "sql"]
        silent = [f"{what} {ident}" for what, ident, _ in answered if ident.lower() not in recorded]
        figures["lost_recorded"] = len(answered) - len(silent)
        figures["lost_via_sql"] = len(lost_items) - len(answered)
        check(f"phase {phase}: every lost write Revoker had answered for is recorded as write_lost "
              f"({len(answered) - len(silent)} of {len(answered)}; {len(lost_items) - len(answered)} more were the backend's own SQL commits)",
              not silent, "silent: " + "; ".join(silent[:20]))
    if missing or phantom:
        check(f"phase {phase}: Revoker itself reported the lost writes", bool(signals),
              "undetected by Revoker: no checkpoint_refused row or event, no log line about lost or rewound history, "
              "audit verify did not name it")
    elif signals:
        print(f"note: phase {phase}: Revoker signalled {signals} although no acknowledged item is missing", flush=True)

    alive = [name for name, pid in zip(SERVE_NAMES, SERVE_PIDS) if pid_alive(pid)]
    check(f"phase {phase}: both revoker serve processes are still alive ({', '.join(alive) or 'none'})", len(alive) == len(SERVE_PIDS))
    figures["in_flight_requests"] = sorted(in_flight)[:50]
    return figures


def pid_alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return False


def audit_verify():
    public = WORK / "audit-public-key.pem"
    if not public.exists():
        with open(public, "w") as out:
            subprocess.run([REVOKER, "audit", "public-key", "--config", str(WORK / "revoker-a.json")], stdout=out, stderr=subprocess.DEVNULL, check=False)
    witnesses = [str(WORK / f"witness-{name}.jsonl") for name in SERVE_NAMES if (WORK / f"witness-{name}.jsonl").exists()]
    cmd = [REVOKER, "audit", "verify", "--config", str(WORK / "revoker-a.json"), "--public-key", str(public), "--json"]
    for w in witnesses:
        cmd += ["--witness", w]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    parsed = jbody(result.stdout.encode())
    keys = ("intact", "rows", "checkpoints", "chains", "problems")
    summary = {k: (len(v) if isinstance(v, list) else v) for k, v in parsed.items() if k in keys} if parsed else {}
    summary["exit"] = result.returncode
    summary["witness_files"] = len(witnesses)
    problems = parsed.get("problems") if parsed else None
    detail = json.dumps(problems)[:800] if problems else (result.stderr.strip()[-800:] or result.stdout.strip()[-800:])
    return {"code": result.returncode, "summary": summary, "detail": detail}


def timeline_checks(logs_from):
    """Revoker's own 'the timeline changed' lines since the phase began (facts only)."""
    lines = []
    for name in SERVE_NAMES:
        with open(WORK / f"serve-{name}.log", errors="replace") as f:
            f.seek(logs_from.get(name, 0))
            for line in f:
                if "timeline changed" in line:
                    facts = " ".join(re.findall(r"revoker\.(?:timeline\.from|timeline\.to|writes)=\S+", line))
                    lines.append(f"serve {name}: {facts}: {line.split('] ', 1)[-1].strip()[:160]}")
    return lines


def detection_signals(T, logs_from):
    """What Revoker itself said about a history that went back: checkpoint refusals (rows and
    events), log lines about lost or rewound writes, /readyz's audit line."""
    signals = []
    rows = query(f"SELECT count(*) FROM revoker.audit_events WHERE event = 'checkpoint_refused' AND occurred_at >= to_timestamp({T});\n")
    if rows and int(rows[0][0]):
        signals.append(f"{rows[0][0]} checkpoint_refused audit rows")
    rows = query(f"SELECT count(*) FROM revoker.outbox_events WHERE type = 'audit.checkpoint_refused' AND occurred_at >= to_timestamp({T});\n")
    if rows and int(rows[0][0]):
        signals.append(f"{rows[0][0]} audit.checkpoint_refused events")
    # Revoker checks, when the timeline changes, that what it acknowledged is still there: a
    # line saying all of it "is there" is a check passed, not a loss.
    about_checkpoints = re.compile(r"checkpoint.*(refus|diverg|no longer|missing)|(refus|diverg).*checkpoint", re.I)
    about_loss = re.compile(r"lost.write|writes? (were |was )?lost|rewound|history went back|timeline", re.I)
    for name in SERVE_NAMES:
        with open(WORK / f"serve-{name}.log", errors="replace") as f:
            f.seek(logs_from.get(name, 0))
            hits = [line.strip() for line in f if about_checkpoints.search(line)
                    or about_loss.search(line) and not re.search(r"acknowledged .* is there", line)]
        if hits:
            signals.append(f"serve {name}: {len(hits)} log lines, e.g. {hits[0][:300]}")
    for name, port in zip(SERVE_NAMES, SERVE_PORTS):
        status, _, data = call("GET", f"http://127.0.0.1:{port}/readyz", timeout=5)
        if status != 200 and b"audit" in data:
            signals.append(f"serve {name} /readyz {status}: {data[:200].decode(errors='replace')}")
    return signals


# ---- the whole run -------------------------------------------------------------------------------------

def table(phases):
    rows = [
        ("kill", "kill"), ("leader before -> after", None), ("operations (acknowledged)", None),
        ("kill -> writable through HAProxy (s)", "kill_to_writable_s"),
        ("kill -> database back, no earlier than (s)", "database_back_from_s"),
        ("old leader's commits after the kill", "commits_by_the_old_leader_after_kill"),
        ("kill -> first revocation finished (s)", "kill_to_first_revocation_s"),
        ("kill -> live workers back to 2 (s)", "live_workers_back_s"),
        ("kill -> /metrics says 2 on both (s)", "live_workers_back_by_metrics_s"),
        ("kill -> first checkpoint (s)", "kill_to_checkpoint_s"),
        ("kill -> load answered (s)", "kill_to_load_answered_s"),
        ("kill -> backlog drained (s)", "kill_to_drained_s"),
        ("in flight at the kill", "in_flight_at_kill"),
        ("longest wait of one of them (s)", "longest_wait_after_kill_s"),
        ("rescued (lease expired) after the kill", "rescued_after_kill"),
        ("released after the kill", "released_after_kill"),
        ("API 503 (with Retry-After)", None), ("API 500", "api_500"), ("API connection errors", "api_connection_errors"),
        ("acknowledged, then missing", None), ("revoked twice beyond in flight", "revoked_twice_beyond_in_flight"),
        ("named in flight (allowed)", None), ("webhook deliveries (repeats)", None),
    ]
    width = 46
    print("\n" + "figure".ljust(width) + "".join(f"phase {p['phase']}".ljust(22) for p in phases), flush=True)
    for label, key in rows:
        cells = []
        for p in phases:
            if label.startswith("leader"):
                value = f"{p.get('leader_before')} -> {p.get('leader_after')}"
            elif label.startswith("operations"):
                value = f"{p['operations']} ({p.get('acknowledged')})"
            elif label.startswith("API 503"):
                value = f"{p.get('api_503')} ({p.get('api_503_with_retry_after')})"
            elif label.startswith("acknowledged, then"):
                value = len(p.get("lost", []))
            elif label.startswith("named"):
                value = len(p.get("named_in_flight", []))
            elif label.startswith("webhook"):
                value = f"{p.get('deliveries')} ({p.get('redeliveries')})"
            else:
                value = p.get(key)
            cells.append(str(value).ljust(22))
        print(label.ljust(width) + "".join(cells), flush=True)
    print(flush=True)


def main():
    parser = argparse.ArgumentParser(prog="scripts/failover-test")
    parser.add_argument("--kill", choices=("postgres", "member", "both"), default="both")
    parser.add_argument("--requests", type=int)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--slack", type=float, default=5.0)
    parser.add_argument("--async", dest="asynchronous", action="store_true")
    parser.add_argument("--lag", type=float, default=0.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    global SLACK
    SLACK = args.slack
    n = args.requests or (300 if args.small else 3000)
    duration = max(30.0, n / 40.0) if not args.small else max(40.0, n / 8.0)
    sync = not args.asynchronous
    kills = ["postgres", "member"] if args.kill == "both" else [args.kill]
    key = (WORK / "keys/failover.key").read_text().strip()
    Receiver.secret = base64.b64decode((WORK / "keys/webhook-secret").read_text().strip().removeprefix("whsec_"))
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", int(ENV["FO_RECEIVER_PORT"])), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    for client in (APPLE_A, GOOGLE):
        status, _, _ = call("PUT", sandbox_prefix(client) + "/faults", {"latency_ms": LATENCY_MS})
        if status != 200:
            check(f"the sandbox takes {LATENCY_MS} ms of latency", False, f"PUT faults answered {status}")
    phases = []
    try:
        for phase, kill in enumerate(kills, start=1):
            if not check(f"phase {phase}: the cluster is healthy before the kill ({'a synchronous standby' if sync else 'a replica'} streams)",
                         wait_healthy(sync), ha("status")[1][-600:]):
                break
            figures = run_phase(phase, kill, n, duration, key, sync, args.lag)
            phases.append(figures)
            if kill == "member" and figures.get("victim"):
                # The killed member comes back as a standby, for the next phase and a clean stop.
                code, out, err = ha("restart-member", figures["victim"], timeout=400)
                figures["rejoined_s"] = out if code == 0 else None
                check(f"phase {phase}: {figures['victim']} rejoined as a {'synchronous standby' if sync else 'replica'} ({out or '-'} s)",
                      code == 0, err[-400:])
    except Exception as error:  # noqa: BLE001 - reported as a failed check, then the summary
        import traceback
        traceback.print_exc()
        check("the phases ran to the end", False, f"{type(error).__name__}: {str(error)[:300]}")
    finally:
        receiver.shutdown()
    if phases:
        table(phases)
    if failed:
        for name in SERVE_NAMES:
            path = WORK / f"serve-{name}.log"
            if path.is_file():
                lines = [l for l in path.read_text(errors="replace").splitlines() if re.search(r"\b(error|critical|warning)\b", l, re.I)]
                print(f"--- the last warnings and errors of revoker serve {name} ({len(lines)} in all) ---", file=sys.stderr)
                print("\n".join(l[:400] for l in lines[-15:]), file=sys.stderr)
    summary = f"{passed} passed, {failed} failed"
    print(summary, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"replication": "synchronous" if sync else "asynchronous", "requests_per_phase": n,
                                               "phases": phases, "checks": report_lines, "summary": summary}, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
