"""Measures Revoker on a database holding years of history (scripts/bench-history writes it).

Read-only figures are taken on the history itself: `revoker audit verify` over everything and
since yesterday, the API's and the compliance pages' searches, the status page, receipts, a
month's CSV export (with the server's memory sampled while it streams) and the bytes on disk.
The drain and prune change what they touch, so they run on a copy of the history, against the
same drain on an empty database: the Apple sandbox (`revoker sandbox`), `revoker serve --no-worker`
taking requests over HTTP, then one `revoker work` draining them.

Environment: DATABASE_URL (the server), BENCH_REVOKER (the binary), BENCH_DATABASE (the history's
database), BENCH_KEYS (its keys), BENCH_DRAIN, BENCH_SAMPLES, BENCH_JSON (optional output file).
"""

import concurrent.futures
import datetime
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

REVOKER = os.environ["BENCH_REVOKER"]
DATABASE = os.environ["BENCH_DATABASE"]
KEYS = os.environ["BENCH_KEYS"]
DRAIN = int(os.environ.get("BENCH_DRAIN", "5000"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "200"))
JSON_OUT = os.environ.get("BENCH_JSON", "")
PARTS = os.environ.get("BENCH_PARTS", "size,verify,reads,drains").split(",")
SERVER = os.environ["DATABASE_URL"]
APPS = ["com.example.history.notes", "com.example.history.photos", "com.example.history.web"]
TEAM, KEY_ID = "HISTORY001", "HISTKEY001"

figures = {}
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer to look at (the sign-in's 303 sets the session)."""

    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)


def say(line):
    print(line, flush=True)


