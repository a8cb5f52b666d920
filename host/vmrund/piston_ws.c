/* Piston's interactive WebSocket, its messages (piston.h): what a
 * client's message asks, and Piston's names for close codes and signals.
 * Pure; api_piston_ws.c holds the connection. */
#include "piston.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *piston_ws_reason(unsigned code)
{
	switch (code) {
	case PISTON_WS_ALREADY:
		return "Already Initialized";
	case PISTON_WS_INIT_TIMEOUT:
		return "Initialization Timeout";
	case PISTON_WS_ERROR:
		return "Notified Error";
	case PISTON_WS_NOT_YET:
		return "Not yet initialized";
	case PISTON_WS_STDIN_ONLY:
		return "Can only write to stdin";
	case PISTON_WS_BAD_SIGNAL:
		return "Invalid signal";
	case PISTON_WS_DONE:
		return "Job Completed";
	}
	return "";
}

/* Piston's table (api/src/globals.js): Linux's names for 1 to 31, then
 * SIGRTMIN (34) and up as SIGRTMIN+k to 49, and SIGRTMAX-k from 50. */
void piston_signal_name(int n, char out[16])
{
	const char *abbrev = n >= 1 && n <= 31 ? sigabbrev_np(n) : NULL;
	if (abbrev)
		snprintf(out, 16, "SIG%s", abbrev);
	else if (n == 34)
		snprintf(out, 16, "SIGRTMIN");
	else if (n > 34 && n < 50)
		snprintf(out, 16, "SIGRTMIN+%d", n - 34);
	else if (n >= 50 && n < 64)
		snprintf(out, 16, "SIGRTMAX-%d", 64 - n);
	else if (n == 64)
		snprintf(out, 16, "SIGRTMAX");
	else
		out[0] = '\0';
}

/* The number of Piston's signal name, or 0. */
static int signal_number(const char *name)
{
	char known[16];
	for (int n = 1; n <= 64; n++) {
		piston_signal_name(n, known);
		if (known[0] && !strcmp(known, name))
			return n;
	}
	return 0;
}

static void close_with(struct piston_ws_msg *m, unsigned code)
{
	m->ask = PISTON_ASK_CLOSE;
	m->code = code;
}

void piston_ws_decide(const char *text, size_t len, bool initialized, struct piston_ws_msg *m)
{
	json_error_t e;
	memset(m, 0, sizeof(*m));
	m->msg = json_loadb(text, len, JSON_DECODE_ANY, &e);
	if (!m->msg) {
		m->ask = PISTON_ASK_ERROR;
		snprintf(m->err, sizeof(m->err), "%s", e.text);
		return;
	}
	const char *type = json_string_value(json_object_get(m->msg, "type"));
	if (!type) {
		m->ask = PISTON_ASK_NOTHING;
		return;
	}
	if (!strcmp(type, "init")) {
		if (initialized)
			close_with(m, PISTON_WS_ALREADY);
		else
			m->ask = PISTON_ASK_INIT;
		return;
	}
	bool data = !strcmp(type, "data");
	if (!data && strcmp(type, "signal")) {
		m->ask = PISTON_ASK_NOTHING;
		return;
	}
	if (!initialized) {
		close_with(m, PISTON_WS_NOT_YET);
		return;
	}
	if (data) {
		const json_t *d = json_object_get(m->msg, "data");
		if (strcmp(json_string_value(json_object_get(m->msg, "stream")) ?: "", "stdin")) {
			close_with(m, PISTON_WS_STDIN_ONLY);
		} else if (!json_is_string(d)) {
			/* Node's write() throws on it, and Piston reports the throw */
			m->ask = PISTON_ASK_ERROR;
			snprintf(m->err, sizeof(m->err), "data must be a string");
		} else {
			m->ask = PISTON_ASK_STDIN;
			m->data = json_string_value(d);
			m->len = json_string_length(d);
		}
		return;
	}
	const char *name = json_string_value(json_object_get(m->msg, "signal"));
	if (!name || !(m->signo = signal_number(name)))
		close_with(m, PISTON_WS_BAD_SIGNAL);
	else
		m->ask = PISTON_ASK_SIGNAL;
}
