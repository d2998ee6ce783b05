"""Browser-test fixtures: one headless Chromium (Debian's chromium + chromium-driver) per session,
a screenshot of the page saved for every failed test (the live Java clients are in console_java.py)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

CHROMIUM = os.environ.get("RMQD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RMQD_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOT_DIR = Path(os.environ.get("RMQD_SCREENSHOT_DIR", HERE.parent.parent / "test-screenshots"))


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Selenium, driver path passed explicitly, fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.path.exists(path):
            pytest.fail(f"{path} is missing: the console browser tests need Debian's {pkg} "
                        f"(apt-get install -y chromium chromium-driver; .ci/run installs them)", pytrace=False)
    profile = tempfile.mkdtemp(prefix="rmqd-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and "browser" in item.fixturenames:
        driver = item.funcargs.get("browser")
        if driver is not None:
            SHOT_DIR.mkdir(parents=True, exist_ok=True)
            path = SHOT_DIR / f"{item.name.replace('/', '_')}.png"
            try:
                driver.save_screenshot(str(path))
                rep.sections.append(("screenshot", f"{path} (page {driver.current_url})"))
            except Exception as exc:                        # the browser itself may be gone
                rep.sections.append(("screenshot", f"failed: {exc}"))
