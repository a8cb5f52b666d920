#!/bin/bash
# make bench-queue: the queue's figures (tests/bench/bench_queue.c) for
# the SQLite single node and for 1 and 3 nodes on a PostgreSQL server this
# script starts (tests/vmrund/pg.sh), then the API's overhead on each
# (tests/bench/vmrund.py api). Printed, never asserted.
set -u
cd "$(dirname "$0")/../.."
. tests/vmrund/pg.sh
BENCH=$PWD/build/tests/bench_queue
RUNS=${RUNS:-2000}
SLOTS=${SLOTS:-4}
tmp=$(mktemp -d /tmp/bench-queue.XXXXXX)
trap 'pg_cleanup; rm -rf "$tmp"' EXIT
echo "bench-queue: $RUNS stand-in runs, $SLOTS slots per node, on $(nproc) CPUs"
timeout -k 5 300 "$BENCH" "$tmp/state.db" 1 "$RUNS" "$SLOTS" || exit 1
pg_start "$tmp/pg" || exit 1
for nodes in 1 3; do
	timeout -k 5 300 "$BENCH" "$PG_URI" "$nodes" "$RUNS" "$SLOTS" || exit 1
done
# Every API request takes from its tenant's rate in the store on
# PostgreSQL: the API's own overhead, on SQLite and then on the server.
echo "bench-queue: API requests, one node on SQLite"
timeout -k 5 300 python3 tests/bench/vmrund.py api || exit 1
echo "bench-queue: API requests, one node on PostgreSQL"
VMRUN_BENCH_STORE=$PG_URI timeout -k 5 300 python3 tests/bench/vmrund.py api || exit 1
