/* Piston v2's endpoints (host/vmrund/piston.h has the translation):
 * execute waits for the run, as Piston does, bounded by wait_max_s; each
 * stage's "output" is its streams as they interleaved, from the run's
 * output file. */
#include "api.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "piston.h"
#include "spool.h"

static enum MHD_Result execute_and_wait(struct http_req *r)
{
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	struct run_spec rq;
	const struct runtime *rt = NULL;
	char err[400], id[SCHED_ID_MAX];
	int rc = piston_parse(body, r->d->rts, r->d->nrts, &rq, &rt, err, sizeof(err));
	json_decref(body);
	if (api_accept(r, rc, &rq, err, id))
		return MHD_YES;
	if (!vmrund_wait(r->d, id, clock_mono_ms() + (int64_t)r->d->cfg.wait_max_s * 1000))
		return http_error(r, 504, 0, "run %s has not ended in %u s; GET /v1/runs/%s has it", id,
				  r->d->cfg.wait_max_s, id);
	struct store_run run;
	int found = vmrund_get_run_fetched(r->d, id, &run, err, sizeof(err));
	if (found != 1)
		return http_error(r, 500, 0, "%s", found < 0 ? err : "the run vanished");
	json_t *result = spool_result_parse(run.result);
	char path[PATH_MAX], *output[2];
	vmrund_run_path(r->d, id, SPOOL_OUTPUT, path, sizeof(path));
	spool_output_text(path, output);
	enum MHD_Result res;
	if (!result)
		res = http_error(r, 500, 0, "run %s ended %s: %s", id, store_state_name(run.state), run.message);
	else
		res = http_json(r, 200,
				piston_response(rt, result, output[0] && output[1] ? (const char *const *)output : NULL));
	free(output[0]);
	free(output[1]);
	json_decref(result);
	store_run_free(&run);
	return res;
}

/* Piston's execute always waits: one of the tenant's places for its
 * time, taken before the run is queued. */
static enum MHD_Result execute(struct http_req *r)
{
	if (!http_stream_begin(r))
		return MHD_YES;
	enum MHD_Result rc = execute_and_wait(r);
	vmrund_stream_end(r->d, (unsigned)r->tenant);
	return rc;
}

enum MHD_Result api_piston(struct http_req *r, const char *p)
{
	if (!strcmp(p, "/runtimes"))
		return strcmp(r->method, "GET") ? http_error(r, 405, 0, "only GET here")
						: http_json(r, 200, piston_runtimes(r->d->rts, r->d->nrts));
	if (!strcmp(p, "/connect"))
		return api_piston_connect(r);
	if (!strcmp(p, "/execute"))
		return strcmp(r->method, "POST") ? http_error(r, 405, 0, "only POST here") : execute(r);
	return http_error(r, 404, 0, "no such endpoint: /api/v2%.200s", p);
}
