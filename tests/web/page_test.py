#!/usr/bin/python3
"""Opens a page of examples/web/ in headless Chromium and checks it against the native program.

  page_test.py --site build/wasm/web --page attention_live --native build/release/bin/attention_live
               [--settings JSON]... [--screenshot FILE]
  page_test.py --site build/wasm/web --page train_live --train-toy build/release/bin/train_toy
               --losses 50 [--tolerance T]

The site is served from 127.0.0.1 by a server this script starts. For each --settings (and for the
chapter's, no settings), the page is opened with #settings=<JSON>; it computes its state with Ember
in WebAssembly and writes it as JSON into <pre id="state">, which Chromium's --dump-dom prints.
The same settings go to the native program (the same C++, built natively), whose JSON must be
the page's, number for number. Each --refuse settings must be refused by both: the native program
exits with 2 and prints "<page>: <message>", and the page writes no state and shows
"Ember: <message>", the same message (the same C++ refuses them). Each --bad-fragment (a raw
URL fragment, after "#", that the page's script itself cannot read: not #settings=, not JSON,
not an object) must leave the page with no state and its status saying what is wrong with it. With --long-fragment N, a
fragment of N characters (beyond the WebAssembly stack: it goes through the heap) must be refused
for its unknown key. With --train-toy, the page is opened with #settings={"run": N} (N = --losses): it trains N steps,
and its N losses must be those train_toy --print-losses prints (exactly, or within --tolerance
when one is given). The test fails too when the page reports a Content-Security-Policy
violation, when Chromium's net log shows a request the page made to anything but the loopback
server, or when the page's files (HTML, scripts, styles, .wasm) weigh more than 3 MB.
"""
import argparse
import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

SIZE_BUDGET = 3 * 1024 * 1024


def chromium_flags(profile, netlog):
    # No traffic beyond the loopback server: every host name but 127.0.0.1 resolves to nothing,
    # and a dead proxy on 127.0.0.1:9 stops what the resolver rules do not (IP literals); the
    # background services that would call Google are switched off where Chromium lets them be.
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions",
            # Chromium's own queries: the network time, and the autofill server (asked about a
            # page's form fields, on the page's behalf: the net log would count it as the page's)
            "--disable-features=NetworkTimeServiceQuerying,AutofillServerCommunication",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9", "--user-data-dir=" + profile,
            "--log-net-log=" + netlog, "--net-log-capture-mode=Default"]


def foreign_requests(netlog, port):
    """The URLs the page requested from anywhere but http://127.0.0.1:port/."""
    text = open(netlog).read().rstrip()
    if not text.endswith("}"):  # Chromium may leave the log's last event open
        text = text.rstrip(",") + "]}"
    log = json.loads(text)
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    allowed = re.compile(r"^(https?://127\.0\.0\.1:%d/|data:|blob:)" % port)
    foreign = []
    for event in log["events"]:
        params = event.get("params", {})
        if types[event["type"]] != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        # Requests made on the page's behalf carry its site in their isolation key or initiator;
        # Chromium's own background requests do not (and cannot resolve anyway).
        by_page = "127.0.0.1" in params.get("network_isolation_key", "") + params.get("initiator", "")
        if by_page and not allowed.match(params["url"]):
            foreign.append(params["url"])
    return foreign


