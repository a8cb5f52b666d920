/* What the two backends' sandbox calls share (store_sqlite_sandbox.c,
 * store_pg_sandbox.c): the SQL where the dialects agree, and the
 * admission they decide inside their transaction over what it counted.
 * Nothing else includes this; the daemon sees only store.h. */
#ifndef VMRUND_STORE_SANDBOX_H
#define VMRUND_STORE_SANDBOX_H

#include <stdint.h>

#include "store.h"
#include "tenants.h"

/* The columns a sandbox's row is read from, in this order (enum sbx_col). */
#define STORE_SBX_COLS                                                                                \
	"id, tenant, node, state, created_ms, started_ms, ended_ms, timeout_at_ms, memory_mib, disk_mib," \
	" request, reason, seq"
enum sbx_col {
	SBC_ID, SBC_TENANT, SBC_NODE, SBC_STATE, SBC_CREATED, SBC_STARTED, SBC_ENDED, SBC_TIMEOUT_AT, SBC_MEMORY,
	SBC_DISK, SBC_REQUEST, SBC_REASON, SBC_SEQ, SBC_N
};

/* store.c's names of the states that hold a tenant's place (open), and of
 * those that never change again (terminal), as SQL lists. */
#define STORE_SBX_OPEN     "('starting', 'running', 'stopping', 'paused', 'resumable')"
#define STORE_SBX_TERMINAL "('stopped', 'lost', 'failed')"
/* Every state, for the schema's CHECK. */
#define STORE_SBX_STATES   "('starting','running','stopping','stopped','lost','paused','failed','resumable')"

/* Whether sb may be created beside the tenant's open sandboxes (open of
 * them, taking memory_mib and disk_mib together): 0, or the
 * STORE_SBX_OVER_* of the first ceiling of lim that refuses it. sandboxes
 * 0 refuses every one; the sums' ceilings 0 are none. Pure. */
static inline int store_sbx_admit(const struct tenant *lim, uint64_t open, uint64_t memory_mib, uint64_t disk_mib,
				  const struct store_sandbox *sb)
{
	if (open >= lim->sandboxes)
		return STORE_SBX_OVER_COUNT;
	/* Subtracted rather than added: a sum near UINT64_MAX must not wrap
	 * into a small one. */
	if (lim->sandbox_memory_mib &&
	    (sb->memory_mib > lim->sandbox_memory_mib || memory_mib > lim->sandbox_memory_mib - sb->memory_mib))
		return STORE_SBX_OVER_MEMORY;
	if (lim->sandbox_disk_mib &&
	    (sb->disk_mib > lim->sandbox_disk_mib || disk_mib > lim->sandbox_disk_mib - sb->disk_mib))
		return STORE_SBX_OVER_DISK;
	return 0;
}

#endif
