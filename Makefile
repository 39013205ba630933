# bootsim: `make run` (the headline comparison), `make test` (everything CI runs), `make bench`.
CARGO ?= cargo
# The default comparison: every variant on the report's workload under the report's condition.
RUN_ARGS ?= compare --workload deepep --ranks 2 --adversary rss --seeds 200

.PHONY: install skips-reset bench-scale timeline-screenshot run run-nccl test check-scripts deps fetch-nvshmem fetch-nccl real-nvshmem real-nvshmem-accept fmt fmt-check lint unit bench bench-interposer rdma-build

# The first build takes minutes on a fresh machine: cargo shows it (no --quiet).
run:
	$(CARGO) run --release -- $(RUN_ARGS)

# The NCCL headline: every modelled NCCL version's ncclCommInitRank on one 8-GPU node
# (nccl-2.19 shows NVIDIA/nccl#1176, 2.21 and 2.30 pass).
RUN_NCCL_ARGS ?= compare --workload nccl-init --ranks 8 --adversary rss --seeds 200
run-nccl:
	$(CARGO) run --release -- $(RUN_NCCL_ARGS)

# bootsim on your PATH: the release build copied to $(PREFIX)/bin (default ~/.cargo/bin, where
# rustup puts cargo) and its accept interposer to $(PREFIX)/lib/bootsim (`cargo install --path .`
# installs the binary alone). PROFILE=dev installs the debug build.
PREFIX ?= $(HOME)/.cargo
PROFILE ?= release
install:
	$(CARGO) build --profile $(PROFILE) --bin bootsim
	$(CARGO) build --profile $(PROFILE) -p bootsim-preload
	install -D -m 755 "$${CARGO_TARGET_DIR:-target}/$(if $(filter dev,$(PROFILE)),debug,$(PROFILE))/bootsim" "$(PREFIX)/bin/bootsim"
	install -D -m 644 "$${CARGO_TARGET_DIR:-target}/$(if $(filter dev,$(PROFILE)),debug,$(PROFILE))/libbootsim_preload.so" "$(PREFIX)/lib/bootsim/libbootsim_preload.so"
	@echo "installed $(PREFIX)/bin/bootsim and its accept interposer $(PREFIX)/lib/bootsim/libbootsim_preload.so"

# Without root a test that needs it (the wire, an apt package) is SKIPPED and counted: the count
# is the last thing `make test` prints. Under CI (CI=true) such a test fails instead.
test: skips-reset check-scripts deps fmt-check lint unit

# Tests and set-up steps that could not run here append a line to this file (bootsim_adapters::skip).
export BOOTSIM_SKIP_LOG ?= $(CURDIR)/target/skipped-tests.log
skips-reset:
	@mkdir -p $(dir $(BOOTSIM_SKIP_LOG)) && : > $(BOOTSIM_SKIP_LOG)

# Every shell script parses and passes shellcheck, before any of them installs anything.
check-scripts:
	bash scripts/check-scripts.sh

# What the tests need, idempotent: headless Chromium for the timeline test, valgrind for the
# bench's profile (tests/bench.rs), NVSHMEM's real
# UID bootstrap plugins (3.4.5, 3.7.1, 3.8.0) and NCCL's libnccl.so.2 (2.19.3, 2.21.5, 2.30.7,
# 2.32.3: its real root, see tests/nccl_real_root.rs), all fetched from the Python
# package index, never committed.
deps: fetch-nvshmem fetch-nccl
	bash scripts/install-chromium.sh || bash scripts/skip.sh chromium "scripts/install-chromium.sh failed (no root or sudo?)"
	bash scripts/install-valgrind.sh || bash scripts/skip.sh valgrind "scripts/install-valgrind.sh failed (no root or sudo?)"

fetch-nvshmem:
	bash scripts/fetch-nvshmem.sh

fetch-nccl:
	bash scripts/fetch-nccl.sh

# NVSHMEM's shipped plugins under the real kernel, reordered by the userspace wire (root), beside
# bootsim's matching variants: the per-version table in the README (ITERATIONS=... to change).
real-nvshmem: fetch-nvshmem
	$(CARGO) run --release --quiet -- real-nvshmem --iterations $${ITERATIONS:-200}

# The same table without root: the accept interposer in place of the wire, every rank a process.
real-nvshmem-accept: fetch-nvshmem
	$(CARGO) build --release --quiet
	$(CARGO) run --release --quiet -- real-nvshmem --iterations $${ITERATIONS:-200} --accept 'release-on-next=500ms,select=pair:1>2:2'

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

# Clippy, and rustdoc with broken or private links as errors (module renames must not leave dead links).
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --bin bootsim --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet

# Every test; then how many did not run their real part here (never counted as passed).
unit:
	@status=0; $(CARGO) test --workspace || status=$$?; \
	bash scripts/skip-summary.sh $(BOOTSIM_SKIP_LOG); exit $$status

# One run writes BENCHMARKS.json, and BENCHMARKS.md's tables are generated from it (never typed);
# the accept interposer's cost per accept() is measured beside it.
bench: bench-interposer
	$(CARGO) run --release --quiet -- bench --json BENCHMARKS.json
	$(CARGO) run --release --quiet -- bench --markdown BENCHMARKS.json --update BENCHMARKS.md

# The accept interposer's cost per accept() against none (target: under 10 µs).
bench-interposer:
	$(CARGO) bench --quiet -p bootsim-preload --bench accept_overhead

# The same report with the scale series up to 4096 ranks (tens of minutes; each point in a child
# capped at 3/4 of the machine's memory, reported as out of memory if it does not fit).
bench-scale:
	$(CARGO) run --release --quiet -- bench --max-ranks 4096 --json BENCHMARKS.json
	$(CARGO) run --release --quiet -- bench --markdown BENCHMARKS.json --update BENCHMARKS.md

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
