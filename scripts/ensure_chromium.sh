#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright's own
# browser download does not work on the project's machines). Install it with apt
# when it is missing and we are root; otherwise say how.
set -euo pipefail
browser="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$browser" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's chromium for the browser tests (once)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
    exit 0
fi
cat >&2 <<MSG
The browser tests need Chromium at $browser and it is missing.
Install it as root with:   apt-get install chromium
or point CHROMIUM_PATH at another Chromium binary and run ./test.sh again.
MSG
exit 1
