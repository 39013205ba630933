# bootsim: `make run` (the headline comparison), `make test` (everything CI runs), `make bench`.
CARGO ?= cargo
# The default comparison: every variant on the report's workload under the report's condition.
RUN_ARGS ?= compare --workload deepep --ranks 2 --adversary rss --seeds 200

.PHONY: bench-scale timeline-screenshot run test check-scripts deps fetch-nvshmem real-nvshmem real-nvshmem-accept fmt fmt-check lint unit bench bench-interposer rdma-build

# The first build takes minutes on a fresh machine: cargo shows it (no --quiet).
run:
	$(CARGO) run --release -- $(RUN_ARGS)

test: check-scripts deps fmt-check lint unit

# Every shell script parses and passes shellcheck, before any of them installs anything.
check-scripts:
	bash scripts/check-scripts.sh

# What the tests need, idempotent: headless Chromium for the timeline test, and NVSHMEM's real
# UID bootstrap plugins (3.4.5, 3.7.1, 3.8.0; fetched from the Python package index, never committed).
deps: fetch-nvshmem
	bash scripts/install-chromium.sh

fetch-nvshmem:
	bash scripts/fetch-nvshmem.sh

# NVSHMEM's shipped plugins under the real kernel, reordered by the userspace wire (root), beside
# bootsim's matching variants: the per-version table in the README (ITERATIONS=... to change).
real-nvshmem: fetch-nvshmem
	$(CARGO) run --release --quiet -- real-nvshmem --iterations $${ITERATIONS:-200}

# The same table without root: the accept interposer in place of the wire, every rank a process.
real-nvshmem-accept: fetch-nvshmem
	$(CARGO) build --release --quiet
	$(CARGO) run --release --quiet -- real-nvshmem --iterations $${ITERATIONS:-200} --accept 'release-on-next=500,select=pair:1>2:2'

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

# Clippy, and rustdoc with broken or private links as errors (module renames must not leave dead links).
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet

unit:
	$(CARGO) test --workspace

bench: bench-interposer
	$(CARGO) run --release --quiet -- bench

# The accept interposer's cost per accept() against none (target: under 10 µs).
bench-interposer:
	$(CARGO) bench --quiet -p bootsim-preload --bench accept_overhead

# The same table with the scale series up to 4096 ranks (tens of minutes; each point in a child
# capped at 3/4 of the machine's memory, reported as out of memory if it does not fit).
bench-scale:
	$(CARGO) run --release --quiet -- bench --max-ranks 4096

# The ibverbs check compiles against Debian's rdma-core headers (feature `rdma`).
rdma-build:
	bash scripts/install-rdma-deps.sh
	$(CARGO) build -p bootsim-adapters --features rdma
	$(CARGO) test -p bootsim-adapters --features rdma --lib rdma
	$(CARGO) test --features rdma --test rdma_cli

# A PNG of the report case's replay timeline, for people (CASE=... OUT=... to override).
timeline-screenshot:
	bash scripts/install-chromium.sh
	$(CARGO) build --release --quiet
	bash scripts/timeline-screenshot.sh "$${CASE:-variant=nvshmem-3.4 workload=deepep ranks=2 adversary=rss seed=3}" "$${OUT:-target/timeline.png}"
