/* Tenants and their API keys, from a root-owned file (the config's keys,
 * /etc/vmrun/keys by default), that nobody but root may write:
 *
 *   # a tenant, then the keys that act as it
 *   tenant alice concurrent=4 queued=32 rate=10 burst=20
 *   key 6f1c...e2 alice
 *
 * concurrent: runs at once; queued: runs waiting beyond those; rate and
 * burst: requests per second, as a token bucket (every request that
 * carries the key counts, reads too; one bucket for all the nodes that
 * share a PostgreSQL store, store.h's rate). A key is 16 to 128 characters of
 * [A-Za-z0-9._-]; the file names every tenant before its keys. */
#ifndef VMRUND_TENANTS_H
#define VMRUND_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENANT_NAME_MAX 64
#define TENANT_KEY_MAX  128
#define TENANTS_MAX     1024
#define TENANT_KEYS_MAX 4096

struct tenant {
	char name[TENANT_NAME_MAX];
	unsigned concurrent, queued;
	double rate, burst;
};

struct tenant_key {
	char key[TENANT_KEY_MAX + 1];
	unsigned tenant;              /* index into tenants */
};

struct tenants {
	struct tenant *t;
	size_t n;
	struct tenant_key *keys;
	size_t nkeys;
};

/* Parse the file's text (len bytes) into ts (zeroed first). Returns 0, or
 * -1 with "LINE: reason" in err and ts empty. Pure. */
int tenants_parse(struct tenants *ts, const char *text, size_t len, char *err, size_t errlen);

/* Read path, refusing a file that is not a regular file owned by root and
 * writable by root alone (like root's policy file), and parse it. */
int tenants_load(struct tenants *ts, const char *path, char *err, size_t errlen);

/* The tenant a key acts as: its index, or -1. Compares in time that does
 * not depend on where a wrong key first differs. */
int tenants_by_key(const struct tenants *ts, const char *key);

/* The tenant with this name: its index, or -1. */
int tenants_by_name(const struct tenants *ts, const char *name);

/* Free and zero; safe twice. */
void tenants_free(struct tenants *ts);

#endif
