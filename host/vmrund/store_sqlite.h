/* The SQLite store's insides, shared by its two files: the calls
 * (store_sqlite.c, the ops table) and the file's setup under them
 * (store_sqlite_file.c). Nothing else includes this; the daemon sees
 * only store.h. */
#ifndef VMRUN_STORE_SQLITE_H
#define VMRUN_STORE_SQLITE_H

#include <sqlite3.h>
#include <stddef.h>

#include "store.h"

/* A file just opened as db, made ready for the calls: WAL with
 * synchronous=FULL, a busy timeout, and the schema at this vmrund's
 * version (created, migrated, or checked; a newer one is refused).
 * Messages name path: 0, -1. */
int store_sqlite_setup(sqlite3 *db, const char *path, char *err, size_t errlen);

#endif
