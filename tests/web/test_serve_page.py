"""The page of `placer serve` in a real browser (Debian's chromium and
chromium-driver, driven by Selenium, headless), against a server the test
starts on a free port of 127.0.0.1. Each check compares what the page shows
with what the command prints (placer layout / plan / check-published
--json), never with a number written here.

PLACER_BIN names the binary (default build/cli/placer); SCREENSHOTS, when
set, is the folder the screenshots go to (docs/serve/ for the docs).
"""
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLACER = os.environ.get("PLACER_BIN", os.path.join(ROOT, "build", "cli", "placer"))
SHOTS = os.environ.get("SCREENSHOTS")
WAIT = 120


def placer_json(*args):
    out = subprocess.run([PLACER, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def server():
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "placer-serve-test.log"), "w+")
    p = subprocess.Popen([PLACER, "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
    assert m, line
    assert "127.0.0.1 only" in line  # says where it listens
    yield {"url": f"http://127.0.0.1:{m.group(2)}", "port": int(m.group(2)), "log": log, "proc": p}
    p.terminate()
    p.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def browser(server):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1300",
              "--no-proxy-server"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.get(server["url"] + "/")
    WebDriverWait(d, WAIT).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    WebDriverWait(d, WAIT).until(lambda d: d.find_element(By.ID, "ex-step").get_attribute("data-step-us"))
    yield d
    d.quit()


def shot(d, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        d.save_screenshot(os.path.join(SHOTS, name))


def tab(d, name):
    d.find_element(By.CSS_SELECTOR, f'#tabs button[data-tab="{name}"]').click()


def explorer_done(d, before):
    """Wait until the explorer answered a request newer than `before`."""
    WebDriverWait(d, WAIT).until(
        lambda d: int(d.find_element(By.ID, "explorer").get_attribute("data-done") or 0) > before)


def explorer_seq(d):
    return int(d.find_element(By.ID, "explorer").get_attribute("data-done") or 0)


def post(server, path, body):
    req = urllib.request.Request(server["url"] + path, data=body if isinstance(body, bytes) else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_page_loads_with_no_console_errors(browser):
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    shot(browser, "explorer.png")


def test_moving_a_slider_shows_the_step_placer_layout_prints(browser):
    step = browser.find_element(By.ID, "ex-step")
    first = step.get_attribute("data-layout")
    seq = explorer_seq(browser)
    # the pp slider to the value 2, as a person drags it
    browser.execute_script("""
        const s = document.getElementById('ex-pp');
        s.value = placer.views.explorer.sliders.pp.dim.values.indexOf(2);
        s.dispatchEvent(new Event('input'));""")
    explorer_done(browser, seq)
    layout = step.get_attribute("data-layout")
    assert layout != first and ",pp=2," in layout
    q = browser.execute_script("return placer.views.explorer.request()")
    cli = placer_json("layout", "--model", q["model"], "--cluster", q["cluster"], "--layout", layout,
                      "--framework", q["framework"], "--json")
    assert float(step.get_attribute("data-step-us")) == cli["step_us"]
    assert step.text == "%.3f ms" % (cli["step_us"] / 1e3)


def test_an_oom_layout_shows_the_oom_verdict(browser):
    layout = "tp=1,sp=0,cp=1,pp=1,vp=1,dp=8,zero=0,mbs=8,gbs=64,recompute=none,precision=bf16"
    cli = placer_json("layout", "--model", "llama-3-70b", "--cluster", "dgx-h100", "--layout", layout, "--json")
    assert cli["memory"]["oom"] is True
    seq = explorer_seq(browser)
    browser.execute_script("placer.views.explorer.load(arguments[0])",
                           {"model": "llama-3-70b", "cluster": "dgx-h100", "layout": layout})
    explorer_done(browser, seq)
    assert browser.find_element(By.ID, "ex-verdict").text.startswith("OOM")
    assert browser.find_elements(By.CSS_SELECTOR, "#ex-memory .oom-line")
    shot(browser, "explorer-oom.png")


@pytest.mark.parametrize("order,p,m,v", [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2),
                                         ("1f1b", 8, 16, 1), ("interleaved", 8, 16, 4)])
def test_pipeline_view_draws_p_rows_with_the_closed_form_bubble(browser, order, p, m, v):
    tab(browser, "pipeline")
    browser.execute_script("""
        const [o, p, m, v] = arguments;
        document.getElementById('pl-order').value = o;
        document.getElementById('pl-p').value = p;
        document.getElementById('pl-m').value = m;
        document.getElementById('pl-v').value = v;
        document.getElementById('pipeline').dataset.done = '';
        document.getElementById('pl-draw').click();""", order, p, m, v)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "pipeline").get_attribute("data-done") == "static")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pl-svg g.rank")) == p
    b = browser.find_element(By.ID, "pl-bubble")
    sim, closed = float(b.get_attribute("data-sim")), float(b.get_attribute("data-closed"))
    assert closed == pytest.approx((p - 1) / (v * m))
    assert abs(sim - closed) <= 0.005 * closed


@pytest.mark.parametrize("order", ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev"])
def test_every_order_animates_and_ends_on_the_static_timeline(browser, order):
    tab(browser, "pipeline")
    browser.execute_script("document.getElementById('pl-order').value = arguments[0];"
                           "document.getElementById('pl-p').value = 4; document.getElementById('pl-m').value = 8;"
                           "document.getElementById('pl-v').value = 2;"
                           "document.getElementById('pipeline').dataset.done = '';"
                           "document.getElementById('pl-draw').click();", order)
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "pipeline").get_attribute("data-done") == "static")
    static = browser.find_element(By.ID, "pl-svg").get_attribute("outerHTML")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pl-svg g.rank")) == 4
    split = order.startswith("zb") or order == "dualpipev"  # these draw their W passes apart
    assert bool(browser.find_elements(By.CSS_SELECTOR, "#pl-svg rect.op-W")) == split
    browser.find_element(By.ID, "pl-animate").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "pipeline").get_attribute("data-done") == "animated")
    assert browser.find_element(By.ID, "pl-svg").get_attribute("outerHTML") == static
    shot(browser, f"pipeline-{order}.png")


