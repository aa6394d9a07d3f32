"""The web page in a real browser: headless Chromium (Debian's) driven by Selenium against a real `tilec serve`
with auth on and a stocked cache. A kernel listed and opened (source, artifacts, PTX, IR after each pass),
a tuning result's chart with one mark per trial, a cpu tune job followed live to done and another cancelled,
and what a visitor without a token, or with a read token, gets: nothing, and no cancel. Screenshots of the
three views are saved (TILEC_UI_SCREENSHOTS=docs/screenshots to keep them)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from .conftest import Stocked, job_body, tuned_source

SETTLED = ("ready", "refused", "failed")
SLOW_BLOCKS = (16, 32, 64, 128, 256)  # BLOCK <= 256: all compile
SLOW_N = 1 << 23  # elements: each trial takes a while on 2 cores, so the page sees the job part-way


def wait(driver: Any, condition: Any, timeout: float = 20) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def state(driver: Any) -> str | None:
    return driver.execute_script("return document.body && document.body.dataset.state")


def open_page(driver: Any, url: str, expect: str = "ready") -> None:
    driver.get(url)
    wait(driver, lambda d: state(d) in SETTLED)
    notice = driver.find_element(By.ID, "notice")
    assert state(driver) == expect, notice.text


def use_token(driver: Any, service: Stocked, scope: str) -> None:
    """Paste the token into the page's form, as a visitor would; the page reloads with it. The console and
    network logs of getting there are dropped (a visit before the token is a refused call)."""
    driver.get(service.url + "/ui/kernels")
    wait(driver, lambda d: state(d) in SETTLED)
    driver.find_element(By.ID, "token-input").send_keys(service.tokens[scope])
    body = driver.find_element(By.TAG_NAME, "body")
    driver.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()
    wait(driver, EC.staleness_of(body))
    wait(driver, lambda d: state(d) in SETTLED)
    assert state(driver) == "ready", driver.find_element(By.ID, "notice").text
    scopes = "read" if scope == "read" else "read, submit"
    assert driver.find_element(By.ID, "token-state").text.endswith(f": {scopes}")
    driver.get_log("browser")
    driver.get_log("performance")


def forget_token(driver: Any, service: Stocked) -> None:
    driver.get(service.url + "/ui/kernels")
    driver.execute_script("sessionStorage.clear()")


def errors(driver: Any, allow: tuple[str, ...] = ()) -> list[str]:
    """The console's errors since the last call (a script error, a refused load, a CSP violation)."""
    out = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return [m for m in out if not any(a in m for a in allow)]


def rows(driver: Any, table: str) -> list[Any]:
    return [
        r
        for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
        if not r.find_elements(By.CSS_SELECTOR, "td.empty")
    ]


def shot(driver: Any, folder: Path, name: str) -> Path:
    """A screenshot of the whole page (the window grown to the page's height for it)."""
    width = driver.get_window_size()["width"]
    height = driver.execute_script("return Math.max(document.documentElement.scrollHeight, 600)")
    driver.set_window_size(width, min(height + 40, 2400))
    path = folder / name
    assert driver.save_screenshot(str(path)), path
    driver.set_window_size(1280, 900)
    return path


@pytest.fixture(autouse=True)
def _fresh_logs(browser: Any) -> None:
    browser.get_log("browser")
    browser.get_log("performance")


