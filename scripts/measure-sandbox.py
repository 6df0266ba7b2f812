#!/usr/bin/env python3
"""Measures what the Apple sandbox spends on one /auth/token + /auth/revoke pair.

Starts `revoker sandbox` on a free port, mints N refresh tokens through the admin surface,
then validates and revokes each over one keep-alive connection, and reads the sandbox
process's CPU time (utime+stime from /proc) before and after the /auth calls only.
Needs the `cryptography` package for ES256.

usage: scripts/measure-sandbox.py [--binary .build/release/revoker] [-n 2000]
"""
import argparse, base64, concurrent.futures, threading, http.client, json, os, socket, subprocess, sys, tempfile, time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def client_secret(key, team, kid, client_id):
    now = int(time.time())
    header = b64url(json.dumps({"alg": "ES256", "kid": kid}).encode())
    claims = b64url(json.dumps({"iss": team, "iat": now, "exp": now + 300, "aud": "https://appleid.apple.com", "sub": client_id}).encode())
    r, s = decode_dss_signature(key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256())))
    return f"{header}.{claims}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/revoker")
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=1, help="concurrent keep-alive connections driving the calls")
    parser.add_argument("--perf", metavar="FILE", help="record a perf profile of the sandbox during the /auth calls only")
    args = parser.parse_args()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    key = ec.generate_private_key(ec.SECP256R1())
    with tempfile.NamedTemporaryFile("wb", suffix=".p8", delete=False) as p8:
        p8.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    client_id, team, kid = "com.example.measure", "TEAM000001", "KEY0000001"
    sandbox = subprocess.Popen(
        [args.binary, "sandbox", "--port", str(port), "--log-level", "error", "--register", f"{client_id},{team},{kid},{p8.name}"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        sandbox.stdout.readline()
        os.unlink(p8.name)
        local = threading.local()

        def post(path, body, content_type):
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection("127.0.0.1", port)
            local.conn.request("POST", path, body=body, headers={"Content-Type": content_type})
            response = local.conn.getresponse()
            return response.status, response.read()

        tokens = []
        for i in range(args.n):
            status, body = post("/sandbox/refresh-tokens", json.dumps({"client_id": client_id, "subject": f"user{i}"}), "application/json")
            tokens.append(json.loads(body)["value"])
        secrets = [client_secret(key, team, kid, client_id) for _ in range(2 * args.n)]
        form = "application/x-www-form-urlencoded"

        profiler = None
        if args.perf:
            profiler = subprocess.Popen(["perf", "record", "-F", "4000", "-g", "-o", args.perf, "-p", str(sandbox.pid)], stderr=subprocess.DEVNULL)
            time.sleep(1)
        before, started = cpu_seconds(sandbox.pid), time.monotonic()
        def pair(i):
            token = tokens[i]
            status, _ = post("/auth/token", f"client_id={client_id}&client_secret={secrets[2*i]}&grant_type=refresh_token&refresh_token={token}", form)
            assert status == 200, status
            status, _ = post("/auth/revoke", f"client_id={client_id}&client_secret={secrets[2*i+1]}&token={token}&token_type_hint=refresh_token", form)
            assert status == 200, status

        with concurrent.futures.ThreadPoolExecutor(args.connections) as pool:
            list(pool.map(pair, range(args.n)))
        cpu, wall = cpu_seconds(sandbox.pid) - before, time.monotonic() - started
        if profiler:
            profiler.send_signal(2)
            profiler.wait()

        print(json.dumps({
            "pairs": args.n,
            "sandbox_cpu_seconds": round(cpu, 3),
            "sandbox_cpu_us_per_pair": round(cpu / args.n * 1e6, 1),
            "sandbox_pairs_per_cpu_second": round(args.n / cpu, 1) if cpu else None,
            "connections": args.connections,
            "wall_seconds": round(wall, 3),
        }, indent=2))
    finally:
        sandbox.terminate()
        sandbox.wait()


if __name__ == "__main__":
    sys.exit(main())
