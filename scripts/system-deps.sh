#!/usr/bin/env bash
# Installs the Debian packages the observability tests and the picture script use, when they are missing:
#   prometheus (server and promtool), chromium (headless screenshots), libpython3.11 (rotel's embedded Python).
# Idempotent: when everything is present it only checks and exits. Without root or apt it prints what to install.
set -u

missing=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ! ldconfig -p 2>/dev/null | grep -q 'libpython3\.11\.so\.1\.0'; then
    if command -v dpkg-query >/dev/null 2>&1; then
        dpkg-query -W -f='${Status}' libpython3.11 2>/dev/null | grep -q 'install ok installed' || missing+=(libpython3.11)
    else
        missing+=(libpython3.11)
    fi
fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "system-deps: prometheus, promtool, chromium and libpython3.11 are present"
    exit 0
fi

echo "system-deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: cannot install (needs root and apt-get). Install them yourself, e.g. on Debian/Ubuntu:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    echo "  (prometheus provides 'prometheus' and 'promtool'; chromium provides headless 'chromium')" >&2
    # Not fatal: the tests that need them fail with the same instructions.
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are absent or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
    apt-get update -qq || echo "system-deps: apt-get update failed" >&2
fi
if apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    echo "system-deps: installed ${missing[*]}"
else
    echo "system-deps: apt-get install ${missing[*]} failed; the tests that need them will say so" >&2
fi
exit 0