def click(driver: Any, selector: str) -> bool:
    """Click the element `selector` finds, found and clicked in one call (a page that redraws each second may
    replace it between a find and a click); False when there is none yet."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); if (e) e.click(); return !!e;", selector
    )


def test_kernels_listed_and_one_opened_with_its_builds_ptx_and_passes(
    browser: Any, stocked: Stocked, screenshots: Path
) -> None:
    use_token(browser, stocked, "read")
    listed = {
        r.find_element(By.CSS_SELECTOR, "td a").text: r.get_attribute("data-key")
        for r in rows(browser, "kernels")
    }
    assert listed == stocked.kernels
    with stocked.http("read") as http:
        assert len(http.get("/v1/ui/kernels").json()["items"]) == 2
    shot(browser, screenshots, "kernels.png")

    browser.find_element(By.LINK_TEXT, "add_kernel").click()
    wait(browser, lambda d: state(d) in SETTLED)
    assert state(browser) == "ready" and "add_kernel" in browser.find_element(By.ID, "title").text
    source = (Path(__file__).parents[1] / "kernels" / "vector_add.py").read_text().rstrip("\n").split("\n")
    lines = [li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#source li")]
    assert lines == source  # one numbered item per line, as written
    builds = {r.find_element(By.CSS_SELECTOR, "td").text: r for r in rows(browser, "artifacts")}
    assert set(builds) == {"cpu", "cuda:sm_90"}
    registers = builds["cuda:sm_90"].find_elements(By.CSS_SELECTOR, "td")[3].text
    assert registers.isdigit() and int(registers) > 0  # ptxas's report, stored with the build

    builds["cuda:sm_90"].find_element(By.LINK_TEXT, "PTX, passes").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#code li"))
    assert (
        browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="ptx"]').get_attribute("aria-pressed")
        == "true"
    )
    ptx = "\n".join(
        li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#code li")
    )
    with stocked.http("read") as http:
        assert ptx == http.get(f"/v1/artifacts/{stocked.artifacts['cuda:sm_90']}/ptx").text.rstrip("\n")
    assert ".target sm_90" in ptx
    facts = browser.find_element(By.ID, "facts").text
    assert "Constexprs" in facts and "BLOCK_SIZE=1024" in facts, facts  # not only warps and stages

    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="passes"]').click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passes-nav button"), timeout=60)
    names = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#passes-nav button")]
    assert names[0] == "0. input" and names[-1].startswith(f"{len(names) - 1}. gpu-tir"), names
    assert any(n.split(". ", 1)[1].startswith("canonicalize") for n in names)
    shown = "\n".join(
        li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#code li")
    )
    assert "gpu.layout" in shown  # the last dump: after the cuda passes
    browser.find_element(By.CSS_SELECTOR, '#passes-nav button[data-index="0"]').click()
    first = "\n".join(
        li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#code li")
    )
    assert "kernel @add_kernel" in first and "gpu.layout" not in first
    assert errors(browser) == []


def code_shown(driver: Any) -> str:
    return "\n".join(
        li.get_attribute("textContent") for li in driver.find_elements(By.CSS_SELECTOR, "#code li")
    )


def strip(driver: Any) -> dict:
    """The artifact page's tab, pass strip and code as one state: which tab and which pass are highlighted,
    and the code shown."""
    found = driver.execute_script(
        """const nav = document.querySelector("#passes-nav");
        return {tab: [...document.querySelectorAll(".tabs button[aria-pressed=true]")].map((b) => b.dataset.form),
                pressed: [...nav.querySelectorAll("button[aria-pressed=true]")].map((b) => Number(b.dataset.index)),
                buttons: nav.querySelectorAll("button").length, hidden: nav.hidden, hash: location.hash};"""
    )
    return {**found, "code": code_shown(driver)}


# the page's fetch of the passes waits until the test releases it (the page calls the global fetch per call)
HOLD_PASSES = """
const fetchNow = window.fetch;
let release;
const gate = new Promise((resolve) => { release = resolve; });
window.heldPasses = 0;
window.releasePasses = () => release();
window.fetch = async (url, options) => {
  if (String(url).endsWith("/passes")) { window.heldPasses += 1; await gate; }
  return fetchNow(url, options);
};
"""


def busy(driver: Any) -> str | None:
    return driver.find_element(By.ID, "code").get_attribute("aria-busy")


def test_the_pass_strip_highlights_the_pass_whose_ir_is_shown(browser: Any, stocked: Stocked) -> None:
    """The highlighted pass is the one whose IR is shown: after a pick, a reload, another tab and back, a click
    that overtakes a load, and on another artifact's page (which starts at its last pass)."""
    use_token(browser, stocked, "read")
    cuda, cpu = stocked.artifacts["cuda:sm_90"], stocked.artifacts["cpu"]
    with stocked.http("read") as http:
        dumps = {a: [p["ir"].rstrip("\n") for p in http.get(f"/v1/ui/artifacts/{a}/passes").json()["passes"]]
                 for a in (cuda, cpu)}  # fmt: skip
        ptx = http.get(f"/v1/artifacts/{cuda}/ptx").text.rstrip("\n")
    page = stocked.url + f"/ui/artifacts/{cuda}"
    open_page(browser, page)
    wait(browser, lambda d: strip(d)["code"] == ptx)
    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="passes"]').click()
    wait(browser, lambda d: strip(d)["pressed"] == [len(dumps[cuda]) - 1])
    assert strip(browser)["code"] == dumps[cuda][-1]
    browser.find_element(By.CSS_SELECTOR, '#passes-nav button[data-index="1"]').click()
    now = strip(browser)
    assert (now["tab"], now["pressed"], now["code"], now["hash"]) == (
        ["passes"],
        [1],
        dumps[cuda][1],
        "#pass-1",
    )

    browser.refresh()  # the same pass, highlighted, over its own IR
    wait(browser, lambda d: state(d) in SETTLED and strip(d)["buttons"])
    now = strip(browser)
    assert (now["tab"], now["pressed"], now["code"]) == (["passes"], [1], dumps[cuda][1]), now

    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="ptx"]').click()
    wait(browser, lambda d: strip(d)["code"] == ptx)
    now = strip(browser)
    assert now["hidden"] and now["buttons"] == 0 and now["tab"] == ["ptx"] and now["hash"] == ""
    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="passes"]').click()
    wait(browser, lambda d: strip(d)["buttons"])
    now = strip(browser)
    assert (now["pressed"], now["code"]) == ([1], dumps[cuda][1])  # the pick is kept on this page

    # a click that overtakes a load: the passes are asked for, then the PTX, and the passes' answer is held
    # back until the PTX is shown; when it comes, it draws nothing (the PTX tab and the PTX stay)
    open_page(browser, page)
    wait(browser, lambda d: strip(d)["code"] == ptx and busy(d) == "false")
    browser.execute_script(HOLD_PASSES)
    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="passes"]').click()
    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="ptx"]').click()
    wait(browser, lambda d: strip(d)["code"] == ptx and d.execute_script("return window.heldPasses === 1"))
    assert busy(browser) == "true"  # the passes are still out
    browser.execute_script("window.releasePasses()")
    wait(browser, lambda d: busy(d) == "false")
    now = strip(browser)
    assert (now["tab"], now["buttons"], now["code"], now["hidden"]) == (["ptx"], 0, ptx, True), now

    # another artifact: its own strip, at its last pass
    open_page(browser, stocked.url + f"/ui/artifacts/{cpu}")
    browser.find_element(By.CSS_SELECTOR, '.tabs [data-form="passes"]').click()
    wait(browser, lambda d: strip(d)["buttons"])
    now = strip(browser)
    assert (now["pressed"], now["code"]) == ([len(dumps[cpu]) - 1], dumps[cpu][-1]), now
    assert errors(browser) == []


