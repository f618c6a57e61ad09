#!/usr/bin/env python3
"""Runs a page of the browser package in headless Chromium through chromedriver (WebDriver over
HTTP, no client library), and reports what the page left in `window.kilnResult`.

    web-test.py unit                   the package's tests (web/test/unit.js)
    web-test.py nogpu                  init in a page without WebGPU (web/test/nogpu.js)
    web-test.py models                 kiln.models against native (web/test/models.js; needs
                                       build/web/models-reference: make web-models-reference)
    web-test.py smollm2                SmolLM2 greedy against llama.cpp (web/test/smollm2.js; 110-145 s)
    web-test.py decode-bench           decode tokens/s, pipelined against serial (web/test/decode-bench.js;
                                       not in make web-test; DECODE_BENCH="tiny=64&smollm2=8&rounds=3")
    web-test.py conformance OUT.json   the conformance suite in the page; writes its results
    web-test.py demo PNG               the demo page (web/demo/); saves a screenshot
    web-test.py models-demo PNG        the models demo (web/demo/models.html); saves a screenshot
    web-test.py unit nogpu demo=PNG    several pages, one after another in one Chromium session
                                       (SUITE=OUT gives a page its output file): one browser start,
                                       and a page finds what an earlier one left in Cache Storage

Serves the repository root on 127.0.0.1 (a secure context, as WebGPU needs). Chromium runs with
--enable-unsafe-webgpu (Linux has WebGPU behind it; without it requestAdapter() gives null) and
--no-sandbox (the sandbox refuses to start as root); its adapter is SwiftShader, the CPU one.
Exits non-zero unless the page reports ok. WEBTEST_DEBUG_LOG=FILE keeps chromedriver's output in
FILE and Chromium's log (its GPU process's included: a crash shows there as "GPU process exited
unexpectedly") in FILE.chrome.
"""

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = {
    "unit": "web/test/index.html?suite=unit",
    "nogpu": "web/test/index.html?suite=nogpu",
    "models": "web/test/index.html?suite=models",
    "smollm2": "web/test/index.html?suite=smollm2",
    "decode-bench": "web/test/index.html?suite=decode-bench&" + os.environ.get("DECODE_BENCH", ""),
    "conformance": "web/test/index.html?suite=conformance",
    "demo": "web/demo/index.html",
    # The models demo with the tiny decoder of the page test in the chat box (SmolLM2 is too slow
    # on SwiftShader): MiniLM search and a streamed answer, screenshot kept. MiniLM by the URL
    # the models page stored in Cache Storage: after it, in one session, no second download.
    "models-demo": "web/demo/models.html?lm=../../build/web/models-reference/tiny-llama.gguf&tokens=12"
    "&embedder=../../build/web/models-reference/minilm",
}
TIMEOUT_S = {"unit": 300, "nogpu": 60, "models": 600, "smollm2": 600, "decode-bench": 1800, "conformance": 900, "demo": 300, "models-demo": 400}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".js": "text/javascript",
    }

    def log_message(self, *args):
        pass


def serve():
    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Quiet, directory=ROOT))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, port


def wd(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["value"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    sys.exit("web-test: no chromium on the PATH (apt-get install chromium chromium-driver)")


def parse_suites(argv):
    """[(suite, out)] from `SUITE [OUT]` (one page) or `SUITE[=OUT] SUITE[=OUT] ...`."""
    if len(argv) == 2 and argv[1] not in PAGES:
        return [(argv[0], argv[1])]
    suites = []
    for a in argv or ["unit"]:
        suite, _, out = a.partition("=")
        if suite not in PAGES:
            sys.exit(f"web-test: unknown suite {suite!r} (one of {', '.join(PAGES)})")
        suites.append((suite, out or None))
    return suites


def run_page(wd_port, s, http_port, suite, out):
    """Opens one page in the session `s`, waits for window.kilnResult; True if it reports ok."""
    t0 = time.time()
    wd(wd_port, "POST", f"{s}/url", {"url": f"http://127.0.0.1:{http_port}/{PAGES[suite]}"})
    result = None
    while time.time() - t0 < TIMEOUT_S[suite]:
        result = wd(wd_port, "POST", f"{s}/execute/sync", {"script": "return window.kilnResult ?? null;", "args": []})
        if result is not None:
            break
        time.sleep(0.5)
    took = time.time() - t0
    log = wd(
        wd_port,
        "POST",
        f"{s}/execute/sync",
        {"script": "return document.getElementById('log')?.textContent ?? '';", "args": []},
    )
    print(log.rstrip())
    if result is None:
        print(f"web-test {suite}: the page reported nothing within {TIMEOUT_S[suite]} s")
        return False
    if suite == "conformance" and out and "report" in result:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        json.dump(result["report"], open(out, "w"), indent=1)
        print(f"web-test conformance: results in {out}")
    if suite in ("demo", "models-demo") and out:
        png = wd(wd_port, "GET", f"{s}/screenshot")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        open(out, "wb").write(base64.b64decode(png))
        print(f"web-test {suite}: screenshot in {out}")
    adapter = result.get("adapter") or {}
    # Chromium hides the adapter's name; its type tells SwiftShader ("Cpu") from a GPU.
    described = adapter.get("name") or adapter.get("deviceType") or "-"
    print(f"web-test {suite}: {'ok' if result.get('ok') else 'FAILED'} in {took:.1f} s (adapter: {described})", flush=True)
    return bool(result.get("ok"))


def main():
    suites = parse_suites(sys.argv[1:])
    driver_bin = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or sys.exit("web-test: no chromedriver")
    httpd, http_port = serve()
    wd_port = free_port()
    dbg = os.environ.get("WEBTEST_DEBUG_LOG")
    sink = open(dbg, "w") if dbg else subprocess.DEVNULL
    driver = subprocess.Popen([driver_bin, f"--port={wd_port}"], stdout=sink, stderr=sink)
    session = None
    try:
        for _ in range(100):
            try:
                wd(wd_port, "GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        args = [
            "--headless=new",
            "--no-sandbox",
            "--enable-unsafe-webgpu",
            "--disable-gpu-sandbox",
            "--window-size=1200,900",
        ] + (["--enable-logging", f"--log-file={dbg}.chrome", "--v=0"] if dbg else [])
        caps = {
            "capabilities": {
                "alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": chromium(), "args": args}}
            }
        }
        session = wd(wd_port, "POST", "/session", caps)["sessionId"]
        s = f"/session/{session}"
        wd(wd_port, "POST", f"{s}/timeouts", {"script": 60000, "pageLoad": 120000})
        # Every page runs, a failed one included, so that one run reports them all.
        failed = [suite for suite, out in suites if not run_page(wd_port, s, http_port, suite, out)]
        if len(suites) > 1:
            print(f"web-test: {len(suites) - len(failed)} of {len(suites)} pages ok" + (f"; FAILED: {' '.join(failed)}" if failed else ""))
        return 1 if failed else 0
    finally:
        if session:
            try:
                wd(wd_port, "DELETE", f"/session/{session}")
            except OSError:
                pass
        driver.terminate()
        driver.wait()
        httpd.shutdown()


if __name__ == "__main__":
    sys.exit(main())
