#!/bin/bash
# The store's conformance suite (tests/unit/test_store.c), which the unit
# tests run against SQLite, run against a PostgreSQL server this script
# starts (tests/vmrund/pg.sh): the same calls, the same answers.
set -u
cd "$(dirname "$0")/../.."
. tests/vmrund/pg.sh
tmp=$(mktemp -d /tmp/store-pg.XXXXXX)
trap 'pg_cleanup; rm -rf "$tmp"' EXIT
pg_start "$tmp/pg" || { echo "store on PostgreSQL: no server"; exit 1; }
VMRUN_TEST_STORE=$PG_URI timeout -k 5 240 "$1" && echo "store on PostgreSQL: passed"
