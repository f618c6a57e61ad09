#!/usr/bin/env python3
"""Three `kiln serve` replicas behind HAProxy (deploy/haproxy/haproxy.cfg, run as it is), a load
test across them, and one replica killed (SIGKILL) mid-run. `make serve-replicas` runs it.

What is checked (docs/DESIGN.md, "Replicas"):
- sessions open on every replica and stick to it: every answer for a session comes from the
  replica that opened it (HAProxy's X-Kiln-Replica header);
- every answer is right: each upload is an exact int-valued float32 vector, each op result
  (x * x, exact below 2^24) is compared with Python's own product;
- nothing acknowledged is lost. A request is *acknowledged* when its client has received its 2xx
  answer in full. Every tensor an acknowledged upload or op made, in a session whose replica
  lives, reads back byte for byte at the end (and at random points during the run);
- the killed replica's clients get a clear error in the API's JSON error shape (REPLICA_DOWN,
  also for a request in flight at the kill, which HAProxy replays; REPLICA_FAILED for one it
  cannot replay), never a 2xx for a session it held, and then open new sessions on the others,
  which work;
- p99 latency of the 5 s after the kill's first 5 s is within 2x the p99 before the kill.

Only loopback addresses are used; every loop is bounded in time. Python's standard library
only (no numpy), so it runs wherever `kiln` and `haproxy` do.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "replica-test-token-0123456789"
N = 3
# What a client of a killed replica's session may be told; anything else is a failure.
GONE_CODES = {"REPLICA_FAILED", "REPLICA_DOWN"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replica_config(port, metrics_port):
    return f"""
