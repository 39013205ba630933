#!/usr/bin/env bash
# Installs Debian's `chromium` package: the headless browser that tests/timeline.rs loads the
# replay timeline in (`--dump-dom`) and that `make timeline-screenshot` uses (`--screenshot`).
exec bash "$(dirname "$0")/apt-install.sh" install-chromium chromium
