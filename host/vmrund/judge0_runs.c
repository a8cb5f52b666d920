/* Judge0's submissions as stored runs, and their callbacks
 * (judge0_runs.h). A callback is Judge0's call_callback: a PUT of the
 * default fields, base64, JSON, up to 3 tries of 5 s each, a try that got
 * any answer ending it; with two differences that keep vmrund from being
 * anyone's proxy: the destination is judged by the tenant's callback rules
 * and the egress proxy's deny set (net_decide), once resolved, and curl
 * dials that one address alone (CURLOPT_RESOLVE, and every socket it opens
 * checked again); no redirect is followed. */
#include "judge0_runs.h"

#include <curl/curl.h>
#include <netdb.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "judge0.h"
#include "spool.h"

/* ---- the view ---------------------------------------------------------------- */

/* judge0_row_view's, the row's request parsed already (NULL: none). */
static json_t *row_view(struct vmrund *d, const struct store_run *run, const json_t *request, char *const output[2],
			uint64_t mask, bool b64, bool *not_utf8)
{
	json_t *result = spool_result_parse(run->result);
	bool both = output && output[0] && output[1];
	struct judge0_run jr = {
		.id = run->id, .state = run->state == RS_QUEUED ? 0 : run->state == RS_RUNNING ? 1 : 2,
		.request = request, .result = json_is_object(result) ? result : NULL,
		.output = { both ? output[0] : NULL, both ? output[1] : NULL },
		.message = run->message, .created_ms = run->created_ms, .started_ms = run->started_ms,
		.finished_ms = run->finished_ms, .node = run->node, .rts = d->rts, .nrts = d->nrts,
	};
	json_t *v = judge0_view(&jr, mask, b64, not_utf8);
	json_decref(result);
	return v;
}

json_t *judge0_row_view(struct vmrund *d, const struct store_run *run, char *const output[2], uint64_t mask,
			bool b64, bool *not_utf8)
{
	json_t *request = run->request ? json_loads(run->request, 0, NULL) : NULL;
	json_t *v = row_view(d, run, request, output, mask, b64, not_utf8);
	json_decref(request);
	return v;
}

/* A run as vmrund_get_run_output gave it (fetched: its output file is
 * readable), its request parsed already, as Judge0's submission: the
 * view with *status 200, or NULL with 400 (a text is not UTF-8 and !b64)
 * or 500. */
static json_t *fetched_view(struct vmrund *d, const struct store_run *run, const json_t *request, bool fetched,
			    uint64_t mask, bool b64, unsigned *status)
{
	char path[PATH_MAX], *output[2] = { NULL, NULL };
	if (fetched) {
		vmrund_run_path(d, run->id, SPOOL_OUTPUT, path, sizeof(path));
		spool_output_text(path, output);
	}
	bool not_utf8 = false;
	json_t *v = row_view(d, run, request, output, mask, b64, &not_utf8);
	*status = !v ? 500 : not_utf8 ? 400 : 200;
	if (not_utf8) {
		json_decref(v);
		v = NULL;
	}
	free(output[0]);
	free(output[1]);
	return v;
}

json_t *judge0_run_view(struct vmrund *d, const char *id, const char *tenant, uint64_t mask, bool b64,
			unsigned *status)
{
	struct store_run run;
	bool fetched = false;
	*status = 404;
	int found = vmrund_get_run_output(d, id, true, &run, &fetched);
	if (found != 1) {
		*status = found < 0 ? 500 : 404;
		return NULL;
	}
	if (tenant && strcmp(run.tenant, tenant)) {
		store_run_free(&run);
		return NULL;
	}
	json_t *request = run.request ? json_loads(run.request, 0, NULL) : NULL;
	json_t *v = fetched_view(d, &run, request, fetched, mask, b64, status);
	json_decref(request);
	store_run_free(&run);
	return v;
}

/* ---- callbacks --------------------------------------------------------------- */

struct judge0_callbacks {
	struct vmrund *d;
	pthread_mutex_t mu;           /* the queue and stop; never held with d->lock taken after */
	pthread_cond_t cv;
	char (*q)[STORE_ID_LEN + 1];  /* JUDGE0_CALLBACK_QUEUE ids, a ring */
	unsigned head, len;
	bool stop;
	pthread_t th[JUDGE0_CALLBACK_THREADS];
	unsigned nth;
};