def test_a_plan_runs_and_its_best_row_loads_into_the_explorer(browser):
    tab(browser, "planner")
    browser.execute_script("""
        document.getElementById('pn-model').value = 'llama-3-8b';
        document.getElementById('pn-cluster').value = 'dgx-h100';
        document.getElementById('pn-gpus').value = 16;
        document.getElementById('pn-gbs').value = 64;
        document.getElementById('pn-run').click();""")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "planner").get_attribute("data-done") == "done")
    cli = placer_json("plan", "--model", "llama-3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
                      "--precision", "bf16", "--top", "10", "--json")
    rows = browser.find_elements(By.CSS_SELECTOR, "#pn-table tr.clickable")
    assert len(rows) == len(cli["top"])
    shot(browser, "planner.png")
    best = browser.find_element(By.CSS_SELECTOR, '#pn-table tr.clickable[data-rank="1"]')
    seq = explorer_seq(browser)
    best.click()
    explorer_done(browser, seq)
    step = browser.find_element(By.ID, "ex-step")
    want = cli["top"][0]["layout"]
    got = dict(kv.split("=") for kv in step.get_attribute("data-layout").split(","))
    for k, key in (("tp", "tp"), ("cp", "cp"), ("pp", "pp"), ("vp", "vp"), ("dp", "dp"), ("mbs", "micro_batch"),
                   ("gbs", "global_batch")):
        assert int(got[k]) == want[key]
    assert got["recompute"] == want["recompute"] and got["zero"] == want["zero"]
    assert float(step.get_attribute("data-step-us")) / 1e3 == pytest.approx(cli["top"][0]["predicted"]["step_ms"],
                                                                            abs=1e-6)


def test_published_scatter_has_every_row_and_a_click_loads_its_step(browser):
    tab(browser, "published")
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "published").get_attribute("data-done") == "1")
    dense = placer_json("check-published", "--json")
    moe = placer_json("check-published", "--moe", "--json")
    fp8 = [r for r in dense["fp8"]["rows"] if "skipped" not in r]
    moes = [r for r in moe["rows"] if "skipped" not in r]
    count = lambda s: len(browser.find_elements(By.CSS_SELECTOR, f'svg.scatter[data-set="{s}"] circle.point'))
    assert count("dense") == len(dense["rows"])
    assert count("fp8") == len(fp8)
    assert count("moe") == len(moes)
    shot(browser, "published.png")
    checks = [("dense", dense["rows"][0]["label"], dense["rows"][0]["step_s"] * 1e6, 0.5),
              ("moe", moes[0]["run_id"], moes[0]["predicted_step_s"] * 1e6, 0.5)]
    for s, row, want_us, tol in checks:
        seq = explorer_seq(browser)
        tab(browser, "published")
        pt = [c for c in browser.find_elements(By.CSS_SELECTOR, f'circle.point[data-set="{s}"]')
              if c.get_attribute("data-row") == row][0]
        browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click'))", pt)
        explorer_done(browser, seq)
        step_us = float(browser.find_element(By.ID, "ex-step").get_attribute("data-step-us"))
        assert abs(step_us - want_us) <= tol
    # the run's model is selected and the keys with no control (dispatcher, overlap, mem) stay in the
    # loaded layout's text, with its ep: a slider moved next simulates the run with only that slider changed
    shown = browser.find_element(By.ID, "ex-layout-text").text.split(",")
    kept = [kv for kv in moes[0]["layout"].split(",") if kv.split("=")[0] in ("ep", "dispatcher", "overlap", "mem")]
    assert kept, "the first MoE row should carry a dispatcher or memory key"
    for kv in kept:
        assert kv in shown, f"{kv} dropped from the explorer's layout {shown}"
    # FP8: check-published prints tokens per GPU; the loaded run gives the same
    seq = explorer_seq(browser)
    browser.execute_script("placer.views.explorer.showCheck('fp8', arguments[0])", fp8[0]["run_id"])
    explorer_done(browser, seq)
    tokens = float(browser.find_element(By.ID, "ex-tokens").text.replace(",", ""))
    world = int(browser.find_element(By.ID, "ex-world").text)
    assert tokens / world == pytest.approx(fp8[0]["predicted_tokens_per_gpu"], rel=1e-3)


