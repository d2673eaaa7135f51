#!/usr/bin/env bash
# Install Debian's Chromium for the report's browser test (tests/test_report.py, driven over
# the DevTools protocol by tests/browser.py). Does nothing when it is installed.
# Exit status 3: it cannot be installed here (not root, no apt-get, or apt-get failed).
set -uo pipefail

command -v chromium >/dev/null 2>&1 && exit 0
echo "browser install: installing Debian's chromium" >&2
# shellcheck source=../apt-ready.sh
. "$(dirname "$0")/../apt-ready.sh"
apt_ready browser || exit 3
export DEBIAN_FRONTEND=noninteractive
status=0
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; } \
    >/tmp/shiftwork-browser-install.log 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    tail -20 /tmp/shiftwork-browser-install.log >&2
    echo "browser install: CANNOT INSTALL: apt-get failed ($status)" >&2
    exit 3
fi
command -v chromium >/dev/null 2>&1 || { echo "browser install: chromium missing after install" >&2; exit 3; }
