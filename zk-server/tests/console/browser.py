"""What the console's browser scripts share: Debian's headless Chromium under Selenium, and the
check that no request of the page failed."""

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def start():
    """A headless Chromium (Debian's /usr/bin/chromium and chromedriver) that keeps the page's
    console messages."""
    opts = webdriver.ChromeOptions()
    opts.add_argument("--headless=new")
    opts.add_argument("--no-sandbox")
    opts.add_argument("--disable-dev-shm-usage")
    opts.add_argument("--window-size=1400,1000")
    opts.binary_location = "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def failures(driver):
    """The page's requests that failed (status 0 or 400 and above, the page's own included) and
    the errors the browser logged, or an empty list; with every request seen, for messages."""
    statuses = driver.execute_script(
        "return performance.getEntriesByType('resource').concat(performance.getEntriesByType('navigation'))"
        ".map(e => [e.name, e.responseStatus])"
    )
    failed = [s for s in statuses if s[1] is not None and (s[1] == 0 or s[1] >= 400)]
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return failed + severe, statuses
