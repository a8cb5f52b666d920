/* The two answers of the native API that are streams rather than
 * buffers: a run's output as Server-Sent Events while it runs, and a tar
 * of its kept artifacts. */
#ifndef VMRUND_STREAM_H
#define VMRUND_STREAM_H

#include <microhttpd.h>

#include "http.h"
#include "store.h"

/* GET /v1/runs/ID/output: text/event-stream. Each piece of output is an
 * event named by its stream, its data {"stage": "compile"|"run", "text":
 * "..."} (invalid UTF-8 as U+FFFD); when the run has ended, one "end"
 * event {"state": "..."}; a comment every 10 s of silence. A run that
 * ended before the stream began replays its result's output. */
enum MHD_Result stream_output(struct http_req *r, const char *id);

/* GET /v1/runs/ID/artifacts.tar: a POSIX pax archive (host/vmrund/tar.h) of the files the
 * run's result lists, read beneath dir. */
enum MHD_Result stream_tar(struct http_req *r, const struct store_run *run, const char *dir);

#endif
