#!/usr/bin/env bash
# Installs valgrind, whose callgrind gives `bootsim bench` its profile (section 5: exact
# instruction counts of the fast engine, split by function and by layer); tests/bench.rs runs it.
exec bash "$(dirname "$0")/apt-install.sh" install-valgrind valgrind