def test_the_kernel_page_shows_the_tile_ir_of_a_build(
    browser: Any, stocked: Stocked, screenshots: Path
) -> None:
    """A source kernel's tile IR is that of one of its specialisations: a build's, named beside it. A build
    whose compile kept its per-pass dumps gives it to any token; one without them (a tune trial's) has it
    built for a submit token, and a read token is told why it sees none."""
    use_token(browser, stocked, "read")
    add_key, tuned_key = stocked.kernels["add_kernel"], stocked.kernels["vadd_tuned"]
    with stocked.http("read") as http:
        add = http.get(f"/v1/ui/kernels/{add_key}").json()
        tuned = http.get(f"/v1/ui/kernels/{tuned_key}").json()
    assert add["ir"] and add["ir_from"]["constexprs"] == {"BLOCK_SIZE": 1024}
    open_page(browser, stocked.url + f"/ui/kernels/{add_key}")
    lines = [li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#ir li")]
    assert "\n".join(lines) == add["ir"].rstrip("\n") and any("kernel @add_kernel" in x for x in lines)
    note = browser.find_element(By.ID, "ir-note")
    assert note.is_displayed() and "BLOCK_SIZE=1024" in note.text and add["ir_from"]["target"] in note.text
    built = note.find_element(By.TAG_NAME, "a").get_attribute("href")
    assert built.endswith(f"/ui/artifacts/{add['ir_from']['artifact_id']}")

    assert tuned["ir"] is None and tuned["ir_from"]  # tune trials' builds keep no dumps
    open_page(browser, stocked.url + f"/ui/kernels/{tuned_key}")
    assert not browser.find_element(By.ID, "ir").is_displayed()
    assert "submit scope" in browser.find_element(By.ID, "ir-note").text
    assert all("403" in m for m in errors(browser)), "only the refused build"

    use_token(browser, stocked, "submit")
    open_page(browser, stocked.url + f"/ui/kernels/{tuned_key}")
    with stocked.http("read") as http:  # built once, now kept with that build
        first = http.get(f"/v1/ui/artifacts/{tuned['ir_from']['artifact_id']}/passes").json()["passes"][0]
    lines = [li.get_attribute("textContent") for li in browser.find_elements(By.CSS_SELECTOR, "#ir li")]
    assert first["name"] == "input" and "\n".join(lines) == first["ir"].rstrip("\n")
    assert "kernel @vadd_tuned" in first["ir"] and "BLOCK=" in browser.find_element(By.ID, "ir-note").text
    shot(browser, screenshots, "kernel.png")
    assert errors(browser) == []


def test_a_queued_job_no_worker_serves_says_so_on_the_list_and_its_page(
    browser: Any, stocked: Stocked, screenshots: Path
) -> None:
    """A job of a target that no worker serves here waits queued: the list and the job's page say so, and
    when a worker of that target was last seen (the heartbeat on an earlier job of it). Its row is written
    into the database: this service (in-process, no GPU of that kind) refuses such a submit itself, as a
    cluster's API does not (a worker may be starting)."""
    from sqlalchemy.orm import Session

    from tilec.server.db.engine import make_engine
    from tilec.server.db.models import TuneJob
    from tilec.server.jobs.executor import local_targets
    from tilec.server.jobs.store import now

    target = next(t for t in ("cuda:sm_80", "cuda:sm_90", "cuda:sm_100") if t not in local_targets())
    seen = datetime(2026, 11, 20, 7, 15, tzinfo=UTC)
    engine = make_engine(stocked.database_url)
    try:
        with Session(engine) as session, session.begin():
            common = {"kernel_key": stocked.kernels["add_kernel"], "dtypes": "x_ptr:*fp32", "target": target,
                      "strategy": "halving", "request": {}, "trials": [], "trials_planned": 4, "created_at": now()}  # fmt: skip
            session.add(TuneJob(tuning_key="e" * 64, key_values='{"n":1}', state="done", trials_done=4,
                                worker="tilec-gpu-1@gpu-host", heartbeat_at=seen, **common))  # fmt: skip
            waiting = TuneJob(
                tuning_key="f" * 64, key_values='{"n":2}', state="queued", trials_done=0, **common
            )
            session.add(waiting)
            session.flush()
            job_id = waiting.id
    finally:
        engine.dispose()

    use_token(browser, stocked, "read")
    open_page(browser, stocked.url + "/ui/jobs")
    # read in one call each: the list is redrawn every second, so an element found in one call may be gone by the next
    cell = wait(browser, lambda d: d.execute_script(
        """const c = document.querySelector(`#jobs tr[data-job="${arguments[0]}"] .no-worker`);
        return c && {text: c.innerText, title: c.title};""", job_id))  # fmt: skip
    assert f"No worker serves {target}" in cell["text"] and "2026-11-20 07:15:00Z" in cell["text"], cell
    assert f"tilec worker --target {target}" in cell["title"]
    done_rows = browser.find_elements(By.CSS_SELECTOR, '#jobs tr[data-state="done"] .no-worker')
    assert not done_rows  # said of a queued job only

    assert click(browser, f'#jobs tr[data-job="{job_id}"] a[href$="/ui/jobs/{job_id}"]')
    wait(browser, lambda d: d.current_url.endswith(f"/ui/jobs/{job_id}") and state(d) in SETTLED)
    assert state(browser) == "ready", browser.find_element(By.ID, "notice").text
    banner = wait(browser, lambda d: d.find_element(By.ID, "no-worker"))
    assert banner.is_displayed() and f"No worker serves {target}" in banner.text, banner.text
    assert "2026-11-20 07:15:00Z" in banner.text and f"tilec worker --target {target}" in banner.text
    assert job_state(browser) == "queued"
    assert "None yet" in browser.find_element(By.CSS_SELECTOR, "#trials tbody").text
    assert not browser.find_elements(By.CSS_SELECTOR, "button.cancel")  # a read token
    assert "submit scope" in browser.find_element(By.ID, "cancel-note").text
    shot(browser, screenshots, "job.png")

    # a job a worker runs says nothing of the kind; its page lists every config's outcome
    open_page(browser, stocked.url + f"/ui/jobs/{stocked.tuned['id']}")
    assert not browser.find_element(By.ID, "no-worker").is_displayed()
    outcomes = [r.get_attribute("data-status") for r in rows(browser, "trials")]
    assert outcomes == [t["status"] for t in stocked.tuned["trials"]] and "failed" in outcomes
    assert errors(browser) == []


def test_a_tuning_result_charts_every_trial_and_lists_the_failed_config(
    browser: Any, stocked: Stocked, screenshots: Path
) -> None:
    use_token(browser, stocked, "read")
    tkey = stocked.tuned["tuning_key"]
    open_page(browser, stocked.url + "/ui/tuning")
    listed = rows(browser, "results")
    assert [r.get_attribute("data-key") for r in listed] == [tkey]
    # the table fits the 1280 px window: every column readable without scrolling sideways; the dtypes
    # are abbreviated to their types, the whole text on hover
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth,"
        " document.querySelector('#results').getBoundingClientRect().right]"
    )
    assert widths[0] <= widths[1] and widths[2] <= widths[1], widths
    dtypes = listed[0].find_element(By.CSS_SELECTOR, "span.dtypes")
    assert dtypes.get_attribute("title") == stocked.tuned["dtypes"] and "x_ptr" not in dtypes.text
    shot(browser, screenshots, "tuning.png")
    listed[0].find_elements(By.CSS_SELECTOR, "td a")[1].click()
    wait(browser, lambda d: state(d) in SETTLED)
    assert state(browser) == "ready"
    dots = wait(
        browser,
        lambda d: d.find_elements(
            By.CSS_SELECTOR, '#chart svg[aria-label^="time per config"] g[aria-label="dot"] circle'
        ),
    )
    with stocked.http("read") as http:
        trials = http.get(f"/v1/tuning-results/{tkey}/trials").json()
        best = http.get(f"/v1/ui/tuning-results/{tkey}").json()
    assert len(trials) >= 2
    assert len(dots) == len(trials) == len(rows(browser, "trials"))  # one mark per trial
    intervals = browser.find_elements(
        By.CSS_SELECTOR, '#chart svg[aria-label^="time per config"] g[aria-label="rule"] line'
    )
    assert len(intervals) == len(trials)
    marked = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr.best")
    assert len(marked) == 1 and f"BLOCK={best['best_config']['kwargs']['BLOCK']} " in marked[0].text + " "
    assert "★ best" in browser.find_element(
        By.CSS_SELECTOR, '#chart svg[aria-label^="time per config"]'
    ).get_attribute("textContent")
    # the winner's dot is the one in the "best" colour, at the best time
    fills = [d.get_attribute("fill") for d in dots]
    assert fills.count("#c2410c") == 1
    # beside the chart: the configs the job did not time in full, with why (from the job's own record)
    untimed = {r.find_element(By.TAG_NAME, "td").text.split()[0]: r.text for r in rows(browser, "untimed")}
    expected = {
        f"BLOCK={t['config']['kwargs']['BLOCK']}": t for t in stocked.tuned["trials"] if t["status"] != "ok"
    }
    assert set(untimed) == set(expected) and "BLOCK=512" in untimed
    assert "failed" in untimed["BLOCK=512"] and "static assertion failed" in untimed["BLOCK=512"]
    for label, trial in expected.items():
        assert trial["status"] in untimed[label] and trial["reason"].split("\n")[0] in untimed[label]
    # the failed config's located error keeps its lines: the source line, and the caret under its column
    failed = expected["BLOCK=512"]["reason"]
    assert "\n" in failed and "^" in failed
    shown = browser.execute_script(
        "const r = [...document.querySelectorAll('#untimed tbody tr')].find(t => t.textContent.includes('BLOCK=512'));"
        " const p = r && r.querySelector('pre.reason'); return p && p.textContent;"
    )
    assert shown == failed, (shown, failed)
    shot(browser, screenshots, "tuning-result.png")
    assert errors(browser) == []


