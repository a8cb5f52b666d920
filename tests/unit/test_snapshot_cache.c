/* The snapshot cache (host/run/snapshot_cache.c) without KVM: the key changes
 * with every fact it is made of and with nothing else, the cache directory
 * follows its rules (VMRUN_CACHE only for a real uid of 0), and a snapshot
 * is made, found, replaced and discarded whole, in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "snapshot_cache.h"

static struct snapshot_facts base_facts(void)
{
	struct snapshot_file_id id = { .dev = 2049, .ino = 1000, .size = 4096, .mtime_sec = 1700000000,
				       .mtime_nsec = 5, .ctime_sec = 1700000001, .ctime_nsec = 6 };
	struct snapshot_facts f = { .vmm = id, .kernel = id, .rootfs = id, .memory_mib = 256, .cpus = 1,
				    .proto_version = 3, .cpu_flags = 0x1234 };
	f.kernel.ino = 1001;
	f.rootfs.ino = 1002;
	return f;
}

/* Equal facts, equal keys; a change in any one field, another key. */
static void key_follows_every_fact(void **state)
{
	(void)state;
	struct snapshot_facts a = base_facts(), b = base_facts();
	assert_true(snapshot_key(&a) == snapshot_key(&b));
	struct snapshot_file_id *files[] = { &b.vmm, &b.kernel, &b.rootfs };
	uint64_t seen[64];
	unsigned n = 0;
	seen[n++] = snapshot_key(&a);
	for (size_t i = 0; i < 3; i++) {
		int64_t *t[] = { &files[i]->mtime_sec, &files[i]->mtime_nsec, &files[i]->ctime_sec, &files[i]->ctime_nsec };
		uint64_t *u[] = { &files[i]->dev, &files[i]->ino, &files[i]->size };
		for (size_t k = 0; k < 4; k++) {
			(*t[k])++;
			seen[n++] = snapshot_key(&b);
			(*t[k])--;
		}
		for (size_t k = 0; k < 3; k++) {
			(*u[k])++;
			seen[n++] = snapshot_key(&b);
			(*u[k])--;
		}
	}
	b.memory_mib = 512;
	seen[n++] = snapshot_key(&b);
	b = a;
	b.cpus = 2;
	seen[n++] = snapshot_key(&b);
	b = a;
	b.proto_version = 4;
	seen[n++] = snapshot_key(&b);
	b = a;
	b.cpu_flags = 0x1235;
	seen[n++] = snapshot_key(&b);
	b = a;
	/* the same facts again: the first key */
	assert_true(snapshot_key(&b) == seen[0]);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			if (seen[i] == seen[j])
				fail_msg("changes %u and %u give the same key", i, j);
	/* a kernel and a root image swapped are other facts */
	b.kernel = a.rootfs;
	b.rootfs = a.kernel;
	assert_true(snapshot_key(&b) != seen[0]);
}

static void key_text_is_16_hex_digits(void **state)
{
	(void)state;
	char t[SNAPSHOT_KEY_CHARS + 1];
	snapshot_key_text(0xab, t);
	assert_string_equal(t, "00000000000000ab");
	snapshot_key_text(UINT64_MAX, t);
	assert_string_equal(t, "ffffffffffffffff");
	/* FNV-1a's own test vector: "a" */
	assert_true(snapshot_fnv1a(SNAPSHOT_FNV_BASIS, "a", 1) == 0xaf63dc4c8601ec8cull);
}

/* The first flags line counts, not the name of the field around it. */
static void cpu_flags(void **state)
{
	(void)state;
	uint64_t a = snapshot_cpu_flags_text("processor\t: 0\nflags\t\t: fpu vme sse2\nbugs\t: x\n"
					     "processor\t: 1\nflags\t\t: fpu\n");
	assert_true(a != 0);
	assert_true(a == snapshot_cpu_flags_text("flags : fpu vme sse2"));
	assert_true(a != snapshot_cpu_flags_text("flags\t\t: fpu vme sse2 avx\n"));
	assert_true(snapshot_cpu_flags_text("processor : 0\nflagsx : fpu\n") == 0);
	assert_true(snapshot_cpu_flags_text("") == 0);
}

