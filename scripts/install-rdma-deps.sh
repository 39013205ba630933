#!/usr/bin/env bash
# Installs the system packages that `cargo build -p bootsim-adapters --features rdma` needs.
#
# ibverbs-sys 0.3.2's build script runs cmake on its vendored rdma-core (cmake, pkg-config),
# runs bindgen (libclang-dev) against headers that include <infiniband/verbs_api.h>, and links
# -libverbs (libibverbs-dev, which also pulls libnl-3-dev/libnl-route-3-dev, libibverbs1 and
# ibverbs-providers). The `rdma-core` package is deliberately avoided: it pulls systemd+udev.
exec bash "$(dirname "$0")/apt-install.sh" install-rdma-deps cmake pkg-config libclang-dev libibverbs-dev
