#!/bin/bash
# The store's conformance suite (tests/unit/test_store.c), which the unit
# tests run against SQLite, run against a PostgreSQL server this script
# starts (tests/vmrund/pg.sh): the same calls, the same answers. Then the
# database is put back to schema version 1 (what the first vmrund with
# PostgreSQL made) and the suite runs again: its first open migrates it.
set -u
cd "$(dirname "$0")/../.."
. tests/vmrund/pg.sh
tmp=$(mktemp -d /tmp/store-pg.XXXXXX)
trap 'pg_cleanup; rm -rf "$tmp"' EXIT
pg_start "$tmp/pg" || { echo "store on PostgreSQL: no server"; exit 1; }
sql() { timeout -k 2 20 psql -X -q -At "$PG_URI" -c "$1"; }
VMRUN_TEST_STORE=$PG_URI timeout -k 5 240 "$1" >"$tmp/first.log" 2>&1 ||
	{ cat "$tmp/first.log"; echo "store on PostgreSQL: failed"; exit 1; }
sql "DROP TABLE node_addresses; DROP TABLE sandbox_idem; DROP TABLE sandboxes; DROP TABLE idem;
	ALTER TABLE runs DROP COLUMN outcome, DROP COLUMN termination, DROP COLUMN limits_hit;
	DROP TABLE rates; DROP INDEX runs_tenant_seq; DELETE FROM vmrun_schema WHERE version > 1" || exit 1
VMRUN_TEST_STORE=$PG_URI timeout -k 5 240 "$1" >"$tmp/second.log" 2>&1 ||
	{ cat "$tmp/second.log"; echo "store on PostgreSQL, migrated from version 1: failed"; exit 1; }
v=$(sql "SELECT string_agg(version::text, ' ' ORDER BY version) FROM vmrun_schema")
r=$(sql "SELECT relpersistence FROM pg_class WHERE relname = 'rates'")
c=$(sql "SELECT count(*) FROM information_schema.columns WHERE table_name = 'runs'
	AND column_name IN ('outcome', 'termination', 'limits_hit')")
i=$(sql "SELECT count(*) FROM information_schema.tables
	WHERE table_name IN ('idem', 'sandboxes', 'sandbox_idem', 'node_addresses')")
k=$(sql "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'sandboxes_state_check'")
case "$k" in *paused*failed*resumable*) k=ok ;; esac
[ "$v" = "1 2 3 4 5 6 7 8 9" ] && [ "$r" = u ] && [ "$c" = 3 ] && [ "$i" = 4 ] && [ "$k" = ok ] ||
	{ echo "store on PostgreSQL: after the migration, versions '$v', rates '$r', outcome columns $c," \
		"idem, sandbox and address tables $i, sandboxes' states $k (want '1 2 3 4 5 6 7 8 9', unlogged, 3, 4," \
		"paused, failed and resumable)"; exit 1; }
grep -E "^\[  PASSED  \]|SKIPPED TEST" "$tmp/second.log"
echo "store on PostgreSQL: passed, on a new database and on one migrated from version 1"
