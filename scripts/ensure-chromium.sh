#!/usr/bin/env bash
# The console's browser test drives Debian's Chromium through Playwright, launched by
# its path: installed from the distribution when absent, never downloaded by Playwright.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "ensure-chromium: installing Chromium from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