def test_bad_input_is_400_with_one_line_and_the_server_keeps_serving(server):
    for path, body in [("/api/layout", b"{not json"), ("/api/layout", {"model": "/etc/passwd", "cluster": "dgx-h100",
                                                                       "layout": "tp=1"}),
                       ("/api/layout", {"model": "llama-3-8b", "cluster": "dgx-h100", "layout": "tp=3,dp=1"}),
                       ("/api/plan", {"model": "llama-3-8b", "cluster": "../x"}),
                       ("/api/trace", {"model": "llama-3-8b", "cluster": "dgx-h100", "layout": "pp=2", "extra": 1})]:
        status, text = post(server, path, body)
        assert status == 400, text
        err = json.loads(text)["error"]
        assert err and "\n" not in err
    status, _ = post(server, "/api/layout", {"model": "llama-3-8b", "cluster": "dgx-h100",
                                             "layout": "tp=1,pp=1,dp=8,mbs=1,gbs=64"})
    assert status == 200


def test_a_client_that_disconnects_mid_plan_cancels_it(server):
    body = json.dumps({"model": "llama-3-405b", "cluster": "llama3-h100", "gpus": 2048, "global_batch": 2048}).encode()
    s = socket.create_connection(("127.0.0.1", server["port"]), timeout=120)
    s.sendall(b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n" % (server["port"], len(body))
              + body)
    got = b""
    while b'"progress"' not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    s.close()
    deadline = time.time() + 60
    while time.time() < deadline:
        server["log"].seek(0)
        if "a plan was cancelled" in server["log"].read():
            return
        time.sleep(0.2)
    pytest.fail("the plan went on after its client disconnected")


def test_plans_beyond_one_a_core_are_503_until_one_ends(server):
    """Each plan runs its own threads: the server runs at most one a core
    (the machine's online cores, as it counts them) and answers the next with
    HTTP 503 and one line; once a plan's client leaves, a new plan starts."""
    slots = os.sysconf("SC_NPROCESSORS_ONLN")
    body = json.dumps({"model": "llama-3-405b", "cluster": "llama3-h100", "gpus": 2048, "global_batch": 2048}).encode()

    def start():
        s = socket.create_connection(("127.0.0.1", server["port"]), timeout=120)
        s.sendall(b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n"
                  % (server["port"], len(body)) + body)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
        return s, got

    running = []
    try:
        for _ in range(slots):
            s, head = start()
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            running.append(s)
        s, head = start()
        s.close()
        assert head.startswith(b"HTTP/1.1 503"), head[:200]
        status, text = post(server, "/api/plan", json.loads(body))
        assert status == 503 and "\n" not in json.loads(text)["error"], text
    finally:
        for s in running:
            s.close()
    deadline = time.time() + 60  # the cancelled plans end, their slots free
    while time.time() < deadline:
        s, head = start()
        s.close()
        if head.startswith(b"HTTP/1.1 200"):
            return
        time.sleep(0.5)
    pytest.fail("no plan started after the running ones' clients left")


def test_db_view_draws_each_rl_run_and_each_confirmed_side(tmp_path):
    """placer serve --db on the shipped results database (data/results/,
    decompressed here): the placement tab appears, with one training curve
    per RL run and one bar per confirmed side, as /api/db lists them."""
    import lzma
    db = tmp_path / "results.db"
    with lzma.open(os.path.join(ROOT, "data", "results", "results-h200x2-experiments.db.xz")) as f:
        db.write_bytes(f.read())
    p = subprocess.Popen([PLACER, "serve", "--port", "0", "--db", str(db)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        port = re.search(r"127\.0\.0\.1:(\d+)/", p.stdout.readline()).group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/db", timeout=60) as r:
            data = json.loads(r.read())
        updates = lambda run: len({s[0] for s in data["samples"][str(run["id"])] if s[2] is not None and not s[3]})
        curves = sum(1 for run in data["runs"] if updates(run) > 1)
        sides = sum(1 for c in data["confirms"] for s in c["sides"] if s["mean_us"] is not None)
        assert curves > 0 and sides > 0
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1300",
                  "--no-proxy-server"):
            opts.add_argument(a)
        d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            d.get(f"http://127.0.0.1:{port}/")
            button = d.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="placement"]')
            WebDriverWait(d, WAIT).until(lambda d: button.is_displayed())
            button.click()
            assert len(d.find_elements(By.CSS_SELECTOR, "#placement path.rl-curve")) == curves
            assert len(d.find_elements(By.CSS_SELECTOR, "#placement rect.side")) == sides
            shot(d, "placement.png")
        finally:
            d.quit()
    finally:
        p.terminate()
        p.wait(timeout=30)
