#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright (never `playwright install`).
# Install the Debian packages when missing; say so clearly when that is impossible.
set -u
if [ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi wqy; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium and a CJK font for the browser tests (apt-get)..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei) >/dev/null 2>&1 \
    || echo "WARNING: could not install chromium; browser tests will fail with a clear message"
else
  echo "WARNING: /usr/bin/chromium is missing and cannot be installed here (need root + apt-get)"
fi
exit 0