static void count(struct vmrund *d, enum metrics_callback what)
{
	pthread_mutex_lock(&d->lock);
	d->m.callback[what]++;
	pthread_mutex_unlock(&d->lock);
}

static int resolve(void *ctx, const char *host, uint8_t addrs[][16], char *err, size_t errlen)
{
	(void)ctx;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s", gai_strerror(rc));
		return -1;
	}
	int n = 0;
	for (struct addrinfo *a = res; a && n < NET_ADDRS_MAX; a = a->ai_next)
		if (net_addr_from_sockaddr(a->ai_addr, addrs[n]))
			n++;
	freeaddrinfo(res);
	return n;
}

/* What curl may connect to: the one address chosen, nothing else. */
struct pin {
	uint8_t addr[16];
	uint16_t port;
};

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	const struct pin *pin = ctx;
	uint8_t addr[16];
	const struct sockaddr_in *in = (const struct sockaddr_in *)&a->addr;
	if (purpose != CURLSOCKTYPE_IPCXN || !net_addr_from_sockaddr(&a->addr, addr) || memcmp(addr, pin->addr, 16) ||
	    ntohs(in->sin_port) != pin->port)   /* sin_port and sin6_port sit at the same place */
		return CURL_SOCKET_BAD;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* One PUT of body to url, pinned to pin: the HTTP status, or -1 with
 * curl's reason. */
static long put_once(const char *url, const struct judge0_url *u, struct pin *pin, const char *body, char *why,
		     size_t cap)
{
	char a[INET6_ADDRSTRLEN + 2], entry[NET_HOST_MAX + INET6_ADDRSTRLEN + 16];
	char errbuf[CURL_ERROR_SIZE] = "";
	net_addr_format(pin->addr, a + 1, sizeof(a) - 2);
	bool v6 = !net_addr_is_v4(pin->addr);
	if (v6) {
		a[0] = '[';
		strcat(a, "]");
	}
	snprintf(entry, sizeof(entry), "%s:%u:%s", u->host, u->port, v6 ? a : a + 1);
	CURL *c = curl_easy_init();
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	struct curl_slist *res = curl_slist_append(NULL, entry);
	long code = -1;
	if (!c || !hdr || !res) {
		snprintf(why, cap, "out of memory");
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_RESOLVE, res);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, pin);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)JUDGE0_CALLBACK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	else
		snprintf(why, cap, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
out:
	curl_slist_free_all(res);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	return code;
}

/* The run's callback_url and tenant, from its request (parsed): false
 * when it has none. */
static bool callback_of(struct vmrund *d, const struct store_run *run, const json_t *request,
			char url[JUDGE0_URL_MAX + 1], int *tenant)
{
	const char *u = json_string_value(
		json_object_get(json_object_get(json_object_get(request, "client"), "judge0"), "callback_url"));
	bool ok = u && strlen(u) <= JUDGE0_URL_MAX && (*tenant = tenants_by_name(&d->ts, run->tenant)) >= 0;
	if (ok)
		snprintf(url, JUDGE0_URL_MAX + 1, "%s", u);
	return ok;
}

/* The callback to url of run (as deliver fetched it, its request
 * parsed), tenant's: judged by the tenant's rules and the deny set, then
 * the submission PUT, up to JUDGE0_CALLBACK_TRIES times. */
static void call(struct vmrund *d, const struct store_run *run, const json_t *request, bool fetched, const char *url,
		 int tenant)
{
	char why[300];
	struct judge0_url u;
	struct net_decision dec;
	unsigned status;
	const struct tenant_reach *reach = &d->ts.t[tenant].callback;
	if (judge0_url_parse(url, &u, why, sizeof(why)) || judge0_callback_refusal(reach, &u, why, sizeof(why))) {
		vmrund_say("run %s: callback %s refused: %s", run->id, url, why);
		count(d, CB_REFUSED);
		return;
	}
	net_decide(reach->rules, reach->n, reach->any, u.host, u.port, resolve, NULL, NULL, 0, &dec);
	if (!dec.allowed) {
		vmrund_say("run %s: callback %s refused: %s: %s", run->id, url, dec.host, dec.why);
		count(d, CB_REFUSED);
		return;
	}
	json_t *v = fetched_view(d, run, request, fetched, judge0_fields_default(), true, &status);
	char *body = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!body) {
		vmrund_say("run %s: callback %s not made: its submission could not be read (%u)", run->id, url, status);
		count(d, CB_FAILED);
		return;
	}
	struct pin pin = { .port = u.port };
	memcpy(pin.addr, dec.addr, 16);
	long code = -1;
	unsigned tries = 0;
	while (code < 0 && tries < JUDGE0_CALLBACK_TRIES) {
		if (tries++)
			sleep(1);   /* Judge0 tries again at once; a second apart is kinder to a server starting up */
		code = put_once(url, &u, &pin, body, why, sizeof(why));
	}
	free(body);
	if (code < 0) {
		vmrund_say("run %s: callback %s failed %u times: %s", run->id, url, tries, why);
		count(d, CB_FAILED);
	} else {
		count(d, CB_SENT);
		if (code >= 300)
			vmrund_say("run %s: callback %s answered %ld", run->id, url, code);
	}
}

