/* The deadline for a request's head (request_head_timeout_s), for vmrund's
 * HTTP server (http.c): libmicrohttpd's own timeout is an idle one, which
 * a client that sends a byte at a time never reaches, so a thread of our
 * own shuts down every connection whose request's head is late. The
 * connections are watched from libmicrohttpd's callbacks. */
#ifndef VMRUND_GUARD_H
#define VMRUND_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct vmrund;
struct guard;

/* Start the guard's thread for d's server. NULL with a reason in err. */
struct guard *guard_start(struct vmrund *d, char *err, size_t errlen);

/* Stop the thread and free g (NULL: nothing); after the server, whose
 * connections have all closed. */
void guard_stop(struct guard *g);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION, cls the guard: an
 * accepted connection is watched from now, a closed one forgotten. */
void guard_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			 enum MHD_ConnectionNotificationCode what);

/* The head of the connection's request is whole (head), or its request
 * is over and the next one's head is awaited from now (!head). */
void guard_mark(struct guard *g, struct MHD_Connection *conn, bool head);

#endif