listen = "127.0.0.1:{port}"
metrics_listen = "127.0.0.1:{metrics_port}"
request_timeout_ms = 30000
shutdown_grace_ms = 2000
[[tenants]]
name = "load"
tokens = ["{TOKEN}"]
max_open_sessions = 256
max_concurrent_requests = 8
"""


def wait_for(url_host, url_port, path, deadline, ok=(200,)):
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection(url_host, url_port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status in ok:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


class Client(threading.Thread):
    """One user: a session through the balancer, uploads, ops, reads; a new session when told
    its old one is gone."""

    def __init__(self, n, port, stop, kill_time, seed):
        super().__init__(daemon=True)
        self.n, self.port, self.stop, self.kill_time = n, port, stop, kill_time
        self.rng = random.Random(seed)
        self.conn = None
        self.session = None  # (id, replica)
        # Acknowledged tensors per session: {(sid, replica): {tid: bytes}}.
        self.acked = {}
        self.records = []  # (start, seconds, status, code, kind)
        self.wrong = []
        self.unexpected = []
        self.not_sticky = 0
        self.told = []  # (code, message) answers for sessions of the killed replica
        self.sessions_opened = []  # (sid, replica, time)

    def request(self, method, path, body=None, ctype=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            if ctype:
                headers["Content-Type"] = ctype
            t0 = time.time()
            try:
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                # No answer at all: HAProxy answers every request it forwarded, so this is a
                # keep-alive connection it had closed. A GET is sent again once; a POST is not
                # (it might have been applied), so it counts as a failure.
                self.conn.close()
                self.conn = None
                if attempt == 1 or method != "GET":
                    on = self.session[1] if self.session else "-"
                    self.unexpected.append(f"{method} {path} (session on {on}): transport error {e!r}")
                    return None
                continue
            dt = time.time() - t0
            code = ""
            if r.status >= 400:
                try:
                    code = json.loads(data)["error"]["code"]
                except (ValueError, KeyError, TypeError):
                    code = "NOT_JSON"
            self.records.append((t0, dt, r.status, code, method))
            if r.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return r.status, data, r.getheader("X-Kiln-Replica"), code, t0
        return None

    def open_session(self):
        got = self.request("POST", "/v1/sessions")
        if got is None:
            return
        status, data, replica, code, t0 = got
        if status != 201:
            self.unexpected.append(f"open session: {status} {data[:200]!r}")
            time.sleep(0.2)
            return
        sid = json.loads(data)["id"]
        self.session = (sid, replica)
        self.acked[self.session] = {}
        self.sessions_opened.append((sid, replica, t0))

    def session_request(self, method, path, body=None, ctype=None):
        """A request on the current session; None when it failed (recorded)."""
        sid, replica = self.session
        got = self.request(method, f"/v1/sessions/{sid}{path}", body, ctype)
        if got is None:
            return None
        status, data, served_by, code, t0 = got
        if 200 <= status < 300:
            if served_by != replica:
                self.not_sticky += 1
            if self.kill_time[0] and served_by == self.kill_time[1] and t0 > self.kill_time[0] + 0.5:
                self.unexpected.append(f"a 2xx from the killed replica {served_by} after the kill")
            return status, data
        killed = self.kill_time[0] and replica == self.kill_time[1]
        if killed and code in GONE_CODES:
            msg = json.loads(data)["error"]["message"]
            self.told.append((code, msg))
            self.session = None  # gone: the next step opens a new one
        else:
            self.unexpected.append(f"{method} {path} on {replica}: {status} {data[:300]!r}")
            time.sleep(0.05)
        return None

    def step(self):
        n = 64
        x = [float(self.rng.randint(-2000, 2000)) for _ in range(n)]
        got = self.session_request("POST", f"/tensors?dtype=float32&shape={n}", f32(x), "application/octet-stream")
        if got is None:
            return
        ledger = self.acked[self.session]
        tx = json.loads(got[1])["id"]
        ledger[tx] = f32(x)
        body = json.dumps({"inputs": [{"name": "a", "id": tx}, {"name": "b", "id": tx}], "params": {}})
        got = self.session_request("POST", "/ops/mul", body.encode(), "application/json")
        if got is None:
            return
        ty = json.loads(got[1])["id"]
        want = f32([v * v for v in x])
        ledger[ty] = want
        got = self.session_request("GET", f"/tensors/{ty}?format=raw")
        if got is None:
            return
        if got[1] != want:
            self.wrong.append(f"mul of session {self.session[0]}: {got[1][:16]!r} != {want[:16]!r}")
        # Now and then an older acknowledged tensor: still there, still the same bytes.
        if self.rng.random() < 0.3:
            old = self.rng.choice(list(ledger))
            got = self.session_request("GET", f"/tensors/{old}?format=raw")
            if got is not None and got[1] != ledger[old]:
                self.wrong.append(f"tensor {old} of session {self.session[0]} changed")

    def run(self):
        while not self.stop.is_set():
            if self.session is None:
                self.open_session()
                continue
            self.step()
        if self.conn is not None:
            self.conn.close()


def p99(latencies):
    if not latencies:
        return float("nan")
    s = sorted(latencies)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.path.join(ROOT, "target", "release", "kiln"))
    ap.add_argument("--clients", type=int, default=9)
    ap.add_argument("--before", type=float, default=8.0, help="seconds of load before the kill")
    ap.add_argument("--after", type=float, default=10.0, help="seconds of load after the kill")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kiln-replicas-")
    procs = []
    failures = []
    try:
        ports = [free_port() for _ in range(2 * N + 1)]
        lb_port, api_ports, metrics_ports = ports[0], ports[1 : N + 1], ports[N + 1 :]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
        replicas = []
        for i in range(N):
            cfg = os.path.join(tmp, f"r{i + 1}.toml")
            with open(cfg, "w") as f:
                f.write(replica_config(api_ports[i], metrics_ports[i]))
            log = open(os.path.join(tmp, f"r{i + 1}.log"), "w")
            p = subprocess.Popen([args.kiln, "serve", "--config", cfg], stdout=log, stderr=subprocess.STDOUT, env=env)
            procs.append(p)
            replicas.append(p)
        t_start = time.time()
        for i in range(N):
            if not wait_for("127.0.0.1", api_ports[i], "/ready", time.time() + 120):
                raise SystemExit(f"replica r{i + 1} did not become ready (log: {tmp}/r{i + 1}.log)")
        print(f"serve-replicas: {N} replicas ready in {time.time() - t_start:.1f} s")
        lb_env = dict(env, KILN_LB_BIND=f"127.0.0.1:{lb_port}")
        for i in range(N):
            lb_env[f"KILN_REPLICA_{i + 1}"] = f"127.0.0.1:{api_ports[i]}"
        cfg = os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg")
        lb_log = open(os.path.join(tmp, "haproxy.log"), "w")
        lb = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=lb_log, stderr=subprocess.STDOUT, env=lb_env)
        procs.append(lb)
        if not wait_for("127.0.0.1", lb_port, "/health", time.time() + 20):
            raise SystemExit(f"HAProxy did not answer (log: {tmp}/haproxy.log)")
        time.sleep(2.5)  # every server's first health checks (rise 2, inter 1 s)

        stop = threading.Event()
        kill_time = [0.0, None]  # (when, replica name): read by the clients
        clients = [Client(i, lb_port, stop, kill_time, 1000 + i) for i in range(args.clients)]
        t0 = time.time()
        for c in clients:
            c.start()
        time.sleep(args.before)
        # Sessions on every replica before the kill; kill the one with the most.
        held = {f"r{i + 1}": 0 for i in range(N)}
        for c in clients:
            if c.session:
                held[c.session[1]] = held.get(c.session[1], 0) + 1
        print(f"serve-replicas: sessions by replica before the kill: {held}")
        if min(held.values()) == 0:
            failures.append(f"not every replica holds a session: {held}")
        victim = max(held, key=held.get)
        t_kill = time.time()
        kill_time[1] = victim
        kill_time[0] = t_kill
        replicas[int(victim[1:]) - 1].send_signal(signal.SIGKILL)
        print(f"serve-replicas: killed {victim} (SIGKILL) at {t_kill - t0:.1f} s")
        time.sleep(args.after)
        stop.set()
        for c in clients:
            c.join(timeout=70)
        t_end = time.time()

        # Nothing acknowledged lost: every tensor of every session on a live replica reads back.
        checker = Client(-1, lb_port, stop, kill_time, 0)
        acked_live = lost = gone_checked = 0
        for c in clients:
            for (sid, replica), ledger in c.acked.items():
                if replica == victim:
                    # A session of the killed replica: told it is gone, never a 2xx.
                    checker.session = (sid, replica)
                    if ledger:
                        tid = next(iter(ledger))
                        got = checker.request("GET", f"/v1/sessions/{sid}/tensors/{tid}?format=raw")
                        if got is None or got[3] != "REPLICA_DOWN":
                            failures.append(f"session {sid} of {victim}: {got and got[:2]}")
                        gone_checked += 1
                    continue
                for tid, want in ledger.items():
                    acked_live += 1
                    got = checker.request("GET", f"/v1/sessions/{sid}/tensors/{tid}?format=raw")
                    if got is None or got[0] != 200 or got[1] != want or got[2] != replica:
                        lost += 1
        records = [r for c in clients for r in c.records]
        ok = sum(1 for r in records if 200 <= r[2] < 300)
        errors = len(records) - ok
        wrong = [w for c in clients for w in c.wrong]
        unexpected = [u for c in clients for u in c.unexpected] + checker.unexpected
        not_sticky = sum(c.not_sticky for c in clients)
        victims = [c for c in clients if any(r == victim for _, r, _ in c.sessions_opened)]
        told = [t for c in victims for t in c.told]
        reopened = [c for c in victims if any(r != victim and t > t_kill for _, r, t in c.sessions_opened)]
        before = [r[1] for r in records if t0 + 1.0 <= r[0] < t_kill and 200 <= r[2] < 300]
        after = [r[1] for r in records if t_kill + 5.0 <= r[0] < t_kill + 10.0 and 200 <= r[2] < 300]
        p_before, p_after = p99(before), p99(after)
        # The first 1 s window after the kill whose p99 is back within 2x.
        back = None
        for k in range(0, int(args.after)):
            w = [r[1] for r in records if t_kill + k <= r[0] < t_kill + k + 1 and 200 <= r[2] < 300]
            if w and p99(w) <= 2 * p_before:
                back = k + 1
                break
        print(
            f"serve-replicas: {len(clients)} clients, {t_end - t0:.1f} s, {len(records)} requests "
            f"({len(records) / (t_end - t0):.0f}/s), {ok} acknowledged, {errors} errors"
        )
        print(
            f"serve-replicas: {victim} killed: {len(victims)} of its clients told "
            f"{sorted(set(t[0] for t in told))} ({len(told)} answers), {len(reopened)} reopened on others"
        )
        print(
            f"serve-replicas: p99 before the kill {p_before * 1e3:.1f} ms, 5-10 s after {p_after * 1e3:.1f} ms; "
            f"p99 of 1 s windows within 2x from {back} s after the kill"
        )
        print(
            f"serve-replicas: {acked_live} acknowledged tensors on live replicas re-read: {lost} lost; "
            f"{gone_checked} sessions of {victim} answer REPLICA_DOWN; {len(wrong)} wrong; "
            f"{not_sticky} answers off their session's replica"
        )
        if wrong:
            failures.append(f"{len(wrong)} wrong answers, e.g. {wrong[:3]}")
        if lost:
            failures.append(f"{lost} acknowledged tensors lost on live replicas")
        if not_sticky:
            failures.append(f"{not_sticky} answers came from another replica than their session's")
        if unexpected:
            failures.append(f"{len(unexpected)} unexpected errors, e.g. {unexpected[:3]}")
        if not victims or not told or len(reopened) != len(victims):
            failures.append(f"the killed replica's {len(victims)} clients: {len(told)} told, {len(reopened)} reopened")
        if any(not m for _, m in told):
            failures.append("an error without a message")
        if acked_live == 0 or gone_checked == 0:
            failures.append("nothing was checked")
        if not (p_after <= 2 * p_before):
            failures.append(f"p99 after the kill {p_after * 1e3:.1f} ms > 2 x {p_before * 1e3:.1f} ms before")
        for i, p in enumerate(replicas):
            name = f"r{i + 1}"
            if name != victim and p.poll() is not None:
                failures.append(f"replica {name} exited ({p.returncode})")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    if failures:
        print(f"serve-replicas: FAILED (logs in {tmp}):\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("serve-replicas: ok")


if __name__ == "__main__":
    main()
