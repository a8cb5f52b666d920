# vmrun: `make` builds the host binaries, `make guest` the guest images,
# `make check` runs every test, `make demo` the main job. check and demo
# install their Debian packages first (scripts/deps.sh), so either works as
# the first command on a fresh Debian 12 machine as root.

CC      ?= gcc
CLANG   ?= clang
BUILD   := build
# The system's programs first: what make deps installed from Debian is what
# the build and the tests are written against. A version manager's shims
# ahead of them on PATH (pyenv's python3 is a bash script that execs the
# interpreter) would give other versions, and make each of the tests'
# hundreds of python3 starts cost ten times the interpreter's own, inside
# the emulated KVM host most of all.
export PATH := /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$(PATH)
# A compiler cache in the shared cache (where the kernels and root images
# are): a fresh clone, as make check's in CI, compiles from it what an
# earlier clone compiled. Paths count relative to the tree, so clones at
# other paths share it. Unused where ccache is missing or the directory is
# not ours to write.
CCACHE_HOME := $(or $(VMRUN_CACHE),/var/cache/vmrun)/ccache
CCACHE  := $(shell mkdir -p $(CCACHE_HOME) 2>/dev/null && [ -w $(CCACHE_HOME) ] && command -v ccache)
ifneq ($(CCACHE),)
override CC    := $(CCACHE) $(CC)
override CLANG := $(CCACHE) $(CLANG)
export CCACHE_DIR := $(CCACHE_HOME)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
endif
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
VERSION := 0.1.0

