# The two commands the README promises. Both install what is missing first.
.PHONY: run test setup setup-test bench bench-dashboard bench-evidence bench-kek bench-logins bench-multi bench-cpu

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

# Throughput and latency of the receiver against the pgbench ceiling (see README).
bench: setup
	bench/run.sh

# Server CPU per accepted event at a fixed 1,000 events/s (see README).
bench-cpu: setup
	bench/cpu.sh

# Dashboard reads at ten million stored events, PostgreSQL and SQLite (see README).
bench-dashboard: setup
	bench/dashboard.sh

# Evidence export and the drill run on the dashboard benchmark's data (see README).
bench-evidence: setup
	bench/evidence.sh

# KEK rewrap of every sealed row on the dashboard benchmark's data (see README).
bench-kek: setup
	bench/kek.sh

# /hooks latency with and without 20 sign-ins per second alongside (see README).
bench-logins: setup
	bench/logins.sh

# Throughput of 1 and of 3 processes on one PostgreSQL database (see README).
bench-multi: setup
	bench/multi.sh
