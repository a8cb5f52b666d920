/* E2B's control API (the `e2b` SDK 2.x's calls, docs/e2b.md) translated
 * onto vmrund's sandboxes: a create body to the native one, a sandbox's
 * native view to E2B's Sandbox, ListedSandbox and SandboxDetail, the
 * listing's filters, and E2B's error body. Pure: no I/O, no globals;
 * api_e2b.c does the HTTP. */
#ifndef VMRUND_E2B_H
#define VMRUND_E2B_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "runtime.h"
#include "tenants.h"

#define E2B_PREFIX_MAX 64
/* The template a create names when it names none, and that the default
 * image (no runtime) is shown as. */
#define E2B_BASE_TEMPLATE "base"
/* The envd version a sandbox reports: the SDK gates features on it
 * (docs/e2b.md); below 0.1.0 it kills the sandbox as too old. */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_LIST_MAX 100              /* ListedSandboxes in one page */

/* A snapshot's id (E2B's snapshotID, a template a create may name):
 * "SANDBOX_ID:NAME", a sandbox's checkpoint. */
#define E2B_SNAPSHOT_SEP ':'
#define E2B_SNAPSHOT_MAX (32 + 1 + 64)

/* Whether text is a snapshot's id: 1 with the checkpoint's reference
 * ("SANDBOX_ID/NAME", run_pause.h's run_checkpoint_ref) into ref, else 0.
 * Pure. */
int e2b_snapshot_ref(const char *text, char ref[E2B_SNAPSHOT_MAX + 1]);

/* E2B's NewSandbox body (POST /v2/sandboxes) as vmrund's native create
 * body (*native, a new reference): templateID as the runtime (rts, n:
 * the installed ones; E2B_BASE_TEMPLATE the default image; a snapshot's
 * id as from_checkpoint, which takes no envVars or network of its own),
 * timeout as timeout_s, metadata, envVars as env, autoPause as on_timeout
 * "pause";
 * the network from allow_internet_access and network.allowOut within
 * reach (the tenant's net= and net_addr= rules): internet access, asked
 * or by default, is the tenant's host rules (its whole reach when net=
 * any), allowOut names hosts and addresses within it. The template's
 * name into template (E2B_BASE_TEMPLATE for the default image). 0, or
 * an HTTP status (400, 403) with the reason in err. */
int e2b_create_body(const json_t *in, const struct runtime *rts, size_t n, const struct tenant_reach *reach,
		    json_t **native, char *template, size_t tlen, char *err, size_t errlen);

/* A sandbox's E2B state from its native view: "running" (starting,
 * running, stopping), "paused", or NULL when E2B would not know it any
 * more (stopped, lost). */
const char *e2b_state(const json_t *view);

/* E2B's Sandbox (the answer to a create or a connect) for the sandbox
 * whose native view is view: its id, template, envd version, and
 * envdAccessToken (envd.h's) when token is not NULL. */
json_t *e2b_sandbox(const json_t *view, const char *token);

/* E2B's SandboxDetail (GET /sandboxes/ID), which a listing's
 * ListedSandbox is a part of, from the native view; NULL for a sandbox
 * that e2b_state does not know. */
json_t *e2b_detail(const json_t *view);

/* E2B's SandboxMetric at now_ms for the sandbox whose native view is
 * view, from its supervisor's usage ({cpu_ms, memory_bytes, disk_bytes},
 * each a number or null): CPU use is the mean since it started (vmrun
 * keeps a total, not a series), memory and disk what its cgroup and
 * workspace hold, against its limits. */
json_t *e2b_metric(const json_t *view, const json_t *usage, int64_t now_ms);

/* Whether the native view's metadata has every KEY=VALUE of query (the
 * SDK's metadata parameter as libmicrohttpd hands it over: "k=v&k2=v2",
 * a query string of pairs whose keys and values were each
 * percent-encoded before); a query that is not such pairs matches
 * nothing. */
bool e2b_metadata_match(const json_t *view, const char *query);

/* Whether view's E2B state is among states ("running,paused" as the SDK
 * joins them; NULL or "": any it knows). */
bool e2b_state_match(const json_t *view, const char *states);

/* E2B's sandbox domain (config e2b_domain): whether name is a DNS name
 * of at most E2B_DOMAIN_MAX - 1 bytes, labels of letters, digits and
 * hyphens. Pure. */
#define E2B_DOMAIN_MAX 200
bool e2b_domain_ok(const char *name);

/* Whether a request's Host is PORT-ID.domain (any port after it too,
 * letters in any case), as the SDK addresses a sandbox's port on
 * E2B_DOMAIN: 1 with the sandbox's id (32 hex digits, lowercase) into
 * id, else 0. Pure. */
int e2b_host_sandbox(const char *host, const char *domain, char id[33]);

/* E2B's error body {"code": status, "message": message}. */
json_t *e2b_error(unsigned status, const char *message);

#endif