def database_url(name):
    parts = urllib.parse.urlsplit(SERVER)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def sql(database, statement):
    """Rows of `statement` as lists of strings (psql, unaligned)."""
    out = subprocess.run(["psql", database_url(database), "-XAtq", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", statement],
                         check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, headers=None, body=None, stream=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _opener.open(request, timeout=120) as response:
            if stream:
                total = 0
                while chunk := response.read(65536):
                    total += len(chunk)
                    stream(chunk)
                return response.status, response.headers, total
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def percentiles(values):
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"p50_ms": round(pick(0.5) * 1000, 1), "p99_ms": round(pick(0.99) * 1000, 1), "max_ms": round(ordered[-1] * 1000, 1),
            "samples": len(ordered)}


def timed(name, calls):
    """Times each call (a function returning the HTTP status); every one must answer 200."""
    durations = []
    for call in calls:
        started = time.perf_counter()
        status = call()
        durations.append(time.perf_counter() - started)
        if status != 200:
            raise SystemExit(f"{name}: answered {status}")
    figures[name] = percentiles(durations)
    f = figures[name]
    say(f"{name:<44} p50 {f['p50_ms']:>8} ms   p99 {f['p99_ms']:>8} ms   ({f['samples']} calls)")


class Stack:
    """Keys, the sandbox and a configuration file for `revoker` processes on one database."""

    def __init__(self, work):
        self.work = work
        keys = os.path.join(work, "keys")
        os.makedirs(keys, mode=0o700)
        self.p8 = os.path.join(keys, f"AuthKey_{KEY_ID}.p8")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", self.p8],
                       check=True, capture_output=True)
        os.chmod(self.p8, 0o600)
        key = subprocess.run([REVOKER, "api-key", "bench", "--scope", "admin"], check=True, capture_output=True, text=True)
        self.api_key = key.stdout.strip()
        self.api_entry = key.stderr.strip().splitlines()[-1]
        log = open(os.path.join(work, "sandbox.log"), "w")
        registrations = sum((["--register", f"{app},{TEAM},{KEY_ID},{self.p8}"] for app in APPS), [])
        self.sandbox = subprocess.Popen([REVOKER, "sandbox", "--port", "0", "--log-level", "warning"] + registrations,
                                        stdout=log, stderr=subprocess.STDOUT)
        self.sandbox_url = None
        for _ in range(300):
            found = re.search(r"^Apple sandbox listening on (http:\S+)$", open(log.name).read(), re.M)
            if found:
                self.sandbox_url = found.group(1)
                break
            time.sleep(0.1)
        if not self.sandbox_url:
            raise SystemExit("revoker sandbox did not start: " + open(log.name).read())
        self.port = free_port()
        self.config = os.path.join(work, "revoker.json")
        document = {
            "apple_base_url": self.sandbox_url,
            "sealing_keys_file": os.path.join(KEYS, "sealing-keys"),
            "audit": {"signing_key_file": os.path.join(KEYS, "audit-signing-key.pem")},
            "apps": [{"client_id": app, "team_id": TEAM, "key_id": KEY_ID, "private_key_file": self.p8} for app in APPS],
            "worker": {"concurrency": 256, "batch_size": 128, "poll_interval_seconds": 0.2, "max_requests_per_second": 10000},
            "http": {"host": "127.0.0.1", "port": self.port, "api_keys": [json.loads(self.api_entry)],
                     "ui": {"enabled": True, "public_url": f"http://127.0.0.1:{self.port}"}},
        }
        with open(self.config, "w") as f:
            json.dump(document, f)
        os.chmod(self.config, 0o600)

    def environment(self, database):
        return dict(os.environ, DATABASE_URL=database_url(database))

    def serve(self, database):
        log = open(os.path.join(self.work, f"serve-{database}.log"), "w")
        process = subprocess.Popen([REVOKER, "serve", "--no-worker", "--config", self.config, "--log-level", "warning"],
                                   env=self.environment(database), stdout=log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                if http("GET", f"http://127.0.0.1:{self.port}/readyz")[0] == 200:
                    return process
            except OSError:
                pass
            if process.poll() is not None:
                raise SystemExit("revoker serve exited: " + open(log.name).read())
            time.sleep(0.1)
        raise SystemExit("revoker serve was not ready in 60 s")

    def revoker(self, database, *arguments):
        started = time.perf_counter()
        run = subprocess.run([REVOKER, *arguments, "--config", self.config], env=self.environment(database), capture_output=True, text=True)
        return run, time.perf_counter() - started

    def api(self, path):
        return f"http://127.0.0.1:{self.port}{path}", {"Authorization": "Bearer " + self.api_key, "Accept": "application/json"}

    def sign_in(self):
        base = f"http://127.0.0.1:{self.port}"
        _, headers, body = http("GET", base + "/ui/sign-in")
        csrf = re.search(r'name="csrf" value="([^"]+)"', body.decode()).group(1)
        cookie = next(c.split(";")[0] for c in headers.get_all("Set-Cookie") if c.startswith("revoker_sign_in="))
        form = urllib.parse.urlencode({"csrf": csrf, "api_key": self.api_key}).encode()
        status, headers, _ = http("POST", base + "/ui/sign-in", {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}, form)
        session = next(c.split(";")[0] for c in headers.get_all("Set-Cookie") if c.startswith("revoker_session="))
        return session

    def stop(self, process):
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure_size():
    # A partitioned table (the trail, by month) is counted as the sum of its partitions.
    rows = sql(DATABASE, """
        SELECT coalesce(p.relname, c.relname), sum(pg_relation_size(c.oid)),
               sum(coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i WHERE i.indrelid = c.oid), 0)
                   + coalesce(pg_relation_size(c.reltoastrelid), 0)),
               sum(greatest(c.reltuples, 0))::bigint
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_inherits h ON h.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = h.inhparent
        WHERE n.nspname = 'revoker' AND c.relkind = 'r'
        GROUP BY 1 ORDER BY sum(pg_total_relation_size(c.oid)) DESC""")
    tables = {name: {"table_bytes": int(t), "index_bytes": int(i), "rows": int(n)} for name, t, i, n in rows}
    counts = sql(DATABASE, """SELECT (SELECT count(*) FROM revoker.audit_events),
        (SELECT count(*) FROM revoker.revocation_requests WHERE purpose = 'revoke'),
        (SELECT count(*) FROM revoker.grants WHERE state = 'held'), pg_database_size(current_database())""")[0]
    audit_rows, revocations, grants, database_bytes = map(int, counts)
    per_row = lambda t: (tables[t]["table_bytes"] + tables[t]["index_bytes"]) / max(tables[t]["rows"], 1)
    rows_per_revocation = float(sql(DATABASE, "SELECT revoker_history.rows_per_revocation()")[0][0])
    audit_row = per_row("audit_events")
    per_revocation = per_row("revocation_requests") + per_row("outbox_events") + rows_per_revocation * audit_row
    per_grant = per_row("grants") + per_row("revocation_requests") + per_row("outbox_events") + 7 * audit_row
    figures["size"] = {"audit_rows": audit_rows, "revocations": revocations, "grants_held": grants, "database_bytes": database_bytes,
                       "bytes_per_audit_row": round(audit_row), "bytes_per_revocation": round(per_revocation),
                       "bytes_per_held_grant": round(per_grant),
                       "projected_bytes_at_100m_audit_rows": round(database_bytes * 100_000_000 / max(audit_rows, 1)), "tables": tables}
    say(f"history: {audit_rows} audit rows, {revocations} revocations, {grants} grants held, {database_bytes / 2**30:.2f} GiB")
    for name in ("audit_events", "revocation_requests", "grants", "outbox_events", "audit_checkpoints"):
        t = tables[name]
        say(f"  {name:<24} table {t['table_bytes'] / 2**20:>9.1f} MiB   indexes {t['index_bytes'] / 2**20:>9.1f} MiB   {t['rows']} rows")
    say(f"  per audit row {audit_row:.0f} B, per revocation {per_revocation:.0f} B, per held grant {per_grant:.0f} B; "
        f"at 100 M audit rows about {database_bytes * 100_000_000 / max(audit_rows, 1) / 2**30:.0f} GiB")


def measure_verify(stack):
    run, seconds = stack.revoker(DATABASE, "audit", "verify", "--json")
    result = json.loads(run.stdout) if run.stdout.strip().startswith("{") else {}
    rows = result.get("rows_checked", 0)
    if run.returncode != 0:
        raise SystemExit(f"audit verify: exit {run.returncode}: {run.stdout[-2000:]} {run.stderr[-2000:]}")
    figures["verify_full"] = {"seconds": round(seconds, 2), "rows": rows, "rows_per_second": round(rows / seconds)}
    say(f"{'audit verify (everything)':<44} {seconds:8.2f} s   {rows} rows   {rows / seconds:,.0f} rows/s")
    # The auditor's daily run: the checkpoint of the day before the last kept as the witness.
    witness = os.path.join(stack.work, "kept-checkpoints.jsonl")
    kept = sql(DATABASE, "SELECT revoker.audit_checkpoint_record(c) FROM revoker.audit_checkpoints c "
                         "WHERE created_at <= (SELECT max(day) FROM revoker_history.parts)::timestamptz ORDER BY seq DESC LIMIT 1")
    with open(witness, "w") as f:
        f.write(kept[0][0] + "\n")
    run, seconds = stack.revoker(DATABASE, "audit", "verify", "--json", "--witness", witness, "--after-witness")
    if run.returncode != 0:
        raise SystemExit(f"audit verify --after-witness: exit {run.returncode}: {run.stdout[-2000:]} {run.stderr[-2000:]}")
    result = json.loads(run.stdout)
    figures["verify_after_witness"] = {"seconds": round(seconds, 2), "rows": result.get("rows_checked", 0),
                                       "checkpoints": result.get("checkpoints_checked", 0)}
    say(f"{'audit verify --after-witness (a day)':<44} {seconds:8.2f} s   {result.get('rows_checked', 0)} rows, "
        f"{result.get('checkpoints_checked', 0)} checkpoint(s)")


def measure_reads(stack):
    def sample(column, table, where="true"):
        return [r[0] for r in sql(DATABASE, f"SELECT {column} FROM revoker.{table} WHERE {where} ORDER BY random() LIMIT {SAMPLES}")]

    references = sample("external_reference", "revocation_requests", "purpose = 'revoke'")
    users = sample("apple_user_id", "revocation_requests", "apple_user_id IS NOT NULL")
    ids = sample("id", "revocation_requests", "purpose = 'revoke'")
    accounts = sample("account_reference", "grants")
    first, last = sql(DATABASE, "SELECT min(day)::text, max(day)::text FROM revoker_history.parts")[0]
    span = (datetime.date.fromisoformat(last) - datetime.date.fromisoformat(first)).days
    weeks = []
    for _ in range(SAMPLES):
        start = datetime.date.fromisoformat(first) + datetime.timedelta(days=random.randrange(max(span - 7, 1)))
        weeks.append((random.choice(APPS), start.isoformat(), (start + datetime.timedelta(days=7)).isoformat()))

    def get(path, headers):
        return http("GET", f"http://127.0.0.1:{stack.port}{path}", headers)[0]

    api = {"Authorization": "Bearer " + stack.api_key, "Accept": "application/json"}
    q = urllib.parse.quote
    timed("API audit search by reference", [lambda r=r: get(f"/v1/audit?external_reference={q(r)}", api) for r in references])
    timed("API audit search by user id", [lambda u=u: get(f"/v1/audit?apple_user_id={q(u)}", api) for u in users])
    timed("API audit search by app and week", [lambda w=w: get(f"/v1/audit?client_id={q(w[0])}&from={w[1]}T00:00:00Z&to={w[2]}T00:00:00Z", api)
                                                for w in weeks])
    timed("API request by reference", [lambda r=r: get(f"/v1/revocations?external_reference={q(r)}", api) for r in references])
    timed("API receipt of one request", [lambda i=i: get(f"/v1/revocations/{i}/receipt", api) for i in ids])
    page = {"Cookie": stack.sign_in()}
    timed("page: search by reference", [lambda r=r: get(f"/ui/search?reference={q(r)}", page) for r in references])
    timed("page: search by user id", [lambda u=u: get(f"/ui/search?apple_user_id={q(u)}", page) for u in users])
    timed("page: search by app and week", [lambda w=w: get(f"/ui/search?client_id={q(w[0])}&from={w[1]}&to={w[2]}", page) for w in weeks])
    timed("page: an account", [lambda a=a: get(f"/ui/accounts/{q(a)}", page) for a in accounts])
    timed("page: status", [lambda: get("/ui/status", page) for _ in range(min(SAMPLES, 50))])
    timed("page: one request", [lambda i=i: get(f"/ui/requests/{i}", page) for i in ids])
    durations = []
    for _ in range(5):
        run, seconds = stack.revoker(DATABASE, "status", "--json")
        if run.returncode != 0:
            raise SystemExit("revoker status: " + run.stderr[-2000:])
        durations.append(seconds)
    figures["revoker status"] = percentiles(durations)
    say(f"{'revoker status (the command, whole process)':<44} p50 {figures['revoker status']['p50_ms']:>8} ms")
    return page


def measure_export(stack, page, serve):
    month = sql(DATABASE, "SELECT to_char(date_trunc('month', max(day)) - interval '1 month', 'YYYY-MM-DD'), "
                          "to_char(date_trunc('month', max(day)) - interval '1 day', 'YYYY-MM-DD') FROM revoker_history.parts")[0]
    rss = lambda: int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{serve.pid}/status").read()).group(1)) * 1024
    before = rss()
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    lines = [0]
    started = time.perf_counter()
    status, _, size = http("GET", f"http://127.0.0.1:{stack.port}/ui/search.csv?from={month[0]}&to={month[1]}", page,
                           stream=lambda chunk: lines.__setitem__(0, lines[0] + chunk.count(b"\n")))
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if status != 200:
        raise SystemExit(f"month export: {status}")
    figures["month_csv"] = {"from": month[0], "to": month[1], "seconds": round(seconds, 2), "bytes": size, "lines": lines[0],
                            "server_rss_before_bytes": before, "server_rss_peak_bytes": peak[0]}
    say(f"{'a month as CSV (/ui/search.csv)':<44} {seconds:8.2f} s   {lines[0]} lines, {size / 2**20:.1f} MiB; "
        f"server RSS {before / 2**20:.0f} MiB before, peak {peak[0] / 2**20:.0f} MiB")


def drain(stack, database, label, count, during=None):
    """Enqueues `count` sandbox grants over HTTP, then times one `revoker work` draining them."""
    serve = stack.serve(database)
    try:
        def one(n):
            minted = json.loads(http("POST", stack.sandbox_url + "/sandbox/refresh-tokens", {"Content-Type": "application/json"},
                                     json.dumps({"client_id": APPS[0], "subject": f"drain-{label}-{n}"}).encode())[2])
            url, headers = stack.api("/v1/revocations")
            body = json.dumps({"client_id": APPS[0], "external_reference": f"drain-{label}-{n}", "refresh_token": minted["value"]}).encode()
            status, _, answer = http("POST", url, dict(headers, **{"Content-Type": "application/json"}), body)
            if status != 202:
                raise SystemExit(f"enqueue: {status} {answer[:300]}")

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(count)))
    finally:
        stack.stop(serve)
    waiting = f"SELECT count(*) FILTER (WHERE state IN ('pending', 'running')), count(*) FILTER (WHERE outcome = 'revoked') " \
              f"FROM revoker.revocation_requests WHERE external_reference LIKE 'drain-{label}-%'"
    log = open(os.path.join(stack.work, f"work-{label}.log"), "w")
    started = time.perf_counter()
    worker = subprocess.Popen([REVOKER, "work", "--config", stack.config, "--log-level", "warning"], env=stack.environment(database),
                              stdout=log, stderr=subprocess.STDOUT)
    side = during() if during else None
    try:
        while True:
            left, revoked = map(int, sql(database, waiting)[0])
            if left == 0:
                break
            if worker.poll() is not None:
                raise SystemExit(f"revoker work exited: {open(log.name).read()[-2000:]}")
            time.sleep(0.05)
        seconds = time.perf_counter() - started
    finally:
        stack.stop(worker)
    if revoked != count:
        raise SystemExit(f"drain {label}: {revoked} of {count} revoked")
    return seconds, side