def job_row(driver: Any, job_id: int) -> dict | None:
    return driver.execute_script(
        """const r = document.querySelector(`#jobs tr[data-job="${arguments[0]}"]`);
        if (!r) return null;
        const p = r.querySelector("progress");
        const result = r.querySelector("a.result");
        return {state: r.dataset.state, value: p.value, max: p.max, worker: r.cells[6].textContent,
                cancel: !!r.querySelector("button.cancel"), key: r.querySelector("code.key").textContent,
                result: result && result.getAttribute("href")};""",
        job_id,
    )


# slow on purpose, whatever the machine's load: 256 multiply-adds per element make one launch of SLOW_N
# elements ~0.25 s here (64 rounds measured 67-100 ms on the 2-core dev machine), so a trial's five or
# more launches take over a second and the page, polling every second, sees the job part-way. A timing
# stops early on a quiet machine, never below its launches.
SLOW_ROUNDS = 256
SLOW_LOOP = """
import triton
import triton.language as tl


@triton.autotune(configs=[{configs}], key=["n"])
@triton.jit
def {name}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.load(y_ptr + offs, mask=mask)
    for i in range(ROUNDS):
        acc = acc * 0.5 + x
    tl.store(out_ptr + offs, acc, mask=mask)
"""


def slow_source(name: str, blocks: tuple[int, ...]) -> str:
    configs = ", ".join(f'triton.Config({{"BLOCK": {b}}})' for b in blocks)
    return SLOW_LOOP.format(name=name, configs=configs).replace("ROUNDS", str(SLOW_ROUNDS))


