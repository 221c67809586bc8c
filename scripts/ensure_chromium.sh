#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright's own
# browser download does not work on the project's machines): its headless shell
# (chromium-headless-shell, a third less CPU on the walks) where it is installed, else the
# full browser (chromium). Install what is missing with apt when we are root; otherwise
# say how. With CHROMIUM_PATH set, only that binary is checked.
set -euo pipefail
if [ -n "${CHROMIUM_PATH:-}" ]; then
    [ -x "$CHROMIUM_PATH" ] && exit 0
    echo "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file" >&2
    exit 1
fi
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromium-headless-shell ] || missing+=(chromium-headless-shell)
if [ ${#missing[@]} = 0 ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's ${missing[*]} for the browser tests (once)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if ! apt-get install -y -qq "${missing[@]}" >/dev/null; then
        # A release without the headless shell: the full browser is enough.
        [ -x /usr/bin/chromium ] || apt-get install -y -qq chromium >/dev/null
    fi
    exit 0
fi
if [ -x /usr/bin/chromium ] || [ -x /usr/bin/chromium-headless-shell ]; then
    exit 0  # one of them runs the tests
fi
cat >&2 <<MSG
The browser tests need Debian's Chromium and it is missing.
Install it as root with:   apt-get install chromium chromium-headless-shell
or point CHROMIUM_PATH at another Chromium binary and run ./test.sh again.
MSG
exit 1