static int choose(uid_t ruid, uid_t euid, const char *cache, const char *xdg, const char *home, char *dir,
		  char *err)
{
	struct snapshot_env e = { ruid, euid, cache, xdg, home };
	err[0] = '\0';
	return snapshot_cache_choose(&e, dir, PATH_MAX, err, 512);
}

/* snapshot_scope = tenant in vmrund: each tenant's runs restore from a
 * cache of that tenant's own, which the worker's VMRUN_CACHE names; no
 * two tenants share a directory, and none is the shared one. */
static void tenant_scope(void **state)
{
	(void)state;
	char root[PATH_MAX], dir[PATH_MAX], other[PATH_MAX], err[512];
	assert_int_equal(snapshot_cache_tenant(SNAPSHOT_SYSTEM_CACHE, "alice", root, sizeof(root), err, sizeof(err)), 0);
	assert_string_equal(root, "/var/cache/vmrun/tenants/alice");
	assert_int_equal(choose(0, 0, root, NULL, NULL, dir, err), 0);
	assert_string_equal(dir, "/var/cache/vmrun/tenants/alice/snapshots");
	assert_int_equal(snapshot_cache_tenant(SNAPSHOT_SYSTEM_CACHE, "bob", root, sizeof(root), err, sizeof(err)), 0);
	assert_int_equal(choose(0, 0, root, NULL, NULL, other, err), 0);
	assert_string_equal(other, "/var/cache/vmrun/tenants/bob/snapshots");
	assert_string_not_equal(dir, other);
	assert_int_equal(choose(0, 0, NULL, NULL, NULL, other, err), 0);   /* shared */
	assert_string_not_equal(dir, other);
	/* the same facts give the same key, so the directory alone keeps
	 * two tenants' snapshots apart */
	struct snapshot_facts f = { .memory_mib = 256, .cpus = 1 };
	struct snapshot_slot a, b;
	assert_int_equal(snapshot_slot_init(&a, dir, &f, err, sizeof(err)), 0);
	assert_int_equal(snapshot_slot_init(&b, other, &f, err, sizeof(err)), 0);
	assert_string_equal(a.key, b.key);
	assert_string_not_equal(a.path, b.path);
	assert_string_equal(a.path + strlen(a.path) - SNAPSHOT_KEY_CHARS, a.key);
	assert_int_equal(strncmp(a.path, "/var/cache/vmrun/tenants/alice/snapshots/", 41), 0);
	/* names that are not one harmless component */
	const char *bad[] = { "", ".", "..", "a/b", "../x", "a b", "a\nb", "\xc3\xa9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (snapshot_cache_tenant(SNAPSHOT_SYSTEM_CACHE, bad[i], root, sizeof(root), err, sizeof(err)) != -1)
			fail_msg("tenant \"%s\" was taken", bad[i]);
		assert_non_null(strstr(err, "not a name for a snapshot directory"));
	}
	/* a path too long is refused, not cut */
	char big[PATH_MAX];
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(snapshot_cache_tenant(big, "alice", root, sizeof(root), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "path too long"));
}

static void directory_rules(void **state)
{
	(void)state;
	char dir[PATH_MAX], err[512];
	/* VMRUN_CACHE: a real uid of 0 only */
	assert_int_equal(choose(0, 0, "/srv/c", "/x", "/h", dir, err), 0);
	assert_string_equal(dir, "/srv/c/snapshots");
	assert_int_equal(choose(1000, 0, "/srv/c", "/x", "/h", dir, err), 0);
	assert_string_equal(dir, SNAPSHOT_SYSTEM_CACHE "/snapshots");
	assert_int_equal(choose(1000, 1000, "/srv/c", "/x", "/h", dir, err), 0);
	assert_string_equal(dir, "/x/vmrun/snapshots");
	/* root without it, or with it empty */
	assert_int_equal(choose(0, 0, NULL, "/x", "/h", dir, err), 0);
	assert_string_equal(dir, "/var/cache/vmrun/snapshots");
	assert_int_equal(choose(0, 0, "", "/x", "/h", dir, err), 0);
	assert_string_equal(dir, "/var/cache/vmrun/snapshots");
	assert_int_equal(choose(0, 0, "rel", NULL, NULL, dir, err), -1);
	assert_non_null(strstr(err, "VMRUN_CACHE rel: not an absolute path"));
	/* a user: XDG_CACHE_HOME when absolute, else HOME */
	assert_int_equal(choose(1000, 1000, NULL, "rel", "/home/u", dir, err), 0);
	assert_string_equal(dir, "/home/u/.cache/vmrun/snapshots");
	assert_int_equal(choose(1000, 1000, NULL, NULL, "/home/u", dir, err), 0);
	assert_string_equal(dir, "/home/u/.cache/vmrun/snapshots");
	assert_int_equal(choose(1000, 1000, NULL, NULL, NULL, dir, err), -1);
	assert_non_null(strstr(err, "no cache directory"));
	assert_null(strchr(err, '\n'));
}

