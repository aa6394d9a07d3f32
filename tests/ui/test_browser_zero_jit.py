"""The page's issue 27 views in headless Chromium: the Misses view (a read token sees the misses and no
button; a submit token queues a miss's build and the page says what it made), and a tuning result's
decision and its best over time by GPU model and compiler version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from .conftest import KERNELS, VADD_SIG, Stocked
from .test_browser import SETTLED, _fresh_logs, errors, open_page, rows, shot, state, use_token, wait  # noqa: F401


def _report_miss(stocked: Stocked) -> dict:
    source = (KERNELS / "vector_add.py").read_text()
    spec = {"signature": VADD_SIG, "constexprs": {"BLOCK_SIZE": 128}, "hints": {},
            "config": {"kwargs": {}, "num_warps": 4, "num_stages": 3}, "tuning": None}  # fmt: skip
    body = {"source": source, "name": "add_kernel", "kernel_key": stocked.kernels["add_kernel"], "what": "compile",
            "target": "cpu", "specialisation": spec}  # fmt: skip
    with stocked.http("read") as http:  # production reports with a read token
        r = http.post("/v1/misses", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_misses_are_listed_and_a_submit_token_queues_the_build(browser: Any, stocked: Stocked, screenshots: Path) -> None:
    miss = _report_miss(stocked)
    use_token(browser, stocked, "read")
    open_page(browser, stocked.url + "/ui/misses")
    listed = rows(browser, "misses")
    assert [r.get_attribute("data-miss") for r in listed] == [str(miss["id"])]
    assert "BLOCK_SIZE=128" in listed[0].text and not listed[0].find_elements(By.CSS_SELECTOR, "button.queue")
    assert "submit scope" in browser.find_element(By.ID, "queue-note").text
    use_token(browser, stocked, "submit")
    open_page(browser, stocked.url + "/ui/misses")
    button = rows(browser, "misses")[0].find_element(By.CSS_SELECTOR, "button.queue")
    assert button.text == "Queue build"
    shot(browser, screenshots, "misses.png")
    button.click()
    note = wait(browser, lambda d: d.find_element(By.ID, "queue-note").text.startswith("Built artifact") and
                d.find_element(By.ID, "queue-note").text, timeout=120)  # fmt: skip
    with stocked.http("read") as http:
        built = http.get("/v1/artifacts", params={"kernel": stocked.kernels["add_kernel"], "target": "cpu"}).json()
    assert any(note.endswith(f"{a['id'][:12]}.") for a in built)
    assert errors(browser) == []


def test_a_result_shows_its_decision_and_its_history(browser: Any, stocked: Stocked) -> None:
    use_token(browser, stocked, "read")
    open_page(browser, stocked.url + f"/ui/tuning/{stocked.tuned['tuning_key']}")
    decision = browser.find_element(By.ID, "decision")
    assert decision.get_attribute("data-rule") in ("measured", "tie") and decision.text
    dots = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#history svg[aria-label^="best time per tune"] circle'))
    assert len(dots) >= 1
    open_page(browser, stocked.url + "/ui/tuning")
    assert state(browser) == "ready" and rows(browser, "slower") == []
    assert errors(browser) == []