def measure_drains(stack):
    empty = "revoker_bench_empty"
    copy = DATABASE + "_copy"
    for name in (empty, copy):
        sql("postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    sql("postgres", f'CREATE DATABASE "{empty}"')
    subprocess.run([REVOKER, "migrate", "--config", stack.config], env=stack.environment(empty), check=True, capture_output=True)
    started = time.perf_counter()
    sql("postgres", f'CREATE DATABASE "{copy}" TEMPLATE "{DATABASE}"')
    say(f"(copied the history for the drain and prune in {time.perf_counter() - started:.0f} s)")
    try:
        results = {}
        for label, database in (("empty", empty), ("history", copy)):
            seconds, _ = drain(stack, database, label, DRAIN)
            results[label] = DRAIN / seconds
            say(f"{'drain, ' + label + ' database':<44} {DRAIN / seconds:8.0f} revocations/s   ({DRAIN} in {seconds:.1f} s)")
        figures["drain"] = {"requests": DRAIN, "empty_per_second": round(results["empty"]), "history_per_second": round(results["history"]),
                            "history_share": round(results["history"] / results["empty"], 3)}
        cutoff = sql(copy, "SELECT count(*) FROM revoker.revocation_requests WHERE finished_at < now() - interval '30 days'")[0][0]

        def prune():
            holder = {}

            def run():
                run, seconds = stack.revoker(copy, "prune", "--older-than-days", "30", "--json")
                holder["seconds"], holder["run"] = seconds, run

            thread = threading.Thread(target=run)
            thread.start()
            holder["thread"] = thread
            return holder

        seconds, holder = drain(stack, copy, "prune", DRAIN, during=prune)
        holder["thread"].join()
        run = holder["run"]
        if run.returncode != 0:
            raise SystemExit("prune: " + run.stderr[-2000:])
        pruned = json.loads(run.stdout)
        figures["prune"] = {"requests_older_than_30_days": int(cutoff), "pruned": pruned.get("pruned"), "events_pruned": pruned.get("events_pruned"),
                            "prune_seconds": round(holder["seconds"], 1), "drain_during_per_second": round(DRAIN / seconds),
                            "drain_during_share": round(DRAIN / seconds / results["history"], 3)}
        say(f"{'drain while prune runs':<44} {DRAIN / seconds:8.0f} revocations/s   ({DRAIN / seconds / results['history']:.0%} of the drain alone); "
            f"prune removed {pruned.get('pruned')} requests and {pruned.get('events_pruned')} events in {holder['seconds']:.1f} s")
    finally:
        for name in (empty, copy):
            sql("postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main():
    work = tempfile.mkdtemp(prefix="bench-history-")
    os.chmod(work, 0o700)
    try:
        stack = Stack(work)
        try:
            if "size" in PARTS:
                measure_size()
            if "verify" in PARTS:
                measure_verify(stack)
            if "reads" in PARTS:
                serve = stack.serve(DATABASE)
                try:
                    page = measure_reads(stack)
                    measure_export(stack, page, serve)
                finally:
                    stack.stop(serve)
            if "drains" in PARTS:
                measure_drains(stack)
        finally:
            stack.sandbox.terminate()
            stack.sandbox.wait()
    finally:
        # The app's key and the API key's entry go with the run.
        shutil.rmtree(work, ignore_errors=True)
    if JSON_OUT:
        with open(JSON_OUT, "w") as f:
            json.dump(figures, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