struct fx {
	char dir[64], cache[128];
	struct snapshot_slot s;
	char err[512];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_snapshot_cache.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->cache, sizeof(f->cache), "%s/a/b/snapshots", f->dir);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("VMRUN_CACHE");
	free(f);
	return 0;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/* The cache directory is made with 0700 levels (as root through
 * VMRUN_CACHE, else through HOME), and a snapshot goes in whole. */
static void make_find_replace_discard(void **state)
{
	struct fx *f = *state;
	char home[128], dir[PATH_MAX], want[PATH_MAX];
	if (getuid() == 0) {
		snprintf(home, sizeof(home), "%s/a/b", f->dir);
		setenv("VMRUN_CACHE", home, 1);
		snprintf(want, sizeof(want), "%s/snapshots", home);
	} else if (geteuid() != 0) {
		snprintf(home, sizeof(home), "%s/a", f->dir);
		setenv("HOME", home, 1);
		unsetenv("XDG_CACHE_HOME");
		snprintf(want, sizeof(want), "%s/.cache/vmrun/snapshots", home);
	} else {
		skip();
	}
	assert_int_equal(snapshot_cache_dir(dir, sizeof(dir), f->err, sizeof(f->err)), 0);
	assert_string_equal(dir, want);
	assert_int_equal(mode_of(dir), 0700);
	assert_int_equal(mode_of(home), 0700);

	struct snapshot_facts facts = base_facts();
	assert_int_equal(snapshot_slot_init(&f->s, dir, &facts, f->err, sizeof(f->err)), 0);
	assert_int_equal(strlen(f->s.key), SNAPSHOT_KEY_CHARS);
	assert_false(snapshot_exists(&f->s));
	assert_int_equal(snapshot_lock(&f->s, -1, 1000, f->err, sizeof(f->err)), 0);

	/* a second taker waits, then gives up in one line */
	struct snapshot_slot other;
	assert_int_equal(snapshot_slot_init(&other, dir, &facts, f->err, sizeof(f->err)), 0);
	assert_int_equal(snapshot_lock(&other, -1, 50, f->err, sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, "gave up waiting"));

	/* a vmm that wrote no memory file: refused, nothing in place */
	assert_int_equal(snapshot_tmp_make(&f->s, f->err, sizeof(f->err)), 0);
	write_file(f->s.tmp, SNAPSHOT_STATE, "state");
	assert_int_equal(snapshot_commit(&f->s, f->err, sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, "no memory file"));
	char tmp[sizeof(f->s.tmp)];
	snprintf(tmp, sizeof(tmp), "%s", f->s.tmp);
	snapshot_tmp_remove(&f->s);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_false(snapshot_exists(&f->s));
	/* marked, so that later runs do not each try again */
	char why[128];
	assert_false(snapshot_failed(&f->s, why, sizeof(why)));
	assert_int_equal(snapshot_mark_failed(&f->s, "vmm: snapshot: no agent\nsecond line"), 0);
	assert_true(snapshot_failed(&f->s, why, sizeof(why)));
	assert_string_equal(why, "vmm: snapshot: no agent");

	/* whole: in place, 0755 with 0644 files */
	assert_int_equal(snapshot_tmp_make(&f->s, f->err, sizeof(f->err)), 0);
	write_file(f->s.tmp, SNAPSHOT_STATE, "state");
	write_file(f->s.tmp, SNAPSHOT_MEMORY, "memory");
	assert_int_equal(snapshot_commit(&f->s, f->err, sizeof(f->err)), 0);
	assert_true(snapshot_exists(&f->s));
	assert_int_equal(mode_of(f->s.path), 0755);
	snprintf(tmp, sizeof(tmp), "%s/" SNAPSHOT_MEMORY, f->s.path);
	assert_int_equal(mode_of(tmp), 0644);
	assert_string_equal(f->s.tmp, "");
	assert_false(snapshot_failed(&f->s, why, sizeof(why)));   /* made: the mark goes */

	/* replaced by a new one */
	assert_int_equal(snapshot_tmp_make(&f->s, f->err, sizeof(f->err)), 0);
	write_file(f->s.tmp, SNAPSHOT_STATE, "state2");
	write_file(f->s.tmp, SNAPSHOT_MEMORY, "memory2");
	assert_int_equal(snapshot_commit(&f->s, f->err, sizeof(f->err)), 0);
	snapshot_unlock(&f->s);
	struct stat st;
	snprintf(tmp, sizeof(tmp), "%s/" SNAPSHOT_STATE, f->s.path);
	assert_int_equal(stat(tmp, &st), 0);
	assert_int_equal(st.st_size, 6);

	/* discarded: only the one found */
	assert_true(snapshot_exists(&other));
	assert_int_equal(snapshot_discard(&other, 1000, f->err, sizeof(f->err)), 0);
	assert_false(snapshot_exists(&f->s));
	assert_int_equal(snapshot_discard(&other, 1000, f->err, sizeof(f->err)), 0);   /* gone: harmless */
}

