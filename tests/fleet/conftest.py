"""The real Chromium of the page tests, for the fleet page."""

from tests.web.conftest import browser, tab

__all__ = ["browser", "tab"]
