#!/usr/bin/env bash
# What the suite needs from Debian: redis-server (the tests start throwaway servers for
# restart and fallback tests), redis-sentinel (the Sentinel failover test starts a primary,
# a replica and three sentinels of its own), redis-cli from redis-tools (the Redis Cluster tests
# join six redis-servers with `redis-cli --cluster create`), wrk (the bench harness's closed loop) and
# Chromium with a CJK font (browser tests drive Debian's Chromium through Playwright; never `playwright install`;
# the format tests write Chinese PDFs with that font, tests/indexes/test_formats.py). Installed when missing;
# when that is impossible the tests that need them fail with a clear message.
set -u
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
[ -x /usr/bin/chromium ] || missing+=(chromium)
fc-list 2>/dev/null | grep -qi wqy || missing+=(fonts-wqy-microhei)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} for the tests (apt-get)..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 \
    || echo "WARNING: could not install ${missing[*]}; the tests that need them will fail saying so"
else
  echo "WARNING: ${missing[*]} missing and cannot be installed here (needs root + apt-get)"
fi
exit 0
