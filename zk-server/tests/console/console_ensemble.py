#!/usr/bin/python3
"""Watches a 3-server ensemble's console (/console of one member) in headless Chromium.

Usage: console_ensemble.py BASE_URL SCREENSHOT_DIR

Talks with the test that runs it over stdin and stdout:
1. loads the console (no request may fail), waits until it lists the three voting members with
   one leader, and prints "leader <id>";
2. reads a line (the test kills that leader, then writes "killed");
3. waits until the console shows another member as leader and prints "new leader <id>".
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
    """The members table as (id, role) rows, read in one go (the page redraws it every 2 s)."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#members tbody tr'))"
        ".map(r => [r.cells[0].textContent, r.cells[2].textContent])"
    )


def leaders(d):
    return [sid for sid, role in members(d) if role == "leader"]


try:
    driver.get(BASE + "/console")
    WebDriverWait(driver, 30).until(lambda d: len(members(d)) == 3 and len(leaders(d)) == 1)
    role = driver.find_element(By.ID, "role").text
    if role not in ("leader", "follower"):
        raise AssertionError(f"the console shows role {role!r}")
    failed, _ = browser.failures(driver)
    if failed:
        raise AssertionError(f"requests of the page failed or the browser logged errors: {failed}")
    old = leaders(driver)[0]
    shot("6-ensemble")
    print(f"leader {old}", flush=True)
    if sys.stdin.readline().strip() != "killed":
        raise AssertionError("the test did not say the leader was killed")
    WebDriverWait(driver, 90).until(lambda d: len(leaders(d)) == 1 and leaders(d)[0] != old)
    shot("7-new-leader")
    print(f"new leader {leaders(driver)[0]}", flush=True)
except Exception as e:
    shot("ensemble-failure")
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
finally:
    driver.quit()