def test_a_tune_job_advances_live_to_done_and_another_is_cancelled(
    browser: Any, stocked: Stocked, screenshots: Path
) -> None:
    with stocked.http("submit") as http:
        slow = http.post(
            "/v1/tune-jobs",
            json=job_body(slow_source("vadd_slow", SLOW_BLOCKS), SLOW_N, strategy="exhaustive"),
        ).json()
        other = http.post(
            "/v1/tune-jobs",
            json=job_body(tuned_source("vadd_other", SLOW_BLOCKS), SLOW_N, strategy="exhaustive"),
        ).json()
    assert slow["state"] == other["state"] == "queued"
    use_token(browser, stocked, "submit")
    open_page(browser, stocked.url + "/ui/jobs")

    # the in-process executor runs one job at a time: the other waits, and is cancelled from the page
    wait(browser, lambda d: click(d, f'button.cancel[data-job="{other["id"]}"]'))
    wait(browser, lambda d: (job_row(d, other["id"]) or {}).get("state") == "cancelled")
    assert job_row(browser, other["id"])["cancel"] is False
    assert stocked.wait_job(other["id"])["state"] == "cancelled"

    seen, shot_taken = [], False
    deadline = time.monotonic() + 300  # generous: five slow trials on a loaded machine
    while time.monotonic() < deadline:
        row = job_row(browser, slow["id"])
        if row is not None:
            seen.append((row["state"], row["value"], row["max"]))
            if row["state"] == "running" and 0 < row["value"] < row["max"] and not shot_taken:
                shot(browser, screenshots, "jobs.png")
                shot_taken = True
            if row["state"] == "done":
                break
        time.sleep(0.1)
    job = stocked.wait_job(slow["id"])
    assert job["state"] == "done", job
    states = [s for s, _, _ in seen]
    assert states[-1] == "done" and "running" in states, seen
    values = [v for _, v, _ in seen]
    assert values == sorted(values), seen  # the bar only moves forward
    assert any(s == "running" and 0 < v < m for s, v, m in seen), seen  # seen part-way, updated live
    assert seen[-1][1:] == (job["trials_planned"], job["trials_planned"]) == (len(SLOW_BLOCKS),) * 2
    final = job_row(browser, slow["id"])
    assert final["worker"] == job["worker"]
    # the key values tell this kernel's jobs apart; a done job links to its tuning result
    assert final["key"] == job["key"] == f'{{"n":{SLOW_N}}}'
    assert final["result"] == f"/ui/tuning/{job['tuning_key']}"
    assert job_row(browser, other["id"])["result"] is None  # cancelled: no result to link to
    if not shot_taken:
        shot(browser, screenshots, "jobs.png")
    assert errors(browser) == []


