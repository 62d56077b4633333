# The two commands the README promises. Both install what is missing first.
.PHONY: run test setup setup-test bench bench-dashboard bench-evidence bench-kek bench-logins bench-multi bench-cpu bench-purge bench-bodies-migration bench-replay-days bench-scale

export PATH := $(CURDIR)/end2end/node_modules/.bin:$(or $(CARGO_HOME),$(HOME)/.cargo)/bin:$(PATH)

setup:
	@scripts/setup.sh

# Also what only the tests need (Chromium, promtool, Playwright, schemathesis).
setup-test:
	@scripts/setup.sh --test

# Builds the console and serves it on the SQLite default (./data).
run: setup
	scripts/build-console.sh
	LEPTOS_SITE_ROOT=target/site ./target/debug/signet serve

test: setup-test
	@scripts/test.sh

# Throughput and latency of the receiver against the pgbench ceiling (docs/benchmarks.md).
bench: setup
	bench/run.sh

# Server CPU per accepted event at a fixed 1,000 events/s (docs/benchmarks.md#cpu-per-accepted-event).
bench-cpu: setup
	bench/cpu.sh

# Dashboard reads at ten million stored events, PostgreSQL and SQLite
# (docs/benchmarks.md#dashboard-reads-at-ten-million-events).
bench-dashboard: setup
	bench/dashboard.sh

# Evidence export and the drill run on the dashboard benchmark's data
# (docs/benchmarks.md#evidence-export-and-drills-at-ten-million-events).
bench-evidence: setup
	bench/evidence.sh

# KEK rewrap of every sealed row on the dashboard benchmark's data (docs/benchmarks.md#kek-rewrap).
bench-kek: setup
	bench/kek.sh

# /hooks latency with and without 20 sign-ins per second alongside (docs/benchmarks.md#sign-ins-beside-webhooks).
bench-logins: setup
	bench/logins.sh

# One day's retention purge at 1 and 10 million stored events (docs/benchmarks.md#retention-purge).
bench-purge: setup
	bench/purge.sh

# Upgrading 10 million stored events on PostgreSQL to migration 000200's index
# (docs/benchmarks.md#upgrading-to-the-partial-index).
bench-bodies-migration: setup
	bench/bodies-migration.sh

# A day of replay records on PostgreSQL: deleted row by row vs one partition drop
bench-replay-days: setup
	bench/replay-days.sh

# Up to 100 million stored claims on PostgreSQL: claim latency, daily purges, sizes, dashboard reads
# (docs/benchmarks.md#a-hundred-million-claims).
bench-scale: setup
	bench/scale.sh

# Throughput of 1 and of 3 processes on one PostgreSQL database (docs/benchmarks.md#several-processes).
bench-multi: setup
	bench/multi.sh