/* Run id's callback, if its submission has one. The row is read and its
 * request parsed once, for the address and for the view the callback
 * sends. */
static void deliver(struct vmrund *d, const char *id)
{
	struct store_run run;
	bool fetched = false;
	char url[JUDGE0_URL_MAX + 1];
	int tenant;
	if (vmrund_get_run_output(d, id, true, &run, &fetched) != 1)
		return;
	json_t *request = run.request ? json_loads(run.request, 0, NULL) : NULL;
	if (callback_of(d, &run, request, url, &tenant))
		call(d, &run, request, fetched, url, tenant);
	json_decref(request);
	store_run_free(&run);
}

static void *worker(void *arg)
{
	struct judge0_callbacks *cb = arg;
	char id[STORE_ID_LEN + 1];
	for (;;) {
		pthread_mutex_lock(&cb->mu);
		while (!cb->len && !cb->stop)
			pthread_cond_wait(&cb->cv, &cb->mu);
		if (cb->stop) {
			pthread_mutex_unlock(&cb->mu);
			return NULL;
		}
		memcpy(id, cb->q[cb->head], sizeof(id));
		cb->head = (cb->head + 1) % JUDGE0_CALLBACK_QUEUE;
		cb->len--;
		pthread_mutex_unlock(&cb->mu);
		deliver(cb->d, id);
	}
}