def job_state(driver: Any) -> str | None:
    """The job page's state, read in one call (the page redraws its facts each second: an element found in
    one call may be gone by the next)."""
    return driver.execute_script("const e = document.getElementById('job-state'); return e && e.textContent")


def test_a_job_page_follows_its_job_and_cancels_it(browser: Any, stocked: Stocked) -> None:
    """A job's own page updates while the job runs (its state and progress, polled each second) and cancels it
    with a submit token."""
    with stocked.http("submit") as http:
        job = http.post(
            "/v1/tune-jobs",
            json=job_body(slow_source("vadd_page", SLOW_BLOCKS), SLOW_N, strategy="exhaustive"),
        ).json()
    try:
        use_token(browser, stocked, "submit")
        open_page(browser, stocked.url + f"/ui/jobs/{job['id']}")
        assert f"Tune job #{job['id']}: vadd_page on cpu" in browser.find_element(By.ID, "title").text
        assert not browser.find_element(By.ID, "no-worker").is_displayed()  # cpu: served here
        # followed live: the page shows "running" without a reload (the job starts once the one before ends)
        wait(browser, lambda d: job_state(d) == "running", timeout=300)
        browser.find_element(By.CSS_SELECTOR, "#job-actions button.cancel").click()
        wait(browser, lambda d: job_state(d) == "cancelled", timeout=120)
        assert not browser.find_elements(By.CSS_SELECTOR, "#job-actions button.cancel")
        assert stocked.wait_job(job["id"], timeout=120)["state"] == "cancelled"
        assert errors(browser) == []
    finally:
        with stocked.http("submit") as http:
            http.post(f"/v1/tune-jobs/{job['id']}/cancel")