/* A directory others may write is no cache. */
static void writable_cache_refused(void **state)
{
	struct fx *f = *state;
	if (getuid() != 0)
		skip();
	char home[128], dir[PATH_MAX];
	snprintf(home, sizeof(home), "%s/w", f->dir);
	setenv("VMRUN_CACHE", home, 1);
	assert_int_equal(snapshot_cache_dir(dir, sizeof(dir), f->err, sizeof(f->err)), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(snapshot_cache_dir(dir, sizeof(dir), f->err, sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, "writable by it alone"));
}

/* The facts of real files: touching the root image is another key. */
static void gathered_facts(void **state)
{
	struct fx *f = *state;
	char cpuinfo[128], path[128];
	snprintf(cpuinfo, sizeof(cpuinfo), "%s/cpuinfo", f->dir);
	write_file(f->dir, "cpuinfo", "processor : 0\nflags : fpu sse2\n");
	write_file(f->dir, "vmm", "vmm");
	write_file(f->dir, "kernel", "kernel");
	write_file(f->dir, "rootfs", "rootfs");
	snprintf(path, sizeof(path), "%s/vmm", f->dir);
	char kpath[128], rpath[128];
	snprintf(kpath, sizeof(kpath), "%s/kernel", f->dir);
	snprintf(rpath, sizeof(rpath), "%s/rootfs", f->dir);
	int k = open(kpath, O_RDONLY | O_CLOEXEC), r = open(rpath, O_RDONLY | O_CLOEXEC);
	assert_true(k >= 0 && r >= 0);
	struct snapshot_facts a, b;
	assert_int_equal(snapshot_facts_gather(&a, path, k, r, 256, 1, cpuinfo, f->err, sizeof(f->err)), 0);
	assert_true(a.cpu_flags == snapshot_cpu_flags_text("flags : fpu sse2"));
	assert_int_equal(a.proto_version, PROTO_VERSION);
	assert_int_equal(snapshot_facts_gather(&b, path, k, r, 256, 1, cpuinfo, f->err, sizeof(f->err)), 0);
	assert_true(snapshot_key(&a) == snapshot_key(&b));
	struct timespec t[2] = { { 1000, 0 }, { 1000, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, rpath, t, 0), 0);
	assert_int_equal(snapshot_facts_gather(&b, path, k, r, 256, 1, cpuinfo, f->err, sizeof(f->err)), 0);
	assert_true(snapshot_key(&a) != snapshot_key(&b));
	assert_int_equal(snapshot_facts_gather(&b, "/nonexistent/vmm", k, r, 256, 1, cpuinfo, f->err, sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, "/nonexistent/vmm: No such file"));
	close(k);
	close(r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(key_follows_every_fact),
		cmocka_unit_test(key_text_is_16_hex_digits),
		cmocka_unit_test(cpu_flags),
		cmocka_unit_test(directory_rules),
		cmocka_unit_test(tenant_scope),
		T(make_find_replace_discard),
		T(writable_cache_refused),
		T(gathered_facts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