int judge0_callbacks_start(struct vmrund *d, char *err, size_t errlen)
{
	struct judge0_callbacks *cb = calloc(1, sizeof(*cb));
	if (!cb || !(cb->q = calloc(JUDGE0_CALLBACK_QUEUE, sizeof(*cb->q)))) {
		free(cb);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	cb->d = d;
	pthread_mutex_init(&cb->mu, NULL);
	pthread_cond_init(&cb->cv, NULL);
	d->callbacks = cb;
	for (; cb->nth < JUDGE0_CALLBACK_THREADS; cb->nth++)
		if (pthread_create(&cb->th[cb->nth], NULL, worker, cb)) {
			snprintf(err, errlen, "callback threads: pthread_create failed");
			return -1;
		}
	return 0;
}

void judge0_callbacks_stop(struct vmrund *d)
{
	struct judge0_callbacks *cb = d->callbacks;
	if (!cb)
		return;
	pthread_mutex_lock(&cb->mu);
	cb->stop = true;
	if (cb->len)
		vmrund_say("%u Judge0 callbacks not made: vmrund is stopping", cb->len);
	pthread_cond_broadcast(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
	for (unsigned i = 0; i < cb->nth; i++)
		pthread_join(cb->th[i], NULL);
	pthread_cond_destroy(&cb->cv);
	pthread_mutex_destroy(&cb->mu);
	free(cb->q);
	free(cb);
	d->callbacks = NULL;
}

void judge0_callbacks_ended(struct vmrund *d, const struct store_run *run)
{
	struct judge0_callbacks *cb = d->callbacks;
	/* the stored request names callback_url only when it was given (a
	 * string; null otherwise): looked for before anything is parsed */
	if (!cb || !run->request || !strstr(run->request, "\"callback_url\":\""))
		return;
	pthread_mutex_lock(&cb->mu);
	bool full = cb->len == JUDGE0_CALLBACK_QUEUE;
	if (!full) {
		snprintf(cb->q[(cb->head + cb->len) % JUDGE0_CALLBACK_QUEUE], STORE_ID_LEN + 1, "%s", run->id);
		cb->len++;
		pthread_cond_signal(&cb->cv);
	}
	pthread_mutex_unlock(&cb->mu);
	if (full) {
		d->m.callback[CB_DROPPED]++;   /* d->lock is held here */
		vmrund_say("run %s: callback dropped: %d are waiting already", run->id, JUDGE0_CALLBACK_QUEUE);
	}
}

/* ---- GET /statistics ------------------------------------------------------------------------ */

/* The tenant's submissions counted, newest first, JUDGE0_STATS_ROWS at
 * most: 0, or -1 with err. */
static int tally(struct vmrund *d, unsigned tenant, struct judge0_tally *t, int64_t now_ms, char *err, size_t errlen)
{
	uint64_t mask = judge0_field_bit("language_id") | judge0_field_bit("status_id");
	memset(t, 0, sizeof(*t));
	for (uint64_t offset = 0; offset < JUDGE0_STATS_ROWS;) {
		struct store_run *rows;
		unsigned n;
		uint64_t total;
		if (vmrund_list_runs(d, d->ts.t[tenant].name, "judge0", offset, JUDGE0_STATS_PAGE, &rows, &n, &total, err,
				     errlen))
			return -1;
		for (unsigned i = 0; i < n; i++) {
			bool not_utf8;
			json_t *v = judge0_row_view(d, &rows[i], NULL, mask, true, &not_utf8);
			judge0_tally_add(t, (long)json_integer_value(json_object_get(v, "language_id")),
					 (int)json_integer_value(json_object_get(v, "status_id")), rows[i].created_ms, now_ms);
			json_decref(v);
		}
		store_runs_free(rows, n);
		offset += n;
		if (n < JUDGE0_STATS_PAGE || offset >= total)
			break;
	}
	return 0;
}

/* The store's size in bytes where vmrund can know it (SQLite's file and
 * its journal), else -1. */
static int64_t store_bytes(const struct vmrund *d)
{
	struct stat st;
	char wal[PATH_MAX + 8];
	if (d->cfg.store[0] || stat(d->cfg.state_db, &st))
		return -1;
	int64_t n = (int64_t)st.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", d->cfg.state_db);
	return n + (stat(wal, &st) ? 0 : (int64_t)st.st_size);
}

json_t *judge0_stats_of(struct vmrund *d, unsigned tenant, bool invalidate, char *err, size_t errlen)
{
	json_t *v = NULL;
	int64_t mono = clock_mono_ms();
	pthread_mutex_lock(&d->lock);
	if (!d->j0_stats)
		d->j0_stats = calloc(d->ts.n, sizeof(*d->j0_stats));
	struct judge0_stats_cache *c = d->j0_stats && tenant < d->ts.n ? &d->j0_stats[tenant] : NULL;
	bool fresh = c && c->v && mono < c->until_ms && !(invalidate && mono - c->made_ms >= JUDGE0_STATS_MIN_MS);
	if (c && c->v && (fresh || c->counting))
		v = json_incref(c->v);
	bool busy = c && c->counting;
	if (c && !v && !busy)
		c->counting = true;
	pthread_mutex_unlock(&d->lock);
	if (v)
		return v;
	if (busy) {
		snprintf(err, errlen, "the statistics are being counted; ask again in a moment");
		return NULL;
	}
	struct judge0_tally *t = malloc(sizeof(*t));
	int64_t now = clock_wall_ms();
	if (!t)
		snprintf(err, errlen, "out of memory");
	else if (!tally(d, tenant, t, now, err, errlen) &&
		 !(v = judge0_statistics(t, now, now + JUDGE0_STATS_CACHE_MS, d->rts, d->nrts, store_bytes(d))))
		snprintf(err, errlen, "out of memory");
	free(t);
	pthread_mutex_lock(&d->lock);
	if (c) {
		if (v) {
			json_decref(c->v);
			c->v = json_incref(v);
			c->made_ms = mono;
			c->until_ms = mono + JUDGE0_STATS_CACHE_MS;
		}
		c->counting = false;
	}
	pthread_mutex_unlock(&d->lock);
	return v;
}

void judge0_stats_free(struct vmrund *d)
{
	for (size_t i = 0; d->j0_stats && i < d->ts.n; i++)
		json_decref(d->j0_stats[i].v);
	free(d->j0_stats);
	d->j0_stats = NULL;
}
