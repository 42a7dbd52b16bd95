"""Shared fixtures of the tool tests: a headless Chromium at 1600x1000 for the pages people look at."""

from __future__ import annotations

import shutil

import pytest

CHROMEDRIVER = shutil.which("chromedriver")
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    if CHROMEDRIVER is None or BROWSER is None:
        pytest.skip("no chromium and chromedriver (the README's set-up installs them)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def console_errors(driver) -> list[str]:  # type: ignore[no-untyped-def]
    """The page's script errors so far (the browser's console log, errors only)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