def test_without_a_valid_token_the_page_shows_nothing(browser: Any, stocked: Stocked) -> None:
    forget_token(browser, stocked)
    tkey, add_key = stocked.tuned["tuning_key"], stocked.kernels["add_kernel"]
    job = stocked.tuned["id"]
    pages = ["/ui/kernels", f"/ui/kernels/{add_key}", f"/ui/artifacts/{stocked.artifacts['cpu']}", "/ui/tuning",
             f"/ui/tuning/{tkey}", "/ui/jobs", f"/ui/jobs/{job}"]  # fmt: skip
    for bogus in (None, "tlc_not_a_token"):
        if bogus:
            browser.execute_script("sessionStorage.setItem('tilec.token', arguments[0])", bogus)
        for page in pages:
            open_page(browser, stocked.url + page, expect="refused")
            notice = browser.find_element(By.ID, "notice")
            assert (
                notice.is_displayed()
                and ("needs a token" if bogus is None else "refused this token") in notice.text
            )
            assert all(
                not r.find_elements(By.TAG_NAME, "td")
                for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")
            )
            html = browser.page_source
            for secret in (
                "vadd_tuned",
                "add_kernel",
                stocked.kernels["vadd_tuned"],
                tkey,
                add_key,
                "BLOCK=",
            ):
                assert secret in page or secret not in html, (page, secret)  # the URL's own key is echoed
            assert not browser.find_elements(By.CSS_SELECTOR, "#chart svg, #code li, #source li")
    assert all("401" in m for m in errors(browser)), "only the refused calls"
    # the shells are the same for everybody and carry no data; the JSON behind them needs a token
    with stocked.http(None) as anonymous:
        for page in pages:
            r = anonymous.get(page)
            assert r.status_code == 200 and "vadd_tuned" not in r.text and "add_kernel" not in r.text
            assert add_key in page or add_key not in r.text
        for call in ("/v1/ui/kernels", f"/v1/ui/kernels/{add_key}", "/v1/ui/tuning-results", f"/v1/ui/tuning-results/{tkey}",
                     "/v1/ui/tune-jobs", f"/v1/ui/tune-jobs/{job}", "/v1/ui/facets",
                     f"/v1/ui/artifacts/{stocked.artifacts['cpu']}/passes"):  # fmt: skip
            assert anonymous.get(call).status_code == 401, call


