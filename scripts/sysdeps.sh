#!/usr/bin/env bash
# System packages the full test suite uses: bubblewrap (the sandbox), PostgreSQL (the store's second backend) and
# Chromium (the web pages' browser tests, driven by Playwright on this executable).
# Best effort: installs with apt-get when running as root (or with passwordless sudo); otherwise it says what is
# missing and the tests that need it skip with a clear reason.
set -u
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
  echo "sysdeps: missing ${need[*]} (not root, no sudo): the tests that need them will be skipped" >&2; exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${need[@]}" >/tmp/shoparena-sysdeps.log 2>&1; then
  $SUDO apt-get update >>/tmp/shoparena-sysdeps.log 2>&1
  $SUDO apt-get install -y --no-install-recommends "${need[@]}" >>/tmp/shoparena-sysdeps.log 2>&1 \
    || echo "sysdeps: could not install ${need[*]} (see /tmp/shoparena-sysdeps.log); dependent tests will skip" >&2
fi
exit 0
