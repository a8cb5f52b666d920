/* vmrund's one logger. Its lines go to stderr, which is the journal under
 * systemd; each starts "vmrund: ", added here and nowhere else. */
#ifndef VMRUND_SAY_H
#define VMRUND_SAY_H

/* One line: "vmrund: ", fmt's text, a newline. */
void vmrund_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