# vmm's arch code is named by its arch (kvm_x86_64.c, fdt_aarch64.c): vmm is
# built of the arch-neutral files and this machine's. The aarch64 modules
# that need no KVM (the device tree, the Image header) are unit-tested and
# fuzzed on every host.
VMM_ARCH  := $(shell uname -m)
VMM_SRCS  := $(filter-out $(if $(filter aarch64,$(VMM_ARCH)),%_x86_64.c,%_aarch64.c),$(wildcard vmm/*.c))
VMM_OBJS  := $(VMM_SRCS:%.c=$(BUILD)/obj/%.o)
VMM_AARCH64_PURE := vmm/fdt_aarch64.c vmm/loader_aarch64.c
# libfdt writes aarch64's device tree.
VMM_LIBS  := -lseccomp $(if $(filter aarch64,$(VMM_ARCH)),-lfdt)
# The guest agent: a static musl binary. Its session logic and the wire
# format (guest-agent/proto.c, which vmrun compiles too) are also built for
# the host, for the unit tests.
AGENT_SRCS := $(wildcard guest-agent/*.c)
AGENT_LIB  := guest-agent/agent.c guest-agent/stage.c guest-agent/cgroup.c guest-agent/forward.c guest-agent/proto.c \
	guest-agent/proto_sandbox.c guest-agent/sandbox.c guest-agent/files.c
MUSL_CC    := musl-gcc -static $(CSTD) $(WARN) -O2 -idirafter /usr/include \
	-idirafter /usr/include/x86_64-linux-gnu
# vmrun: the CLI (host/cli/) over the run library (host/run/) and the wire
# format. The run library is also vmrund's and its worker's.
CLI_LIB   := host/cli/cli.c host/cli/cli_sandbox.c host/cli/cli_diff.c
HOST_LIB  := $(wildcard host/run/*.c)
HOST_SRCS := host/cli/main.c $(CLI_LIB) $(HOST_LIB) guest-agent/proto.c host/vmrund/sandbox_http.c
HOST_LIBS := -lext2fs -lcom_err -lseccomp -lidn2 -ljansson -lcrypto
# vmrun-proxy (host/proxy/): a run's egress proxy, over the policy
# modules of the run library (host/run/) it shares with vmrun; DNS by c-ares.
PROXY_SRCS := $(wildcard host/proxy/*.c)
PROXY_LIB  := $(filter-out host/proxy/main.c,$(PROXY_SRCS))
PROXY_SHARED := host/run/netpolicy.c host/run/proxy_wire.c host/run/errmsg.c
PROXY_LIBS := -lcares -lseccomp -lidn2 -lhttp_parser -lssl -lcrypto
# vmrund (host/vmrund/): the service and its modules; HTTP by libmicrohttpd, JSON by jansson, state in SQLite or
# PostgreSQL (libpq).
VMRUND_SRCS := $(wildcard host/vmrund/*.c)
VMRUND_LIB  := $(filter-out host/vmrund/main.c,$(VMRUND_SRCS))
VMRUND_LIBS := -lmicrohttpd -ljansson -lsqlite3 -lpq -lcurl -lcrypto -larchive
# vmrund-worker (host/worker/): one of vmrund's runs in a process of its
# own: the run library and the run directory's contract with vmrund
# (host/vmrund/spool.c), and nothing of the service.
WORKER_SRCS := host/worker/main.c host/vmrund/spool.c
# vmrund-sandbox (host/sandbox/): one sandbox's VM and its API on a Unix
# socket, in a process that outlives the vmrund that started it: the run
# library, sandbox mode's wire format, and vmrund's output records and
# event text (spool.c, sse.c, pending.c).
SANDBOX_SRCS := $(wildcard host/sandbox/*.c)
SANDBOX_LIB  := $(filter-out host/sandbox/main.c,$(SANDBOX_SRCS))
SANDBOX_OBJS := $(SANDBOX_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/host/vmrund/spool.o $(BUILD)/obj/host/vmrund/sse.o \
	$(BUILD)/obj/host/vmrund/pending.o $(BUILD)/obj/guest-agent/proto_sandbox.o
# Per-module flags, by the source's name: libpq's header, which Debian keeps
# in a directory of its own, for the PostgreSQL store (its three files) only.
VMRUND_CFLAGS_store_pg := -I/usr/include/postgresql
VMRUND_CFLAGS_store_pg_conn := $(VMRUND_CFLAGS_store_pg)
VMRUND_CFLAGS_store_pg_sandbox := $(VMRUND_CFLAGS_store_pg)
# Unit tests link every vmm module but main, the agent's library and vmrun's
# modules, built again with sanitizers.
VMM_LIB   := $(filter-out vmm/main.c,$(VMM_SRCS))
ASAN_OBJS := $(sort $(VMM_LIB:%.c=$(BUILD)/asan/%.o) $(VMM_AARCH64_PURE:%.c=$(BUILD)/asan/%.o) $(AGENT_LIB:%.c=$(BUILD)/asan/%.o) \
	$(HOST_LIB:%.c=$(BUILD)/asan/%.o) $(CLI_LIB:%.c=$(BUILD)/asan/%.o) $(VMRUND_LIB:%.c=$(BUILD)/asan/%.o) \
	$(PROXY_LIB:%.c=$(BUILD)/asan/%.o) $(SANDBOX_LIB:%.c=$(BUILD)/asan/%.o))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
# A unit test's own libraries, by its module's name: OpenSSL writes the
# ClientHellos that the SNI reader's test reads.
TEST_LIBS_tls_sni := -lssl -lcrypto
# libarchive reads back the artifacts' tar as an independent reader.
TEST_LIBS_tar := -larchive
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
PAYLOAD_SRCS := $(wildcard tests/payloads/*.S)
PAYLOADS  := $(PAYLOAD_SRCS:tests/payloads/%.S=$(BUILD)/payloads/%.elf)
BENCH_BINS := $(BUILD)/tests/bench_vmm

.PHONY: eval eval-short eval-judge eval-guest vmrund-test all deps guest kernel kernel-aarch64 aarch64 vm-test-aarch64 bench-boot-aarch64 rootfs-aarch64 rootfs rootfs-test unit payloads payload-test vm-test check demo stress-boots stress-runs \
	bench-vmm bench-boot bench-virtio bench-vmrun bench-sandbox bench-pause bench-vmrund bench-e2b bench-queue bench-workspace bench-net net-test clean fuzz \
	fuzz-smoke

# One step that fills the shared cache at a time (a kernel, a root image,
# arm64 packages): a kernel build takes every core, and the root images
# of both arches fetch into one directory of packages; make -j may start
# several at once. Steps that find their cache filled pass in moments.
CACHE_DIR  := $${VMRUN_CACHE:-/var/cache/vmrun}
CACHE_LOCK := mkdir -p $(CACHE_DIR) && flock $(CACHE_DIR)/.fill.lock

all: $(BUILD)/bin/vmm $(BUILD)/bin/vmrun $(BUILD)/bin/vmrun-proxy $(BUILD)/bin/vmrund $(BUILD)/bin/vmrund-worker \
	$(BUILD)/bin/vmrund-sandbox

deps:
	@./scripts/deps.sh

# A snapshot names the vmm build that wrote it: a hash of vmm's sources and
# of the wire format, in a header rewritten only when it changes.
VMM_BUILD_ID := $(shell cat $(sort $(wildcard vmm/*.c vmm/*.h)) guest-agent/proto.h | sha256sum | cut -c1-16)
$(BUILD)/gen/vmm_build_id.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define VMM_BUILD_ID "$(VMM_BUILD_ID)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:
$(BUILD)/obj/vmm/vm_snapshot.o $(BUILD)/asan/vmm/vm_snapshot.o $(BUILD)/obj/vmm/vm_pause.o $(BUILD)/asan/vmm/vm_pause.o: $(BUILD)/gen/vmm_build_id.h

$(BUILD)/obj/%.o: %.c $(wildcard vmm/*.h) guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent -I$(BUILD)/gen -DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@

# The headers each object includes are in its .d file (-MMD), so that a
# header's change rebuilds only what includes it (the sanitizer and arm64
# objects; a struct that changed under an object not rebuilt once broke an
# arm64 run in ways no test of the change itself showed).
$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -MMD -MP -Iguest-agent -I$(BUILD)/gen -Ihost/run -Ihost/vmrund -Ihost/proxy $(VMRUND_CFLAGS_$(notdir $*)) -c $< -o $@
-include $(ASAN_OBJS:.o=.d) $(wildcard $(BUILD)/aarch64/obj/*/*.d $(BUILD)/aarch64/obj/*/*/*.d)

# Keep the sanitizer objects between runs (make would delete them as intermediates).
.SECONDARY: $(ASAN_OBJS)

# The unit tests link against one archive of them: each takes only the
# objects it needs, instead of every object of every module.
ASAN_LIB := $(BUILD)/asan/libvmrun.a
$(ASAN_LIB): $(ASAN_OBJS)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/obj/host/%.o: host/%.c $(wildcard host/run/*.h host/cli/*.h host/proxy/*.h guest-agent/*.h) \
		host/vmrund/sandbox_http.h vmm/log.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent -Ihost/run -Ihost/vmrund -DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/obj/host/vmrund/%.o: host/vmrund/%.c $(wildcard host/run/*.h host/vmrund/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent -Ihost/run -Ihost/vmrund $(VMRUND_CFLAGS_$*) -DVMRUN_VERSION='"$(VERSION)"' \
		-c $< -o $@

$(BUILD)/bin/vmrund: $(BUILD)/obj/host/vmrund/main.o $(VMRUND_LIB:%.c=$(BUILD)/obj/%.o) \
		$(HOST_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/guest-agent/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(VMRUND_LIBS) $(HOST_LIBS) -pthread -o $@

$(BUILD)/obj/host/worker/%.o: host/worker/%.c $(wildcard host/run/*.h host/vmrund/spool.h host/vmrund/store.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent -Ihost/run -Ihost/vmrund -DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/bin/vmrund-worker: $(WORKER_SRCS:%.c=$(BUILD)/obj/%.o) $(HOST_LIB:%.c=$(BUILD)/obj/%.o) \
		$(BUILD)/obj/guest-agent/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(HOST_LIBS) -pthread -o $@

$(BUILD)/obj/guest-agent/proto.o: guest-agent/proto.c guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/guest-agent/proto_sandbox.o: guest-agent/proto_sandbox.c guest-agent/proto_sandbox.h guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/host/sandbox/%.o: host/sandbox/%.c $(wildcard host/sandbox/*.h host/run/*.h host/vmrund/spool.h \
		host/vmrund/sse.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent -Ihost/run -Ihost/vmrund -DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/bin/vmrund-sandbox: $(SANDBOX_OBJS) $(HOST_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/guest-agent/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -lmicrohttpd -lcrypto $(HOST_LIBS) -pthread -o $@

$(BUILD)/bin/vmrun: $(HOST_SRCS:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(HOST_LIBS) -o $@

$(BUILD)/bin/vmrun-proxy: $(PROXY_SRCS:%.c=$(BUILD)/obj/%.o) $(PROXY_SHARED:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(PROXY_LIBS) -o $@

# Static: vmrun execs it inside an empty pivot_root jail, with no dynamic
# loader or libraries there. libseccomp builds its per-thread filters.
$(BUILD)/bin/vmm: $(VMM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -static -pthread $^ $(VMM_LIBS) -o $@

# Test builds of vmm that differ only in vm.c, where a test hook is
# compiled in. vmm-forbidden: vCPU 0 makes one call its seccomp filter
# forbids, so tests can see the filter kill it (SIGSYS). vmm-stuck: vCPU 0
# ignores kicks and stops, like one that never leaves KVM_RUN, so tests can
# see vmm and vmrun end anyway. Only these binaries have hooks; no build has
# a way to turn the filters off.
VMM_HOOK_forbidden := -DVMM_TEST_HOOK_FORBIDDEN
VMM_HOOK_stuck     := -DVMM_TEST_HOOK_STUCK_VCPU

$(BUILD)/hooks/%/vm.o: vmm/vm.c $(wildcard vmm/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Iguest-agent $(VMM_HOOK_$*) -DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@

.SECONDARY: $(BUILD)/hooks/forbidden/vm.o $(BUILD)/hooks/stuck/vm.o

$(BUILD)/tests/vmm-%: $(filter-out $(BUILD)/obj/vmm/vm.o,$(VMM_OBJS)) $(BUILD)/hooks/%/vm.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -static -pthread $^ $(VMM_LIBS) -o $@

# ---- aarch64, cross-built on x86_64 ----------------------------------------
# vmm for aarch64, with Debian's cross compiler and the arm64 builds of
# libseccomp and libfdt (multiarch), static like the native one; its
# seccomp test build (vmm-forbidden); the arm64 guest kernel; and a test
# guest whose /init says hello, reads virtio-rng and powers off. They run
# on an aarch64 KVM host: the emulated one (tests/kvmhost/run-aarch64)
# where this machine is not one.
A64       := $(BUILD)/aarch64
A64_CC    := $(CCACHE) aarch64-linux-gnu-gcc
A64_SRCS  := $(filter-out %_x86_64.c,$(wildcard vmm/*.c))
A64_OBJS  := $(A64_SRCS:%.c=$(A64)/obj/%.o)
# The arm64 libraries and their headers, unpacked from Debian's arm64
# packages (scripts/arm64-debs.sh: nothing installed, no foreign dpkg arch).
A64_SYSROOT := $(A64)/sysroot
A64_LIBS  := -L$(A64_SYSROOT)/usr/lib/aarch64-linux-gnu -lseccomp -lfdt

# The arm64 libraries the cross builds link; the stamp names the list, so
# a tree whose sysroot lacks a package added here unpacks it again.
A64_DEBS := libseccomp-dev libseccomp2 libfdt-dev libfdt1 libcmocka-dev libcmocka0 libext2fs-dev comerr-dev \
	libidn2-dev libunistring-dev libjansson-dev libjansson4 libssl-dev libssl3
A64_UNPACKED := $(A64_SYSROOT)/.unpacked-$(shell echo $(A64_DEBS) | sha256sum | cut -c1-12)
$(A64_UNPACKED): scripts/arm64-debs.sh
	@$(CACHE_LOCK) ./scripts/arm64-debs.sh $(A64_SYSROOT) $(A64_DEBS) >/dev/null
	@touch $@
$(A64)/obj/%.o: %.c $(wildcard vmm/*.h) guest-agent/proto.h $(A64_UNPACKED)
	@mkdir -p $(dir $@)
	$(A64_CC) $(CSTD) $(WARN) $(CFLAGS) -MMD -MP -I$(A64_SYSROOT)/usr/include \
		-I$(A64_SYSROOT)/usr/include/aarch64-linux-gnu -Iguest-agent -Ihost/run -Ihost/vmrund -I$(BUILD)/gen \
		-DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@
$(A64)/obj/vmm/vm_snapshot.o $(A64)/obj/vmm/vm_pause.o: $(BUILD)/gen/vmm_build_id.h
$(A64)/hooks/%/vm.o: vmm/vm.c $(wildcard vmm/*.h) $(A64_UNPACKED)
	@mkdir -p $(dir $@)
	$(A64_CC) $(CSTD) $(WARN) $(CFLAGS) -I$(A64_SYSROOT)/usr/include -Iguest-agent $(VMM_HOOK_$*) \
		-DVMRUN_VERSION='"$(VERSION)"' -c $< -o $@
.SECONDARY: $(A64)/hooks/forbidden/vm.o

$(A64)/bin/vmm: $(A64_OBJS)
	@mkdir -p $(dir $@)
	$(A64_CC) $(CFLAGS) -static -pthread $^ $(A64_LIBS) -o $@
$(A64)/tests/vmm-%: $(filter-out $(A64)/obj/vmm/vm.o,$(A64_OBJS)) $(A64)/hooks/%/vm.o
	@mkdir -p $(dir $@)
	$(A64_CC) $(CFLAGS) -static -pthread $^ $(A64_LIBS) -o $@

# vmrun, static as vmm is: the aarch64 host's userland has no libraries.
# (The linker warns that getpwnam and friends want glibc's NSS modules at
# run time: with none there, vmrun still knows root, the emulated host's
# only user, by its uid.)
$(A64)/bin/vmrun: $(HOST_SRCS:%.c=$(A64)/obj/%.o)
	@mkdir -p $(dir $@)
	$(A64_CC) $(CFLAGS) -static $^ -L$(A64_SYSROOT)/usr/lib/aarch64-linux-gnu \
		-lext2fs -lcom_err -lseccomp -lidn2 -lunistring -ljansson -lcrypto -o $@

# The guest agent, static. Debian has no musl for arm64 cross builds;
# glibc's static libc serves (the agent needs no NSS: it names no user).
$(A64)/guest/agent: $(AGENT_SRCS) $(wildcard guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(A64_CC) -static $(CSTD) $(WARN) -O2 $(AGENT_SRCS) -o $@

# The default root image (python's, as on x86), from Debian's arm64
# packages, and its allowlist, where vmrun looks for them.
rootfs-aarch64: $(A64)/guest/agent
	@$(CACHE_LOCK) env ROOTFS_ARCH=arm64 ./rootfs/build.sh $(A64)/guest/runtimes/python.ext4 $(A64)/guest/agent rootfs/runtimes/python
	@ln -f $(A64)/guest/runtimes/python.ext4 $(A64)/guest/rootfs.ext4 && \
		cp $(A64)/guest/runtimes/python.programs $(A64)/guest/programs.txt

# The seccomp filters' unit test, for aarch64's syscall numbers. Debian
# ships cmocka for arm64 as a shared library only, so the test is linked
# dynamically and run through the arm64 loader with the libraries it needs
# copied beside it ($(A64)/lib): the aarch64 host's userland has none.
A64_LIBDIR := $(A64)/lib
$(A64)/tests/test_seccomp_filter: tests/unit/test_seccomp_filter.c $(filter-out $(A64)/obj/vmm/main.o,$(A64_OBJS)) \
		$(wildcard tests/common/*.h)
	@mkdir -p $(dir $@) $(A64_LIBDIR)
	$(A64_CC) $(CSTD) $(WARN) -O1 -g -I$(A64_SYSROOT)/usr/include -Ivmm -Iguest-agent -Itests/common \
		$(filter %.c %.o,$^) -Wl,-Bstatic $(A64_LIBS) -Wl,-Bdynamic -lcmocka -pthread -o $@
	@cp -L /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 /usr/aarch64-linux-gnu/lib/libc.so.6 \
		$(A64_SYSROOT)/usr/lib/aarch64-linux-gnu/libcmocka.so.0 $(A64_LIBDIR)/

$(A64)/tests/hello_init: tests/guest/hello_init.c
	@mkdir -p $(dir $@)
	$(A64_CC) $(CSTD) $(WARN) -O2 -static $< -o $@
# A root image of that /init alone (ext4, made by mke2fs -d, no mount).
$(A64)/tests/hello.ext4: $(A64)/tests/hello_init
	@rm -rf $@.d && mkdir -p $@.d/dev $@.d/proc $@.d/sys
	@cp $< $@.d/init
	@mke2fs -q -F -t ext4 -d $@.d $@.tmp 8M && mv $@.tmp $@ && rm -rf $@.d

kernel-aarch64:
	@$(CACHE_LOCK) ./kernel-config/build.sh --arch aarch64 $(A64)/guest/Image

aarch64: $(A64)/bin/vmm $(A64)/bin/vmrun $(A64)/tests/vmm-forbidden $(A64)/tests/test_seccomp_filter \
	$(A64)/tests/hello.ext4 kernel-aarch64 rootfs-aarch64

# The arm64 boot benchmark: vmm against QEMU's virt machine with KVM
# (Debian's arm64 qemu-system-aarch64, unpacked with its libraries, nothing
# installed), both booting the arm64 Image to its root-mount attempt on an
# aarch64 KVM host. Printed, not asserted (BENCHMARKS.md).
bench-boot-aarch64: $(A64)/bin/vmm kernel-aarch64
	@./tests/bench/qemu-aarch64.sh $(A64)/qemu
	@./scripts/on-kvm-host.sh --arch aarch64 --limit 900 bench-boot-aarch64 tests/bench/boot_aarch64.sh

# The aarch64 VM tests (boots to the root-mount attempt with 1 and 2
# vCPUs, the test guest from its disk, the seccomp filters) and the e2e
# subset through the arm64 vmrun, on an aarch64 KVM host (the emulated
# one here).
vm-test-aarch64: aarch64
	@./scripts/vm-lanes.sh "aarch64-vm aarch64-e2e"

# ---- guest images ----------------------------------------------------------
guest: kernel rootfs

# The evaluation's kernel (eval-guest) differs by two options: built in
# the same tree right after the guest's when the cache lacks the guest's.
kernel:
	@$(CACHE_LOCK) ./kernel-config/build.sh --also tests/eval/kernel-attack.config $(BUILD)/guest/vmlinux \
		$(BUILD)/guest/bzImage

$(BUILD)/guest/agent: $(AGENT_SRCS) $(wildcard guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(AGENT_SRCS) -o $@

# One read-only root image per runtime (rootfs/runtimes/NAME), and python's
# again as the default image, used without --runtime.
RUNTIMES := $(notdir $(wildcard rootfs/runtimes/*))
rootfs: $(BUILD)/guest/agent
	@for r in $(RUNTIMES); do \
		$(CACHE_LOCK) ./rootfs/build.sh $(BUILD)/guest/runtimes/$$r.ext4 $(BUILD)/guest/agent rootfs/runtimes/$$r || exit 1; \
	done
	@ln -f $(BUILD)/guest/runtimes/python.ext4 $(BUILD)/guest/rootfs.ext4 && \
		cp $(BUILD)/guest/runtimes/python.programs $(BUILD)/guest/programs.txt

# ---- tests -----------------------------------------------------------------
# A runtime image built twice into empty caches is byte-identical.
rootfs-test: rootfs
	@./tests/rootfs/reproducible.sh bash

$(BUILD)/tests/test_%: tests/unit/test_%.c $(ASAN_LIB) $(wildcard tests/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -Ivmm -Iguest-agent -Ihost/run -Ihost/cli -Ihost/vmrund -Ihost/proxy -Ihost/sandbox -Itests/common \
		$< $(ASAN_LIB) \
		-lcmocka $(HOST_LIBS) $(VMRUND_LIBS) $(PROXY_LIBS) -lfdt $(TEST_LIBS_$*) -pthread -o $@

# test_run_net starts the real proxy, found next to vmm in $(BUILD)/bin
$(BUILD)/tests/test_run_net: $(BUILD)/bin/vmrun-proxy

unit: $(UNIT_BINS) $(BUILD)/bin/vmrun
	@./tests/run-all.sh unit $(UNIT_BINS)
	@timeout -k 5 120 ./tests/e2e/sudo_paths.sh   # vmrun's check stage for a sudo caller: no VM

$(BUILD)/payloads/%.elf: tests/payloads/%.S tests/payloads/payload.ld
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $(BUILD)/payloads/$*.o
	ld -T tests/payloads/payload.ld -o $@ $(BUILD)/payloads/$*.o

payloads: $(PAYLOADS)

# Self-checking payloads run on any /dev/kvm that runs them (hardware or
# PVM), else on the emulated KVM host; the probe says which in one line.
# Every script runs under a limit (--limit, seconds, the emulated host's boot
# included) past which it is killed and fails: no hang reaches CI's timeout.
payload-test: all payloads $(BUILD)/tests/vmm-forbidden $(BUILD)/tests/vmm-stuck
	@./scripts/vm-lanes.sh payload

# Test programs for Linux guests: vtest runs inside the guest (static, musl),
# vsock_host is its host-side peer; vmm-forbidden is vmm with its seccomp test
# hook (below).
VM_TEST_BINS := $(BUILD)/tests/vtest $(BUILD)/tests/vsock_host $(BUILD)/tests/agent_client \
	$(BUILD)/tests/vmm-forbidden $(BUILD)/tests/vmm-stuck $(BUILD)/tests/two_runs

$(BUILD)/tests/vtest: tests/guest/vtest.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $< -o $@

$(BUILD)/tests/vsock_host: tests/vm/vsock_host.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 $< -o $@

$(BUILD)/tests/agent_client: tests/vm/agent_client.c host/run/session.c host/run/errmsg.c guest-agent/proto.c \
		$(wildcard host/run/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -Ihost/run -Iguest-agent $(filter %.c,$^) -o $@

# Two runs from one process, through the run library alone (tests/e2e/run.sh).
$(BUILD)/tests/two_runs: tests/vm/two_runs.c $(HOST_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/guest-agent/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -Ihost/run -Iguest-agent $^ $(HOST_LIBS) -pthread -o $@

# Linux guests: directly where the local KVM runs them, else on emulated
# KVM hosts, two side by side (scripts/vm-lanes.sh holds every suite's
# limit; scripts/on-kvm-host.sh probes and says where, in one line).
VM_SUITES_A := source e2e-warm jail agent net sandbox-session sandbox-pause judge0 virtio
VM_SUITES_B := e2e-cold snapshot runtimes boot sandbox vmrund vmrund-sandbox sandbox-cluster sandbox-e2b
vm-test: all payloads guest $(VM_TEST_BINS) $(PISTON_CLIENT) $(WS_CLIENT)
	@./scripts/vm-lanes.sh "$(VM_SUITES_A)" "$(VM_SUITES_B)"

# vmrun-proxy in its jail against the test's hosts in network namespaces
# (tests/net/lib.sh): no KVM needed.
net-test: all
	@timeout -k 5 300 ./tests/net/proxy.sh

# An existing Piston client, unchanged, for the Piston endpoint's test
# (tests/vmrund/vm.sh): piston-api-client from npm (no dependencies of its
# own; Node's fetch), kept in the cache so a clean clone fetches it once.
PISTON_CLIENT := $(BUILD)/npm/node_modules/piston-api-client/package.json
$(PISTON_CLIENT):
	@mkdir -p $(BUILD)/npm
	npm install --silent --no-save --no-audit --no-fund --prefer-offline \
		--cache $${VMRUN_CACHE:-/var/cache/vmrun}/npm --prefix $(BUILD)/npm piston-api-client@2.0.1
# ws, the WebSocket library Piston's own CLI uses (its ^7.5.3), for the
# test client of /api/v2/connect (tests/vmrund/piston_ws_client.js):
# Piston's CLI itself is not on npm.
WS_CLIENT := $(BUILD)/npm/node_modules/ws/package.json
$(WS_CLIENT): | $(PISTON_CLIENT)
	npm install --silent --no-save --no-audit --no-fund --prefer-offline \
		--cache $${VMRUN_CACHE:-/var/cache/vmrun}/npm --prefix $(BUILD)/npm piston-api-client@2.0.1 ws@7.5.10

# E2B's own SDK, unchanged, for the E2B API's test (tests/vmrund/e2b.sh):
# pinned, in a prefix of its own (npm prunes what one install does not
# name), kept in the cache so a clean clone fetches it once.
E2B_SDK := $(BUILD)/npm-e2b/node_modules/e2b/package.json
$(E2B_SDK):
	@mkdir -p $(BUILD)/npm-e2b
	npm install --silent --no-save --no-audit --no-fund --prefer-offline \
		--cache $${VMRUN_CACHE:-/var/cache/vmrun}/npm --prefix $(BUILD)/npm-e2b e2b@2.51.0
# The sandbox-e2b suite drives real sandboxes with it, on a KVM host.
vm-test: $(E2B_SDK)

# vmrund's API, scheduler and recovery with a stand-in worker: no KVM, here;
# then three nodes sharing a PostgreSQL server the test starts, and the
# store's conformance suite run against that server too.
vmrund-test: all $(BUILD)/tests/test_store $(WS_CLIENT) $(E2B_SDK)
	@timeout -k 5 300 ./tests/vmrund/api.sh
	@timeout -k 5 240 ./tests/vmrund/judge0.sh
	@timeout -k 5 180 ./tests/vmrund/e2b.sh
	@timeout -k 5 240 ./tests/vmrund/judge0_callback.sh
	@timeout -k 5 400 ./tests/vmrund/cluster.sh
	@timeout -k 5 300 ./tests/vmrund/store_pg.sh $(BUILD)/tests/test_store

# make check: the build with every core; the tests of this machine one
# after another, with the fuzzers' smoke run beside them on one core (the
# tests leave about one idle: vmrund's wait on its runs' clocks); then
# every suite that needs a KVM host in two lanes side by side (each suite
# in an emulated host of one vCPU: two cores busy); then the evaluation's
# judge. Each part's time is said in a line (where the minutes go; the VM
# suites one line each), then the total and whether the caches were warm.
# The first part to fail ends it.
CHECK_TESTS := unit vmrund-test net-test rootfs-test
# Each harness's time in make check: 20 of them one at a time take a
# little less than CHECK_TESTS take, so that no one waits for the other.
# make fuzz-smoke alone keeps FUZZ_SMOKE_TIME.
CHECK_FUZZ_TIME := 8
# The lanes, balanced by their suites' times on the emulated host.
CHECK_LANE_A := $(VM_SUITES_A) payload aarch64-vm aarch64-e2e
CHECK_LANE_B := eval-short $(VM_SUITES_B)
check:
	@start=$$(date +%s); st=0; ./scripts/deps.sh && mkdir -p $(BUILD) && \
	./scripts/cache-report.sh before $(BUILD)/.cache-before && \
	$(MAKE) --no-print-directory -j$$(nproc) all payloads guest aarch64 eval-guest $(BUILD)/tests/eval-extract \
		$(UNIT_BINS) $(FUZZ_BINS) $(VM_TEST_BINS) $(PISTON_CLIENT) $(WS_CLIENT) || st=$$?; \
	echo "check: build $$(( $$(date +%s) - start )) s, status $$st"; \
	fz=; if [ $$st -eq 0 ]; then \
		( t0=$$(date +%s); FUZZ_JOBS=1 $(MAKE) --no-print-directory fuzz-smoke FUZZ_SMOKE_TIME=$(CHECK_FUZZ_TIME) \
			>$(BUILD)/fuzz-smoke.log 2>&1; s=$$?; \
			echo "check: fuzz-smoke $$(( $$(date +%s) - t0 )) s, status $$s (beside the tests)" >>$(BUILD)/fuzz-smoke.log; \
			exit $$s ) & fz=$$!; \
	fi; \
	for t in $(CHECK_TESTS); do \
		[ $$st -eq 0 ] || break; \
		t0=$$(date +%s); $(MAKE) --no-print-directory $$t || st=$$?; \
		echo "check: $$t $$(( $$(date +%s) - t0 )) s, status $$st"; \
	done; \
	if [ -n "$$fz" ]; then \
		t0=$$(date +%s); wait $$fz; s=$$?; [ $$st -ne 0 ] || st=$$s; \
		cat $(BUILD)/fuzz-smoke.log; echo "check: waited $$(( $$(date +%s) - t0 )) s for fuzz-smoke"; \
	fi; \
	if [ $$st -eq 0 ]; then \
		t0=$$(date +%s); ./scripts/vm-lanes.sh "$(CHECK_LANE_A)" "$(CHECK_LANE_B)" || st=$$?; \
		echo "check: vm lanes $$(( $$(date +%s) - t0 )) s, status $$st"; \
	fi; \
	if [ $$st -eq 0 ]; then \
		t0=$$(date +%s); $(MAKE) --no-print-directory eval-judge EVAL_PROFILE=short || st=$$?; \
		echo "check: eval-judge $$(( $$(date +%s) - t0 )) s, status $$st"; \
	fi; \
	./scripts/cache-report.sh after $(BUILD)/.cache-before; \
	echo "check: $$(( $$(date +%s) - start )) s in all, status $$st"; exit $$st

# The corrupt-workspace case: the artifact extractor, built with the
# sanitizers so that a memory error on a hostile image ends its helper.
EVAL_EXTRACT_OBJS := $(sort $(HOST_LIB:%.c=$(BUILD)/asan/%.o) $(BUILD)/asan/guest-agent/proto.o)
$(BUILD)/tests/eval-extract: tests/eval/extract_corrupt.c $(EVAL_EXTRACT_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -Ihost/run -Iguest-agent $^ $(HOST_LIBS) -pthread -o $@

# The sandbox evaluation (tests/eval/): each case a real attempt through
# vmrun on a KVM host (the emulated one where needed), then the
# corrupt-workspace case here (no VM: the extractor's sandbox is this
# host's), judged from the structured evidence into
# $(BUILD)/eval/report.{json,md,html}; the judge fails unless every case was
# contained. make check runs the short profile (each case once, one round
# of load); make eval the full one (a minute of load at 4x the slots, and
# more deadline-ended runs for the destruction times' tail).
eval: EVAL_PROFILE := full
eval-short: EVAL_PROFILE := short
eval eval-short: all payloads guest eval-guest $(BUILD)/tests/eval-extract
	@./scripts/vm-lanes.sh eval-$(EVAL_PROFILE)
	@$(MAKE) --no-print-directory eval-judge EVAL_PROFILE=$(EVAL_PROFILE)

# The evaluation's part on this host: the corrupt-workspace cases (no VM),
# then the judge over every case recorded in $(BUILD)/eval.
EVAL_PROFILE ?= short
eval-judge: $(BUILD)/tests/eval-extract
	@images=$$(./scripts/e2fs-test-images.sh) && \
		timeout -k 5 600 ./tests/eval/corrupt_images.sh "$$images" $(BUILD)/eval/cases.jsonl $(EVAL_PROFILE)
	@python3 tests/eval/judge.py $(BUILD)/eval

# The evaluation's test-only guest, for its attacks from a compromised guest
# kernel: a kernel with /dev/mem (tests/eval/kernel-attack.config), and a
# copy of the root image whose agent keeps guest root, with the attack
# programs (tests/guest/ringattack.c, vsockattack.c) in /usr/bin. Never
# shipped: only the eval boots it, through vmrun's --kernel and --rootfs.
EVAL_GUEST := $(BUILD)/eval-guest
EVAL_ATTACKS := $(BUILD)/tests/ringattack $(BUILD)/tests/vsockattack
$(BUILD)/tests/agent-guest-root: $(AGENT_SRCS) $(wildcard guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(MUSL_CC) -DVMRUN_AGENT_GUEST_ROOT $(AGENT_SRCS) -o $@
$(BUILD)/tests/ringattack: tests/guest/ringattack.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) $< -o $@
$(BUILD)/tests/vsockattack: tests/guest/vsockattack.c guest-agent/proto.c guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(MUSL_CC) -Iguest-agent tests/guest/vsockattack.c guest-agent/proto.c -o $@
# And a guest whose agent forges its answers to file operations
# (tests/guest/files_forge.c in place of files.c), on the shipped kernel,
# for the sandbox cases: a guest directory of its own, as vmrund-sandbox
# takes one.
EVAL_FORGE := $(BUILD)/eval-forge
$(BUILD)/tests/agent-forge: $(filter-out guest-agent/files.c,$(AGENT_SRCS)) tests/guest/files_forge.c guest-agent/files.c \
		$(wildcard guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(MUSL_CC) -Iguest-agent $(filter-out guest-agent/files.c,$(AGENT_SRCS)) tests/guest/files_forge.c -o $@
eval-guest: guest $(BUILD)/tests/agent-guest-root $(BUILD)/tests/agent-forge $(EVAL_ATTACKS)
	@$(CACHE_LOCK) ./kernel-config/build.sh $(EVAL_GUEST)/vmlinux $(EVAL_GUEST)/bzImage tests/eval/kernel-attack.config
	@./tests/eval/attack_image.sh $(BUILD)/guest/rootfs.ext4 $(BUILD)/tests/agent-guest-root $(EVAL_GUEST) $(EVAL_ATTACKS)
	@./tests/eval/attack_image.sh $(BUILD)/guest/rootfs.ext4 $(BUILD)/tests/agent-forge $(EVAL_FORGE)
	@ln -sf ../guest/vmlinux $(EVAL_FORGE)/vmlinux

# The agent boot loop that measured the emulated host's hang rate (issue 11):
# STRESS_RUNS runs of `vmrun -- true`, each under a watchdog.
STRESS_RUNS ?= 100
stress-boots: all payloads guest
	@./scripts/on-kvm-host.sh --limit 1800 stress-boots tests/stress/agent-boots.sh $(STRESS_RUNS)
stress-runs: all payloads guest
	@./scripts/on-kvm-host.sh --limit 3600 stress-runs tests/stress/runs.sh $(STRESS_RUNS)

demo:
	@./scripts/deps.sh
	@$(MAKE) --no-print-directory all payloads guest
	@./scripts/on-kvm-host.sh --limit 900 demo scripts/demo.sh

$(BUILD)/tests/bench_vmm: tests/bench/bench_vmm.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -g $< -o $@

# vsock guest->host throughput and blk sequential read, printed not asserted.
bench-virtio: all payloads guest $(VM_TEST_BINS)
	@./scripts/on-kvm-host.sh --limit 900 bench-virtio tests/vm/virtio.sh --bench

# A sandbox: a command in it against a fresh restored run (target: <=
# 0.05x), files through its API, its start, the PSS of 10 idle ones.
bench-sandbox: all guest
	@./scripts/on-kvm-host.sh --limit 900 bench-sandbox tests/bench/sandbox.sh

# A sandbox's pause and resume: their times and what a pause writes, for
# 256 MiB and 1 GiB guests with 16 and 128 MiB touched, against creating
# it and repeating its setup (aim: resume <= 0.3x of that).
bench-pause: all guest
	@./scripts/on-kvm-host.sh --limit 1500 bench-pause tests/bench/pause.sh

# `vmrun -- true` end to end, phases from its JSON (target: <= 80 ms on a
# hardware KVM host).
bench-vmrun: all payloads guest
	@./scripts/on-kvm-host.sh --limit 900 bench-vmrun tests/bench/vmrun_true.sh

# Warm starts against cold boots: restore to HELLO, `vmrun -- true`, and
# the summed PSS of 4 concurrent VMs (target: HELLO <= 0.1x cold).
bench-snapshot: all payloads guest
	@./scripts/on-kvm-host.sh --limit 900 bench-snapshot tests/bench/snapshot.sh

# vmrund: API overhead (a request denied before any VM) and queue latency
# at 4x overload here, with no VM; runs per second at saturation where
# Linux guests boot.
# The same agent loop through E2B's SDK and through the native API, side
# by side (tests/bench/e2b.sh): the SDK's overhead as a ratio.
bench-e2b: all guest $(E2B_SDK)
	@./scripts/on-kvm-host.sh --limit 1500 bench-e2b tests/bench/e2b.sh

bench-vmrund: all payloads guest
	@./tests/bench/vmrund.py api
	@./tests/bench/vmrund.py overload
	@./scripts/on-kvm-host.sh --limit 1500 bench-vmrund tests/bench/vmrund.py saturation 8
	@./scripts/on-kvm-host.sh --limit 3000 bench-vmrund tests/bench/vmrund.py judge 100

# The queue alone (claims, no VM): SQLite, and 1 and 3 nodes on PostgreSQL.
$(BUILD)/tests/bench_queue: tests/bench/bench_queue.c $(VMRUND_LIB:%.c=$(BUILD)/obj/%.o) \
		$(HOST_LIB:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/guest-agent/proto.o
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -g -Ihost/run -Ihost/vmrund -Iguest-agent $^ $(VMRUND_LIBS) $(HOST_LIBS) -pthread -o $@

# The run's proxy against a direct connection: MiB/s and the added connect
# latency (targets >= 0.8x, <= 2 ms).
bench-net: all
	@./tests/bench/net_proxy.sh

bench-queue: all $(BUILD)/tests/bench_queue
	@./tests/bench/queue.sh

# The workspace image: 64 MiB with 100 files (target <= 10 ms).
BENCH_WS_SRCS := tests/bench/bench_workspace.c host/run/workspace.c host/run/caller.c host/run/errmsg.c
$(BUILD)/tests/bench_workspace: $(BENCH_WS_SRCS) host/run/workspace.h host/run/caller.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -Ihost/run $(BENCH_WS_SRCS) -lext2fs -lcom_err -o $@

bench-workspace: $(BUILD)/tests/bench_workspace
	@$(BUILD)/tests/bench_workspace $${TMPDIR:-/tmp}

bench-vmm: all payloads $(BENCH_BINS)
	@$(BUILD)/tests/bench_vmm $(BUILD)/bin/vmm $(BUILD)/payloads/reset.elf

# Boot to the root-mount attempt against QEMU microvm, on a KVM host that
# runs Linux guests (the emulated one when the local KVM cannot).
bench-boot: all payloads kernel
	@./scripts/on-kvm-host.sh --limit 900 bench-boot tests/bench/boot_vs_qemu.sh

clean:
	rm -rf $(BUILD)

# ---- fuzzing ----------------------------------------------------------------
# libFuzzer harnesses tests/fuzz/fuzz_*.c, built with clang from the vmm
# sources they need. fuzz-smoke runs each briefly, fuzz for FUZZ_TIME
# seconds; corpora, logs and crash artifacts stay under $(BUILD)/fuzz.
FUZZ_TIME       ?= 300
FUZZ_SMOKE_TIME ?= 20
FUZZ_CFLAGS     := $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Ivmm -Iguest-agent -Itests/common
FUZZ_BINS       := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LOADER_SRCS := vmm/loader_x86_64.c vmm/guest_mem.c vmm/log.c

$(BUILD)/fuzz/fuzz_loader: tests/fuzz/fuzz_loader.c $(FUZZ_LOADER_SRCS) $(wildcard vmm/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) tests/fuzz/fuzz_loader.c $(FUZZ_LOADER_SRCS) -o $@
$(BUILD)/fuzz/fuzz_loader_aarch64: tests/fuzz/fuzz_loader_aarch64.c vmm/loader_aarch64.c $(wildcard vmm/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) tests/fuzz/fuzz_loader_aarch64.c vmm/loader_aarch64.c -o $@

# The virtio harnesses: the ring walker alone, then each device over the
# transport (tests/common/fake_virtio.h plays the driver).
FUZZ_VQ_SRCS    := vmm/virtqueue.c vmm/guest_mem.c vmm/log.c
FUZZ_BLK_SRCS   := vmm/virtio_blk.c vmm/virtio_mmio.c $(FUZZ_VQ_SRCS)
# args.c (vsock reads a port with parse_u64) walks every device kind (device.c).
FUZZ_VSOCK_SRCS := vmm/virtio_vsock.c vmm/virtio_mmio.c vmm/event_loop.c vmm/args.c vmm/device.c vmm/virtio_blk.c \
	vmm/virtio_rng.c $(FUZZ_VQ_SRCS)

$(BUILD)/fuzz/fuzz_virtqueue: tests/fuzz/fuzz_virtqueue.c $(FUZZ_VQ_SRCS) $(wildcard vmm/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) tests/fuzz/fuzz_virtqueue.c $(FUZZ_VQ_SRCS) -o $@

# The snapshot state file's parser, with the arch's record table.
FUZZ_SNAP_SRCS := vmm/snapshot.c vmm/snapshot_x86_64.c
$(BUILD)/fuzz/fuzz_snapshot: tests/fuzz/fuzz_snapshot.c $(FUZZ_SNAP_SRCS) $(wildcard vmm/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Iguest-agent tests/fuzz/fuzz_snapshot.c $(FUZZ_SNAP_SRCS) -o $@

$(BUILD)/fuzz/fuzz_virtio_blk: tests/fuzz/fuzz_virtio_blk.c $(FUZZ_BLK_SRCS) $(wildcard vmm/*.h) \
		$(wildcard tests/common/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) tests/fuzz/fuzz_virtio_blk.c $(FUZZ_BLK_SRCS) -pthread -o $@

$(BUILD)/fuzz/fuzz_virtio_vsock: tests/fuzz/fuzz_virtio_vsock.c $(FUZZ_VSOCK_SRCS) $(wildcard vmm/*.h) \
		$(wildcard tests/common/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) tests/fuzz/fuzz_virtio_vsock.c $(FUZZ_VSOCK_SRCS) -pthread -o $@

# Sandbox mode's frames, both directions.
$(BUILD)/fuzz/fuzz_sandbox: tests/fuzz/fuzz_sandbox.c guest-agent/proto_sandbox.c guest-agent/proto.c \
		guest-agent/proto_sandbox.h guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Iguest-agent tests/fuzz/fuzz_sandbox.c guest-agent/proto_sandbox.c guest-agent/proto.c -o $@

# The host-agent wire format: the frame reader and the three decoders.
$(BUILD)/fuzz/fuzz_proto: tests/fuzz/fuzz_proto.c guest-agent/proto.c guest-agent/proto.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Iguest-agent tests/fuzz/fuzz_proto.c guest-agent/proto.c -o $@

# The host's side of a session: the agent's frames (guest input) for a
# two-stage request.
$(BUILD)/fuzz/fuzz_session: tests/fuzz/fuzz_session.c host/run/session.c host/run/errmsg.c guest-agent/proto.c \
		$(wildcard host/run/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Iguest-agent tests/fuzz/fuzz_session.c host/run/session.c host/run/errmsg.c \
		guest-agent/proto.c -o $@

# The --policy parser (client input), with the error formatter it reports through.
$(BUILD)/fuzz/fuzz_policy: tests/fuzz/fuzz_policy.c host/run/policy.c host/run/netpolicy.c host/run/textfile.c host/run/errmsg.c $(wildcard host/run/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Iguest-agent tests/fuzz/fuzz_policy.c host/run/policy.c host/run/netpolicy.c host/run/textfile.c host/run/errmsg.c -lidn2 -o $@

# The network policy's rules and host names (client and guest input), with libidn2.
$(BUILD)/fuzz/fuzz_netpolicy: tests/fuzz/fuzz_netpolicy.c host/run/netpolicy.c host/run/errmsg.c host/run/netpolicy.h host/run/errmsg.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run tests/fuzz/fuzz_netpolicy.c host/run/netpolicy.c host/run/errmsg.c -lidn2 -o $@

# The result object's hand-built JSON (guest text in every string), read
# back as vmrund reads it, by jansson.
FUZZ_RESULT_SRCS := host/run/result.c host/run/outcome.c host/run/artifacts.c host/run/artifacts_manifest.c host/run/artifacts_walk.c host/run/artifacts_sandbox.c host/run/session.c host/run/errmsg.c host/run/sysfile.c \
	host/run/utf8.c host/run/hex.c host/run/netpolicy.c guest-agent/proto.c
$(BUILD)/fuzz/fuzz_result: tests/fuzz/fuzz_result.c $(FUZZ_RESULT_SRCS) $(wildcard host/run/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Iguest-agent tests/fuzz/fuzz_result.c $(FUZZ_RESULT_SRCS) \
		-ljansson -lext2fs -lcom_err -lseccomp -lidn2 -lcrypto -o $@

# A manifest's lines (from the artifacts helper, which read a hostile
# image) and the diff of two manifests, with its hand-made digest text.
FUZZ_MANIFEST_SRCS := host/run/artifacts_manifest.c host/run/artifacts.c host/run/artifacts_walk.c \
	host/run/artifacts_sandbox.c host/run/wsdiff.c host/run/session.c host/run/errmsg.c host/run/utf8.c host/run/hex.c host/run/sysfile.c \
	guest-agent/proto.c
$(BUILD)/fuzz/fuzz_manifest: tests/fuzz/fuzz_manifest.c $(FUZZ_MANIFEST_SRCS) $(wildcard host/run/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Iguest-agent tests/fuzz/fuzz_manifest.c $(FUZZ_MANIFEST_SRCS) \
		-ljansson -lext2fs -lcom_err -lseccomp -lcrypto -o $@

# The output's Server-Sent Events (guest bytes in every event's text).
FUZZ_SSE_SRCS := host/vmrund/sse.c host/vmrund/pending.c host/vmrund/spool.c host/run/tree.c host/run/outcome.c
$(BUILD)/fuzz/fuzz_sse: tests/fuzz/fuzz_sse.c $(FUZZ_SSE_SRCS) host/vmrund/sse.h host/vmrund/spool.h host/run/result.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_sse.c $(FUZZ_SSE_SRCS) \
		-ljansson -o $@

# Piston's WebSocket: a client's frames, and its messages over them.
FUZZ_WS_SRCS := host/vmrund/ws.c host/vmrund/piston_ws.c
$(BUILD)/fuzz/fuzz_ws: tests/fuzz/fuzz_ws.c $(FUZZ_WS_SRCS) host/vmrund/ws.h host/vmrund/piston.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_ws.c $(FUZZ_WS_SRCS) \
		-ljansson -lcrypto -o $@

# A parked sandbox's table, which any node of a cluster may have written.
FUZZ_PARK_SRCS := host/sandbox/park.c host/sandbox/table.c host/run/run_pause.c host/run/hex.c host/run/tree.c \
	host/run/errmsg.c host/vmrund/spool.c host/run/outcome.c
$(BUILD)/fuzz/fuzz_park: tests/fuzz/fuzz_park.c $(FUZZ_PARK_SRCS) host/sandbox/supervisor.h host/run/run_pause.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/sandbox -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_park.c \
		$(FUZZ_PARK_SRCS) -ljansson -lcrypto -pthread -o $@

# A sandbox supervisor's answer head, as vmrund reads it to pass it on.
$(BUILD)/fuzz/fuzz_sandbox_http: tests/fuzz/fuzz_sandbox_http.c host/vmrund/sandbox_http.c host/vmrund/sandbox_http.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/vmrund tests/fuzz/fuzz_sandbox_http.c host/vmrund/sandbox_http.c -o $@

# The artifacts' tar headers (guest-chosen names), read back by libarchive.
$(BUILD)/fuzz/fuzz_tar: tests/fuzz/fuzz_tar.c host/vmrund/tar.c host/vmrund/tar.h host/run/artifacts.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund tests/fuzz/fuzz_tar.c host/vmrund/tar.c -ljansson -larchive -o $@

# The host proxy's request heads (guest input), through http_parser.
$(BUILD)/fuzz/fuzz_proxy_request: tests/fuzz/fuzz_proxy_request.c host/proxy/request.c host/run/errmsg.c \
		host/proxy/request.h host/run/netpolicy.h host/run/errmsg.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/proxy tests/fuzz/fuzz_proxy_request.c host/proxy/request.c host/run/errmsg.c \
		-lhttp_parser -o $@

# The server name in a guest's ClientHello (guest input).
$(BUILD)/fuzz/fuzz_tls_sni: tests/fuzz/fuzz_tls_sni.c host/proxy/tls_sni.c host/proxy/tls_sni.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/proxy tests/fuzz/fuzz_tls_sni.c host/proxy/tls_sni.c -o $@

# Seed: a ClientHello that Python's ssl (OpenSSL) wrote for pypi.org.
$(BUILD)/fuzz/seeds-tls_sni.stamp: $(wildcard tests/fuzz/seeds-tls_sni/*)
	@rm -rf $(BUILD)/fuzz/seeds-tls_sni && mkdir -p $(BUILD)/fuzz/seeds-tls_sni
	cp tests/fuzz/seeds-tls_sni/* $(BUILD)/fuzz/seeds-tls_sni/
	@touch $@

# Seeds: a CONNECT and a plain request with hop-by-hop headers.
$(BUILD)/fuzz/seeds-proxy_request.stamp: $(wildcard tests/fuzz/seeds-proxy_request/*)
	@rm -rf $(BUILD)/fuzz/seeds-proxy_request && mkdir -p $(BUILD)/fuzz/seeds-proxy_request
	cp tests/fuzz/seeds-proxy_request/* $(BUILD)/fuzz/seeds-proxy_request/
	@touch $@

# vmrund's request bodies, native and Piston's (client input), through jansson.
FUZZ_REQUEST_SRCS := host/run/run_spec.c host/run/run_spec_json.c host/run/run_spec_canon.c host/run/run_spec_decode.c host/run/base64.c host/vmrund/piston.c host/vmrund/semver.c host/run/runtime.c host/run/policy.c host/run/textfile.c host/run/netpolicy.c \
	host/run/errmsg.c host/run/hex.c
$(BUILD)/fuzz/fuzz_request: tests/fuzz/fuzz_request.c $(FUZZ_REQUEST_SRCS) $(wildcard host/run/*.h host/vmrund/*.h \
		guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_request.c $(FUZZ_REQUEST_SRCS) \
		-ljansson -lidn2 -lcrypto -o $@

# Seeds: a native body of each mode (one with network rules) and a Piston body.
$(BUILD)/fuzz/seeds-request.stamp: $(wildcard tests/fuzz/seeds-request/*)
	@rm -rf $(BUILD)/fuzz/seeds-request && mkdir -p $(BUILD)/fuzz/seeds-request
	cp tests/fuzz/seeds-request/* $(BUILD)/fuzz/seeds-request/
	@touch $@

# Judge0's submissions, fields, tokens and base64 (client input), the
# view of a run whatever its result's shape, /v1/judge's requests, and
# additional_files' zips.
FUZZ_JUDGE0_SRCS := $(FUZZ_REQUEST_SRCS) host/vmrund/judge0.c host/vmrund/judge0_submission.c \
	host/vmrund/judge0_view.c host/vmrund/judge0_callback.c host/vmrund/judge0_files.c host/vmrund/judge.c \
	host/run/utf8.c host/run/lines.c host/vmrund/tenants.c
$(BUILD)/fuzz/fuzz_judge0: tests/fuzz/fuzz_judge0.c $(FUZZ_JUDGE0_SRCS) $(wildcard host/run/*.h host/vmrund/*.h \
		guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_judge0.c $(FUZZ_JUDGE0_SRCS) \
		-ljansson -lidn2 -lcrypto -larchive -lm -o $@
$(BUILD)/fuzz/seeds-judge0.stamp: $(wildcard tests/fuzz/seeds-judge0/*)
	@rm -rf $(BUILD)/fuzz/seeds-judge0 && mkdir -p $(BUILD)/fuzz/seeds-judge0
	cp tests/fuzz/seeds-judge0/* $(BUILD)/fuzz/seeds-judge0/
	@touch $@

# E2B's create bodies and the listing's filters (client input).
FUZZ_E2B_SRCS := $(FUZZ_REQUEST_SRCS) host/vmrund/e2b.c host/vmrund/tenants.c
$(BUILD)/fuzz/fuzz_e2b: tests/fuzz/fuzz_e2b.c $(FUZZ_E2B_SRCS) $(wildcard host/run/*.h host/vmrund/*.h guest-agent/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund -Iguest-agent tests/fuzz/fuzz_e2b.c $(FUZZ_E2B_SRCS) \
		-ljansson -lidn2 -lcrypto -o $@
$(BUILD)/fuzz/seeds-e2b.stamp: $(wildcard tests/fuzz/seeds-e2b/*)
	@rm -rf $(BUILD)/fuzz/seeds-e2b && mkdir -p $(BUILD)/fuzz/seeds-e2b
	cp tests/fuzz/seeds-e2b/* $(BUILD)/fuzz/seeds-e2b/
	@touch $@

# envd's Connect envelopes and requests (client input), and the
# supervisor's events, commands and file entries (guest input).
FUZZ_ENVD_SRCS := host/vmrund/envd.c host/vmrund/pending.c host/run/base64.c host/run/hex.c host/run/utf8.c
$(BUILD)/fuzz/fuzz_envd: tests/fuzz/fuzz_envd.c $(FUZZ_ENVD_SRCS) $(wildcard host/run/*.h host/vmrund/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -Ihost/run -Ihost/vmrund tests/fuzz/fuzz_envd.c $(FUZZ_ENVD_SRCS) \
		-ljansson -lcrypto -o $@
# Seeds: an envelope, a StartRequest, an input and signal request, a
# command of the listing, an exit event, a path with its entry.
$(BUILD)/fuzz/seeds-envd.stamp: $(wildcard tests/fuzz/seeds-envd/*)
	@rm -rf $(BUILD)/fuzz/seeds-envd && mkdir -p $(BUILD)/fuzz/seeds-envd
	cp tests/fuzz/seeds-envd/* $(BUILD)/fuzz/seeds-envd/
	@touch $@

# Seeds: two small manifests, one of each kind of line.
$(BUILD)/fuzz/seeds-manifest.stamp: $(wildcard tests/fuzz/seeds-manifest/*)
	@rm -rf $(BUILD)/fuzz/seeds-manifest && mkdir -p $(BUILD)/fuzz/seeds-manifest
	cp tests/fuzz/seeds-manifest/* $(BUILD)/fuzz/seeds-manifest/
	@touch $@
$(BUILD)/fuzz/seeds-park.stamp: $(wildcard tests/fuzz/seeds-park/*)
	@rm -rf $(BUILD)/fuzz/seeds-park && mkdir -p $(BUILD)/fuzz/seeds-park
	cp tests/fuzz/seeds-park/* $(BUILD)/fuzz/seeds-park/
	@touch $@

$(BUILD)/fuzz/mkseeds_loader: tests/fuzz/mkseeds_loader.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $< -o $@

# Seeds: hand-made minimal images, plus the test payloads when built.
$(BUILD)/fuzz/seeds-loader.stamp: $(BUILD)/fuzz/mkseeds_loader $(wildcard $(BUILD)/payloads/*.elf)
	@rm -rf $(BUILD)/fuzz/seeds-loader && mkdir -p $(BUILD)/fuzz/seeds-loader
	$(BUILD)/fuzz/mkseeds_loader $(BUILD)/fuzz/seeds-loader
	@for f in $(wildcard $(BUILD)/payloads/*.elf); do cp $$f $(BUILD)/fuzz/seeds-loader/; done
	@touch $@

FUZZ_SEEDS := $(BUILD)/fuzz/seeds-loader.stamp $(BUILD)/fuzz/seeds-request.stamp $(BUILD)/fuzz/seeds-proxy_request.stamp \
	$(BUILD)/fuzz/seeds-tls_sni.stamp $(BUILD)/fuzz/seeds-manifest.stamp $(BUILD)/fuzz/seeds-park.stamp \
	$(BUILD)/fuzz/seeds-judge0.stamp $(BUILD)/fuzz/seeds-e2b.stamp $(BUILD)/fuzz/seeds-envd.stamp

fuzz-smoke: $(FUZZ_BINS) $(FUZZ_SEEDS)
	@./tests/fuzz/run.sh $(FUZZ_SMOKE_TIME) $(BUILD) $(FUZZ_BINS)

fuzz: $(FUZZ_BINS) $(FUZZ_SEEDS)
	@./tests/fuzz/run.sh $(FUZZ_TIME) $(BUILD) $(FUZZ_BINS)
