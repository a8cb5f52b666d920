/* A sandbox's checkpoints as vmrund uses them (sandboxes.h): found for a
 * fork or a verification run (the tenant's, on this node or in the
 * snapshot dir), and checked
 * against an approval's expect_digest by the digest their supervisor
 * kept. */
#include "sandboxes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "run_pause.h"

_Static_assert(RUN_CHECKPOINT_SANDBOX_MAX == STORE_ID_LEN, "a checkpoint's sandbox is named by its store id");

struct vmrund_answer vmrund_checkpoint_expect(const char *dir, const char *expect)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/" RUN_CHECKPOINT_META, dir);
	json_t *m = json_load_file(path, 0, NULL);
	const char *digest = json_string_value(json_object_get(m, "digest"));
	bool complete = json_is_true(json_object_get(m, "complete"));
	struct vmrund_answer a = vmrund_answer_of(0, 0, "ok");
	if (!digest)
		a = vmrund_answer_of(409, 0, "expect_digest: the checkpoint's change has no digest (it could not be read "
					     "when the checkpoint was taken)");
	else if (!complete)
		a = vmrund_answer_of(409, 0, "expect_digest: the checkpoint's change is not complete (its diff skipped "
					     "entries), so no digest can bind it");
	else if (strcmp(digest, expect))
		a = vmrund_answer_of(409, 0, "expect_digest: the checkpoint's change is %s, not the one approved (%s)",
				     digest, expect);
	json_decref(m);
	return a;
}

int vmrund_checkpoint_dir(const struct vmrund *d, const char *id, const char *name, char *out, size_t len)
{
	char sdir[PATH_MAX];
	vmrund_sbx_shared(d, id, sdir, sizeof(sdir));
	if (!sdir[0])
		vmrund_sbx_dir(d, id, sdir, sizeof(sdir));
	return sdir[0] && (size_t)snprintf(out, len, "%s/" RUN_CHECKPOINTS_DIR "/%s", sdir, name) < len ? 0 : -1;
}

bool vmrund_checkpoint_newest(const struct vmrund *d, const char *id, char name[RUN_CHECKPOINT_NAME_MAX + 1])
{
	char top[PATH_MAX], path[PATH_MAX + 512];
	vmrund_sbx_shared(d, id, top, sizeof(top));
	if (!top[0] || strlen(top) + sizeof("/" RUN_CHECKPOINTS_DIR) > sizeof(top))
		return false;
	strcat(top, "/" RUN_CHECKPOINTS_DIR);
	DIR *dir = opendir(top);
	json_int_t newest = -1;
	for (struct dirent *e; dir && (e = readdir(dir));) {
		if (!run_checkpoint_name_ok(e->d_name))
			continue;   /* ".used-NAME", a checkpoint being made */
		snprintf(path, sizeof(path), "%s/%.64s/" RUN_CHECKPOINT_META, top, e->d_name);
		json_t *m = json_load_file(path, 0, NULL);
		json_int_t at = json_integer_value(json_object_get(m, "created_ms"));
		json_decref(m);
		if (m && at > newest) {
			newest = at;
			snprintf(name, RUN_CHECKPOINT_NAME_MAX + 1, "%.64s", e->d_name);
		}
	}
	if (dir)
		closedir(dir);
	return newest >= 0;
}

struct vmrund_answer vmrund_checkpoint_of(struct vmrund *d, unsigned tenant, const char *from, char *dir, size_t len,
					  json_t **request)
{
	char id[RUN_CHECKPOINT_SANDBOX_MAX + 1];
	const char *name;
	if (request)
		*request = NULL;
	if (!run_checkpoint_ref(from, id, &name))
		return vmrund_answer_of(400, 0, "from_checkpoint: \"SANDBOX_ID/NAME\"");
	struct store_sandbox sb;
	char err[300];
	/* under the lock, as every use of the store: two forks made at once
	 * (a judge's tests, two at a time) read it from two threads */
	int found = vmrund_sbx_get(d, d->ts.t[tenant].name, id, &sb, err, sizeof(err));
	if (found < 0)
		return vmrund_answer_of(503, 2, "the store: %s", err);
	if (!found)
		return vmrund_answer_of(404, 0, "no sandbox %s", id);
	struct vmrund_answer a = vmrund_answer_of(0, 0, "ok");
	/* in a snapshot dir, which every node mounts, any node uses them */
	bool here = d->cfg.snapshot_dir[0] || vmrund_sbx_here(d, id);
	if (!here)
		a = vmrund_answer_of(409, 0, "sandbox %s is %s on node %s: its checkpoints are used where they are", id,
				     store_sbx_state_name(sb.state) ?: "?", sb.node);
	else if (vmrund_checkpoint_dir(d, id, name, dir, len) || access(dir, F_OK) < 0)
		a = vmrund_answer_of(404, 0, "sandbox %s has no checkpoint %s", id, name);
	else if (request && !(*request = sb.request ? json_loads(sb.request, 0, NULL) : NULL))
		a = vmrund_answer_of(500, 0, "sandbox %s: its request cannot be read", id);
	store_sandbox_free(&sb);
	return a;
}

struct vmrund_answer vmrund_run_checkpoint(struct vmrund *d, unsigned tenant, struct run_spec *rq)
{
	char dir[PATH_MAX], image[PATH_MAX + 64];
	struct vmrund_answer a = vmrund_checkpoint_of(d, tenant, rq->from_checkpoint, dir, sizeof(dir), NULL);
	if (a.status)
		return a;
	snprintf(image, sizeof(image), "%s/" RUN_CHECKPOINT_IMAGE, dir);
	struct stat st;
	if (stat(image, &st) < 0)
		return vmrund_answer_of(404, 0, "checkpoint %s: its workspace: %s", rq->from_checkpoint, strerror(errno));
	uint64_t mib = ((uint64_t)st.st_size + (1u << 20) - 1) >> 20;
	if (rq->disk_mib && rq->disk_mib != mib)
		return vmrund_answer_of(400, 0, "limits.disk_mib: a run from a checkpoint has its workspace's disk (%llu MiB)",
					(unsigned long long)mib);
	if (rq->expect_digest[0] && (a = vmrund_checkpoint_expect(dir, rq->expect_digest)).status)
		return a;
	rq->disk_mib = mib;
	/* in a snapshot dir any node reads it: the run goes to whichever node
	 * claims it, and no node's death strands it */
	if (!d->cfg.snapshot_dir[0])
		snprintf(rq->checkpoint_node, sizeof(rq->checkpoint_node), "%s", d->node);
	return a;
}