def page_state(chromium, url, workdir, name):
    """The page's #state JSON, its CSP violation count and its foreign requests."""
    profile = os.path.join(workdir, name + "_profile")
    netlog = os.path.join(workdir, name + "_netlog.json")
    run = subprocess.run([chromium] + chromium_flags(profile, netlog) +
                         ["--virtual-time-budget=20000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    dom = run.stdout
    state = re.search(r'<pre id="state"[^>]*>(.*?)</pre>', dom, re.S)
    csp = re.search(r'<span id="csp-violations">([^<]*)</span>', dom)
    status = re.search(r'<p id="status"[^>]*>([^<]*)</p>', dom)
    return (json.loads(html.unescape(state.group(1))) if state and state.group(1) else None,
            csp.group(1) if csp else None, html.unescape(status.group(1)) if status else None,
            netlog, dom)


def shown_slips(dom):
    """What a page must never show a visitor: JavaScript's NaN, undefined, [object Object]."""
    text = re.sub(r'<pre id="state"[^>]*>.*?</pre>|<script.*?</script>|<[^>]*>', " ", dom, flags=re.S)
    return sorted({m for m in re.findall(r"\bNaN\b|\bundefined\b|\[object Object\]", text)})


def differences(page, native, path="state"):
    """Where two JSON values differ (exactly: floats compared as the doubles they parse to)."""
    if isinstance(native, dict) and isinstance(page, dict):
        out = [f"{path}: keys {sorted(set(page) ^ set(native))}"] if set(page) != set(native) else []
        for key in native:
            if key in page:
                out += differences(page[key], native[key], f"{path}.{key}")
        return out
    if isinstance(native, list) and isinstance(page, list) and len(native) == len(page):
        return [d for i, (p, n) in enumerate(zip(page, native)) for d in differences(p, n, f"{path}[{i}]")]
    return [] if page == native else [f"{path}: page {json.dumps(page)[:120]} native {json.dumps(native)[:120]}"]


def check_refusals(args, port, workdir):
    """Settings the native program and the page must refuse with the same message."""
    failures = []
    cases = [(settings, True) for settings in args.refuse] + [(f, False) for f in args.bad_fragment]
    for index, (text, through_native) in enumerate(cases):
        fragment = "settings=" + urllib.parse.quote(text) if through_native else text
        url = f"http://127.0.0.1:{port}/{args.page}.html#{fragment}"
        state, csp, status, netlog, dom = page_state(args.chromium, url, workdir, f"refuse{index}")
        print(f"-- refused {text[:60]!r}: page status {status!r}")
        if args.page == "train_live" and state is not None and state.get("step") == 0:
            state = None  # the training page writes its (empty) state with no model too
        if state is not None:
            failures.append(f"refused {text[:60]!r}: the page wrote a state")
        if csp != "0":
            failures.append(f"refused {text[:60]!r}: Content-Security-Policy violations: {csp}")
        if not through_native:
            if not (status or "").startswith("the URL's #"):
                failures.append(f"bad fragment {text[:60]!r}: the page's status is {status!r}")
            continue
        program = args.native or args.native_train
        run = subprocess.run([program, text] + (["0"] if args.page == "train_live" else []),
                             capture_output=True, text=True)
        prefix = f"{args.page}: "
        if run.returncode != 2 or not run.stderr.startswith(prefix) or run.stdout:
            failures.append(f"refused {text[:60]!r}: the native program exited {run.returncode}: {run.stderr[:200]!r}")
            continue
        expected = "Ember: " + run.stderr[len(prefix):].rstrip("\n")
        if status != expected:
            failures.append(f"refused {text[:60]!r}: the page says {status!r}, the native program {expected!r}")
    return failures


def train_toy_losses(train_toy, steps, workdir):
    """The first `steps` losses train_toy --print-losses prints (its default settings)."""
    run = subprocess.run([train_toy, "--print-losses", "--out", os.path.join(workdir, "train_toy_out")],
                         capture_output=True, text=True, check=True)
    losses = [float(m.group(2)) for m in re.finditer(r"^loss (\d+) (\S+)$", run.stdout, re.M)]
    return losses[:steps]


def check_training(args, port, workdir):
    """The page's first losses against train_toy's."""
    url = f"http://127.0.0.1:{port}/{args.page}.html#settings=" + urllib.parse.quote(json.dumps({"run": args.losses}))
    state, csp, status, netlog, dom = page_state(args.chromium, url, workdir, "training")
    failures = []
    print(f"-- {args.losses} training steps in the page: status {status!r}, CSP violations {csp}")
    if state is None:
        print(dom[-2000:])
        return [f"the page wrote no state (status {status!r})"]
    # (No speed here: under --virtual-time-budget the page's clock stands still while it computes.)
    print(f"   page: held-out after {state['step']} steps: {state['evaluation']}")
    page = state["losses"][:args.losses]
    native = train_toy_losses(args.train_toy, args.losses, workdir)
    if len(page) != args.losses or len(native) != args.losses:
        failures.append(f"{len(page)} losses from the page, {len(native)} from train_toy, {args.losses} wanted")
    else:
        worst = max(abs(p - n) for p, n in zip(page, native))
        same = sum(p == n for p, n in zip(page, native))
        print(f"   {same} of {args.losses} losses bit for bit train_toy's; largest difference {worst:.3g}"
              f" (first {page[0]!r}, {args.losses}th {page[-1]!r})")
        if worst > args.tolerance:
            failures.append(f"losses differ from train_toy's by up to {worst:.3g} (tolerance {args.tolerance})")
    if csp != "0":
        failures.append(f"Content-Security-Policy violations: {csp}")
    if shown_slips(dom):
        failures.append(f"the page shows {shown_slips(dom)}")
    foreign = foreign_requests(netlog, port)
    if foreign:
        failures.append(f"requests outside the loopback server: {foreign}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", required=True)
    parser.add_argument("--page", required=True)
    parser.add_argument("--native")
    parser.add_argument("--train-toy")
    parser.add_argument("--losses", type=int, default=50)
    parser.add_argument("--tolerance", type=float, default=0.0)
    parser.add_argument("--settings", action="append", default=[])
    parser.add_argument("--refuse", action="append", default=[])
    parser.add_argument("--bad-fragment", action="append", default=[])
    # A script (tests/web/drive_*.js) that clicks and types in the page, opened with the fragment
    # --drive-fragment, and writes {"failures": [...]} into <pre id="drive">.
    parser.add_argument("--drive")
    parser.add_argument("--drive-fragment", default="")
    parser.add_argument("--long-fragment", type=int)  # characters: a fragment this long
    parser.add_argument("--native-train")  # train_live's native program, for --refuse
    parser.add_argument("--files", nargs="+", default=[])
    parser.add_argument("--screenshot")
    # The test's own check: a page that loads URL (an <img>), with its CSP (--plant) or without
    # it (--plant-without-csp), must fail it: through the CSP count, or through the net log.
    parser.add_argument("--plant")
    parser.add_argument("--plant-without-csp")
    parser.add_argument("--chromium", default=shutil.which("chromium") and "/usr/lib/chromium/chromium")
    args = parser.parse_args()
    failures = []

    # The size budget: every file the page loads.
    files = [f"{args.page}.html", f"{args.page}_page.js", f"{args.page}.js", f"{args.page}.wasm"] + args.files
    sizes = {f: os.path.getsize(os.path.join(args.site, f)) for f in files}
    total = sum(sizes.values())
    print("sizes:", ", ".join(f"{f} {s} B" for f, s in sizes.items()), f"total {total} B")
    if total > SIZE_BUDGET:
        failures.append(f"the page's files weigh {total} B, more than {SIZE_BUDGET} B")

    # The site's index links the page (a page it does not list is one no visitor finds).
    index = os.path.join(args.site, "index.html")
    if f'href="{args.page}.html"' not in open(index).read():
        failures.append(f"index.html has no link to {args.page}.html")

    workdir = tempfile.mkdtemp(prefix="ember_page_test_")
    plant = args.plant or args.plant_without_csp
    if plant:  # a copy of the site whose page loads `plant`
        site = os.path.join(workdir, "site")
        shutil.copytree(args.site, site)
        page_file = os.path.join(site, args.page + ".html")
        text = open(page_file).read().replace("</body>", f'<img src="{plant}" alt="">\n</body>')
        if args.plant_without_csp:
            text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
        open(page_file, "w").write(text)
        print(f"planted in {args.page}.html: <img src=\"{plant}\">" + (", CSP removed" if args.plant_without_csp else ""))
        args.site = site

    if (args.long_fragment or args.drive) and not plant:  # a copy of the site, to add to
        site = os.path.join(workdir, "site")
        shutil.copytree(args.site, site)
        args.site = site
    if args.drive:  # a copy of the page with the driving script after its own (the page itself,
        # which the other checks open, stays as it is)
        shutil.copy(args.drive, os.path.join(args.site, "drive.js"))
        text = open(os.path.join(args.site, args.page + ".html")).read().replace(
            "</body>", '<pre id="drive"></pre><script src="drive.js"></script>\n</body>')
        open(os.path.join(args.site, args.page + "_driven.html"), "w").write(text)
    if args.long_fragment:  # a page that sends the page a long fragment
        open(os.path.join(args.site, "long_fragment.js"), "w").write(
            "'use strict';\n"
            f"const pad = 'a'.repeat({args.long_fragment});\n"
            f"location.replace('{args.page}.html#settings=' + encodeURIComponent(JSON.stringify({{ pad }})));\n")
        open(os.path.join(args.site, "long_fragment.html"), "w").write(
            '<!DOCTYPE html><meta charset="utf-8"><script src="long_fragment.js"></script>\n')

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=args.site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        if args.train_toy:
            failures += check_training(args, port, workdir)
        failures += check_refusals(args, port, workdir)
        if args.drive:
            url = f"http://127.0.0.1:{port}/{args.page}_driven.html#{args.drive_fragment}"
            state, csp, status, netlog, dom = page_state(args.chromium, url, workdir, "drive")
            found = re.search(r'<pre id="drive">(.*?)</pre>', dom, re.S)
            result = json.loads(html.unescape(found.group(1))) if found and found.group(1) else None
            print(f"-- driven by {os.path.basename(args.drive)}: {result}")
            if result is None:
                failures.append(f"{os.path.basename(args.drive)} wrote no result (status {status!r})")
            else:
                failures += [f"{os.path.basename(args.drive)}: {f}" for f in result["failures"]]
        if args.long_fragment:
            # Far more than the WebAssembly stack holds (ccall's 'string' copies its text there):
            # refused for its unknown key, by name, not a trap.
            url = f"http://127.0.0.1:{port}/long_fragment.html"
            state, csp, status, netlog, dom = page_state(args.chromium, url, workdir, "long")
            print(f"-- a fragment of {args.long_fragment} characters: page status {(status or '')[:100]!r}")
            if args.page == "train_live" and state is not None and state.get("step") == 0:
                state = None
            if state is not None or not (status or "").startswith('Ember: settings: unknown key "pad"'):
                failures.append(f"a fragment of {args.long_fragment} characters: status {(status or '')[:100]!r}")
        for index, settings in enumerate([] if args.train_toy or not args.native else [""] + args.settings):
            url = f"http://127.0.0.1:{port}/{args.page}.html"
            if settings:
                url += "#settings=" + urllib.parse.quote(settings)
            label = settings or "the chapter's settings"
            state, csp, status, netlog, dom = page_state(args.chromium, url, workdir, f"case{index}")
            native = json.loads(subprocess.run([args.native] + ([settings] if settings else []),
                                               capture_output=True, text=True, check=True).stdout)
            print(f"-- {label}: page status {status!r}, CSP violations {csp}")
            if state is None:
                failures.append(f"{label}: the page wrote no state (status {status!r})")
                print(dom[-2000:])
                continue
            diff = differences(state, native)
            for d in diff[:20]:
                print("   differs:", d)
            # null is how JSON writers give up on NaN and the infinities (the page would show 0):
            # Ember writes them "nan", "inf", "-inf" (the graph writes a gradient never sent null).
            numbers = json.dumps({k: v for k, v in state.items() if k != "graph"})
            if "null" in numbers:
                failures.append(f"{label}: the page's state holds null: {numbers[:200]}")
            if diff:
                failures.append(f"{label}: {len(diff)} values differ from the native program's")
            elif isinstance(native["loss"], str) and f"the loss is {native['loss']}" not in (status or ""):
                failures.append(f"{label}: the loss is {native['loss']}, which the page's status does not say: {status!r}")
            else:
                print(f"   the page's numbers are the native program's ({len(json.dumps(native))} B of JSON, loss {native['loss']})")
            if csp != "0":
                failures.append(f"{label}: Content-Security-Policy violations: {csp}")
            if shown_slips(dom):
                failures.append(f"{label}: the page shows {shown_slips(dom)}")
            foreign = foreign_requests(netlog, port)
            if foreign:
                failures.append(f"{label}: requests outside the loopback server: {foreign}")
        if args.screenshot:
            subprocess.run([args.chromium] + chromium_flags(os.path.join(workdir, "shot_profile"),
                                                            os.path.join(workdir, "shot_netlog.json")) +
                           ["--virtual-time-budget=20000", "--window-size=1200,900", "--hide-scrollbars",
                            "--screenshot=" + os.path.abspath(args.screenshot),
                            f"http://127.0.0.1:{port}/{args.page}.html"], capture_output=True, timeout=120)
    finally:
        server.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
