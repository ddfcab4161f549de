#!/usr/bin/python3
"""Watches a 3-server ensemble's console (/console of one member) in headless Chromium.

Usage: console_ensemble.py BASE_URL SCREENSHOT_DIR

Talks with the test that runs it over stdin and stdout:
1. loads the console (no request may fail), waits until it lists the three voting members with
   one leader, every member's zxid the same and its lag 0, and the four charts drawn with a line
   a member; prints "leader <id>" and "zxids 1=<zxid>,2=<zxid>,3=<zxid>";
2. reads a line (the test kills that leader, waits for a new one and writes through it, then
   writes "killed");
3. waits until the console shows another member as leader, the killed one as unreachable (no
   zxid, no lag) and the two live ones with a zxid and a lag; prints "new leader <id>" and
   "unreachable <id>". No request of the page may have failed meanwhile.
Exits 1 with the reason on stderr when a step fails. Screenshots go to SCREENSHOT_DIR.
"""

import os
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import browser

BASE, SHOTS = sys.argv[1], sys.argv[2]
os.makedirs(SHOTS, exist_ok=True)

driver = browser.start()


def shot(name):
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))


def members(d):
    """The members table as dicts, read in one go (the page redraws it every 2 s)."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#members tbody tr')).map(r => ({"
        "sid: r.dataset.sid, role: r.cells[2].textContent, zxid: r.cells[3].textContent,"
        "lag: r.cells[4].textContent, connections: r.cells[5].textContent}))"
    )


def leaders(d):
    return [m["sid"] for m in members(d) if m["role"] == "leader"]


def settled(d):
    """Three members, one leader, every zxid shown and level, every lag 0."""
    ms = members(d)
    return (
        len(ms) == 3
        and len([m for m in ms if m["role"] == "leader"]) == 1
        and all(m["zxid"].startswith("0x") and m["lag"] == "0" for m in ms)
        and len({m["zxid"] for m in ms}) == 1
    )


def charted(d):
    """Each chart has a line for each of the three members (read in one go: the page redraws the
    charts every 2 s)."""
    sids = d.execute_script(
        "return ['latency', 'outstanding', 'connections', 'lag'].map(c => Array.from("
        "document.querySelectorAll('#chart-' + c + ' polyline')).map(p => p.dataset.sid))"
    )
    return all(len(set(s)) == 3 for s in sids)


def check_requests():
    failed, _ = browser.failures(driver)
    if failed:
        raise AssertionError(f"requests of the page failed or the browser logged errors: {failed}")


try:
    driver.get(BASE + "/console")
    WebDriverWait(driver, 60).until(lambda d: settled(d) and charted(d))
    role = driver.find_element(By.ID, "role").text
    if role not in ("leader", "follower"):
        raise AssertionError(f"the console shows role {role!r}")
    check_requests()
    old = leaders(driver)[0]
    shot("6-ensemble")
    print(f"leader {old}", flush=True)
    print("zxids " + ",".join(f"{m['sid']}={m['zxid']}" for m in members(driver)), flush=True)
    if sys.stdin.readline().strip() != "killed":
        raise AssertionError("the test did not say the leader was killed")

    def after_kill(d):
        ms = {m["sid"]: m for m in members(d)}
        live = [m for sid, m in ms.items() if sid != old]
        return (
            len(ms) == 3
            and ms[old]["role"] == "unreachable"
            and ms[old]["zxid"] == "—"
            and ms[old]["lag"] == "—"
            and len(leaders(d)) == 1
            and all(m["zxid"].startswith("0x") and m["lag"].isdigit() for m in live)
        )

    WebDriverWait(driver, 90).until(after_kill)
    note = driver.find_element(By.ID, "ensemble-note").text
    if f"server {old}:" not in note:
        raise AssertionError(f"the note does not say why server {old} is unreachable: {note!r}")
    check_requests()
    shot("7-new-leader")
    print(f"new leader {leaders(driver)[0]}", flush=True)
    print(f"unreachable {old}", flush=True)
except Exception as e:
    shot("ensemble-failure")
    print(f"{type(e).__name__}: {e}; members: {members(driver)}", file=sys.stderr)
    sys.exit(1)
finally:
    driver.quit()