def test_a_read_token_sees_the_jobs_but_cannot_cancel(browser: Any, stocked: Stocked) -> None:
    with stocked.http("submit") as http:
        job = http.post(
            "/v1/tune-jobs",
            json=job_body(tuned_source("vadd_read", SLOW_BLOCKS), SLOW_N, strategy="exhaustive"),
        ).json()
    try:
        use_token(browser, stocked, "read")
        open_page(browser, stocked.url + "/ui/jobs")
        row = wait(browser, lambda d: job_row(d, job["id"]))
        assert row["state"] in ("queued", "running") and row["cancel"] is False
        assert not browser.find_elements(By.CSS_SELECTOR, "button.cancel")
        assert "submit scope" in browser.find_element(By.ID, "cancel-note").text
        # the page's own token, sent as the page sends it: the service refuses the cancel
        status = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
            fetch(`/v1/tune-jobs/${arguments[0]}/cancel`, {method: "POST",
                  headers: {Authorization: "Bearer " + sessionStorage.getItem("tilec.token")}})
              .then((r) => done(r.status), () => done(0));""",
            job["id"],
        )
        assert status == 403
        with stocked.http("read") as http:
            assert http.get(f"/v1/tune-jobs/{job['id']}").json()["state"] in ("queued", "running")
    finally:
        with stocked.http("submit") as http:
            http.post(f"/v1/tune-jobs/{job['id']}/cancel")
        stocked.wait_job(job["id"])


def test_the_token_travels_only_in_the_authorization_header(browser: Any, stocked: Stocked) -> None:
    use_token(browser, stocked, "read")
    token = stocked.tokens["read"]
    open_page(browser, stocked.url + f"/ui/tuning/{stocked.tuned['tuning_key']}")
    assert browser.execute_script("return document.cookie") == ""
    assert token not in browser.current_url and token not in browser.page_source
    assert (
        browser.find_element(By.ID, "token-input").get_dom_attribute("name") is None
    )  # a form submit sends nothing
    sent = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            request = message["params"]["request"]
            sent.append((request["url"], request.get("headers", {})))
    assert sent and all(token not in url for url, _ in sent)
    api = [(url, h) for url, h in sent if "/v1/" in url]
    assert api and all(h.get("Authorization") == f"Bearer {token}" for _, h in api)
    assert all(
        "Authorization" not in h for url, h in sent if "/v1/" not in url
    )  # shells and static files: none


# what sticks out of the window, outside the boxes that scroll on their own
WIDE = """return [...document.querySelectorAll("body *")]
  .filter((e) => !(e.parentElement && e.parentElement.closest(".scroll, .chart")))
  .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
  .map((e) => `${e.tagName}#${e.id}.${e.className}: ${Math.round(e.getBoundingClientRect().right)}`)"""


def test_keyboard_only_and_a_narrow_window(browser: Any, stocked: Stocked) -> None:
    use_token(browser, stocked, "read")
    browser.set_window_size(390, 844)
    try:
        for page in (
            "/ui/kernels",
            f"/ui/kernels/{stocked.kernels['add_kernel']}",
            f"/ui/tuning/{stocked.tuned['tuning_key']}",
            "/ui/jobs",
            f"/ui/jobs/{stocked.tuned['id']}",
        ):
            open_page(browser, stocked.url + page)
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            wide = browser.execute_script(WIDE)
            assert overflow <= 1, (
                page,
                overflow,
                wide,
            )  # wide tables scroll in their own box, the page does not
        assert not browser.find_elements(
            By.CSS_SELECTOR, "[onclick], div[role=button], span[role=button], div[tabindex], span[tabindex]"
        )
        open_page(browser, stocked.url + "/ui/kernels")
        browser.find_element(By.TAG_NAME, "body").click()
        for _ in range(40):  # Tab through the page to the first kernel's link, then Enter
            browser.switch_to.active_element.send_keys(Keys.TAB)
            focused = browser.switch_to.active_element
            if "/ui/kernels/" in (focused.get_attribute("href") or ""):
                break
        else:
            raise AssertionError("no kernel link reached with Tab")
        target = focused.get_attribute("href")
        focused.send_keys(Keys.ENTER)
        wait(browser, lambda d: d.current_url == target and state(d) in SETTLED)
        assert state(browser) == "ready"
    finally:
        browser.set_window_size(1280, 900)
