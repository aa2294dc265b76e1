#!/usr/bin/env bash
# What `make bench` needs from Debian: wrk (the closed loop) and redis-server (a throwaway
# Redis for the load runs). Installed when missing (root + apt-get); otherwise the bench
# stops saying what is missing. py-spy (for --profile) comes with the dev extras.
set -u
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} for the benchmark (apt-get)..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 \
    || { echo "could not install ${missing[*]}: install them and run make bench again" >&2; exit 1; }
else
  echo "missing ${missing[*]}: apt-get install ${missing[*]}" >&2
  exit 1
fi
