#!/bin/sh
# The arm64 boot benchmark: the same Image (no root disk, so the kernel
# panics at "VFS: Unable to mount root fs" and, with panic=1 reboot=k,
# resets) booted RUNS times each (default 5), alternating, under our vmm and
# under QEMU's virt machine with KVM, on the aarch64 KVM host this runs on:
#   tests/kvmhost/run-aarch64 tests/bench/boot_aarch64.sh
# POSIX sh: there, the userland is busybox. Printed, not asserted.
#
# Per boot: wall time from start to the root-mount line on the console
# (a FIFO, read as lines arrive: see boot() for why not a polled file),
# wall time to the process's exit, and the guest's own printk time of
# that line; and where the start-up goes: vmm runs with --stats (its
# monotonic stamps, printed at exit: the first KVM_RUN and the guest's
# reset), QEMU's paused boots (below) stamp its QMP greeting and the STOP
# at the reset.
#
# Our arm64 guest kernel has no PL011 driver (kernel-config/guest-aarch64.config
# has the 8250 only, which is what vmm's device tree describes), and QEMU's
# virt board has a PL011 and no 16550, so under QEMU the guest has no console
# at all: QEMU's root-mount wall time cannot be seen. Its exit is still a
# fair figure (same kernel, same command line, same 1 s panic delay), and
# the guest's printk time is read from guest memory: each timed QEMU boot
# is followed by an untimed one that pauses at the reset instead of exiting
# (-action reboot=shutdown,shutdown=pause), whose kernel image region is
# saved over QMP (pmemsave) and searched for the printk record. Should the
# kernel gain a PL011 driver, the QEMU column fills in from its console
# like vmm's.
#
# Everything booted is first copied into this host's tmpfs: the repository
# is a 9p share here, and QEMU's 47 libraries read over 9p at every start
# would be charged to QEMU, where an installed QEMU starts from page cache.
#
# Environment: RUNS; WARMUP (boots of each first, not counted, default 1);
# VMM (build/aarch64/bin/vmm); IMAGE (build/aarch64/guest/Image);
# QEMU_DIR (tests/bench/qemu-aarch64.sh's DEST, build/aarch64/qemu);
# HOST_DESC (how the table names the host).
set -u
cd "$(dirname "$0")/../.." || exit 1
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
VMM=${VMM:-build/aarch64/bin/vmm}
IMAGE=${IMAGE:-build/aarch64/guest/Image}
QEMU_DIR=${QEMU_DIR:-build/aarch64/qemu}
# QEMU's TCG "max" CPU has implementer 0x00: that is tests/kvmhost/run-aarch64
# on this project's x86 machines. Anything else is named by its CPU.
impl=$(sed -n 's/^CPU implementer[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
part=$(sed -n 's/^CPU part[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
if [ "$impl" = 0x00 ]; then
	host_default="emulated aarch64 KVM host: QEMU TCG -cpu max on a 2-core x86_64 Debian 12 machine"
else
	host_default="aarch64 KVM host: $(nproc) CPUs, implementer $impl part $part"
fi
HOST_DESC=${HOST_DESC:-$host_default}
DEADLINE=120
ROOT_MOUNT='VFS: Unable to mount root fs'
EXTRA=printk.time=1

die() { echo "boot_aarch64: $*" >&2; exit 1; }
[ -c /dev/kvm ] || die "no /dev/kvm: run me on an aarch64 KVM host (tests/kvmhost/run-aarch64)"
[ "$(uname -m)" = aarch64 ] || die "not an aarch64 host"
for f in "$VMM" "$IMAGE" "$QEMU_DIR/usr/bin/qemu-system-aarch64" "$QEMU_DIR/library-dirs"; do
	[ -e "$f" ] || die "$f missing (make aarch64; tests/bench/qemu-aarch64.sh $QEMU_DIR)"
done

tmp=$(mktemp -d) || die "mktemp failed"
trap 'exec 6<&- 7>&- 8<&-; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
if ! cp "$VMM" "$tmp/vmm" || ! cp "$IMAGE" "$tmp/Image" || ! cp -a "$QEMU_DIR" "$tmp/qemu"; then
	die "cannot copy the VMMs and the Image into $tmp"
fi
Q=$tmp/qemu
LP=$(sed "s|^|$Q/|" "$Q/library-dirs" | tr '\n' ':')
qemu() { "$Q/lib/ld-linux-aarch64.so.1" --library-path "$LP" "$Q/usr/bin/qemu-system-aarch64" "$@"; }

# vmm appends --cmdline to its default command line; QEMU is given the
# same whole line, its UART named instead of ours.
vmm_default=$("$tmp/vmm" --help 2>&1 | sed -n 's/^ *"\(.*console=.*\)"$/\1/p' | head -n 1)
[ -n "$vmm_default" ] || die "cannot read vmm's default command line from vmm --help"
APPEND="$(echo "$vmm_default" | sed 's/console=ttyS0/console=ttyAMA0/') $EXTRA"

# The monotonic clock in ns, read by the shell itself (busybox date has no
# %N, and a fork would add its own ~15 ms): /proc/timer_list's third line,
# "now at N nsecs", is CLOCK_MONOTONIC, the clock of vmm's --stats.
if [ -r /proc/timer_list ]; then
	now() { { read -r _; read -r _; read -r _ _ now_ns _; } </proc/timer_list; }
else
	now() { read -r up _ </proc/uptime; now_ns=$(echo "$up" | tr -d .)0000000; }
fi

# The console is a FIFO that we read as lines arrive, not a file we poll:
# measured here, a shell polling the console file every 10 ms slowed the
# guest's own boot (its printk time of the root-mount line) from 437-933
# to 908-1524 ms, each wakeup on the emulated host costing the nested
# guest an exit. We hold the FIFO open for reading and writing, so no
# open() of it ever blocks; after CMD exits, the subshell waiting for it
# writes an end line with the exit's stamp and CMD's status.
mkfifo "$tmp/con.fifo" || die "cannot make a FIFO"
exec 6<>"$tmp/con.fifo"
END_MARK="boot_aarch64-end-of-boot"

# boot CMD...: run CMD under the deadline with its console at
# $tmp/con.fifo. Sets root_ms (start to the root-mount line, or empty),
# exit_ms and st; the console's lines are left in $tmp/con.
boot() {
	: >"$tmp/con"
	now
	t0=$now_ns
	(
		timeout -s KILL "$DEADLINE" "$@" </dev/null >"$tmp/out" 2>&1
		rc=$?
		now
		echo "$END_MARK $now_ns $rc" >"$tmp/con.fifo"
	) &
	pid=$!
	root_ms=''
	while IFS= read -r l <&6; do
		case $l in
		"$END_MARK "*)
			# shellcheck disable=SC2086 # three words
			set -- $l
			t1=$2 st=$3
			break
			;;
		*"$ROOT_MOUNT"*)
			if [ -z "$root_ms" ]; then
				now
				root_ms=$(((now_ns - t0) / 1000000))
			fi
			;;
		esac
		printf '%s\n' "$l" >>"$tmp/con"
	done
	wait "$pid"
	exit_ms=$(((t1 - t0) / 1000000))
}

# The guest's printk time of the root-mount line on the console, in ms.
console_guest_ms() {
	tr -d '\r' <"$tmp/con" | sed -n "s/^\[ *\([0-9]*\)\.\([0-9][0-9][0-9]\)[0-9]*\].*$ROOT_MOUNT.*/\1\2/p" |
		head -n 1 | sed 's/^0*\(.\)/\1/'
}

# ---- the guest's printk time from QEMU's guest memory --------------------
# Linux 6.1's printk ring: the text ring holds each record as its 8-byte
# descriptor id, then the text; struct printk_info (88 bytes: seq, ts_nsec,
# text_len, ...) is an array indexed like the descriptors. In the first lap
# of the ring, record k has id id0+k and info seq k. The kernel has no
# KASLR (RANDOMIZE_BASE is off) and QEMU loads it at the same address every
# time, so the info array is at the same guest address in every boot: it
# is found once by a scan (~5-50 s under TCG) and then read directly.
u64() { od -A n -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
text_offset=$(u64 "$tmp/Image" 8)
image_size=$(u64 "$tmp/Image" 16)
# QEMU loads the Image at RAM + text_offset, or 2 MiB above that when the
# offset is below its boot stub's size; cover both.
dump_size=$(((2097152 + text_offset + image_size + 4095) / 4096 * 4096))
info_base=
dump_guest_ms() { # $1: the dump; sets dg to the ms, or to nothing
	d=$1
	dg=
	offs=$(strings -t d -n 20 "$d" | sed -n \
		-e 's/^ *\([0-9]*\) Booting Linux on physical CPU 0x[0-9].*/B \1/p' \
		-e "s/^ *\\([0-9]*\\) Kernel panic - not syncing: $ROOT_MOUNT.*/P \\1/p")
	first=$(echo "$offs" | sed -n 's/^B //p' | head -n 1)
	panic=$(echo "$offs" | sed -n 's/^P //p' | head -n 1)
	[ -n "$first" ] && [ -n "$panic" ] || return 0
	id0=$(u64 "$d" $((first - 8)))
	idx=$(($(u64 "$d" $((panic - 8))) - id0))
	[ "$idx" -gt 0 ] && [ "$idx" -lt 4096 ] || return 0
	if [ -z "$info_base" ] || [ "$(u64 "$d" $((info_base + idx * 88)))" != "$idx" ]; then
		# Records idx and idx+1 88 bytes apart; the array sits in the
		# kernel's .data, below the text ring in .bss: look in the MiB
		# below the ring first, then everywhere below it.
		# Record 0 (seq 0) at the array's start confirms it.
		info_base=
		for from in $((first > 1048576 ? (first - 1048576) / 8 * 8 : 0)) 0; do
			p=$(od -A d -t u8 -v -w8 -j "$from" -N $((first - from)) "$d" |
				awk -v i="$idx" '$2 == i { c[$1 + 0] = 1 } $2 == i + 1 && c[$1 - 88] { print $1 - 88; exit }')
			if [ -n "$p" ] && [ "$(u64 "$d" $((p - idx * 88)))" = 0 ]; then
				info_base=$((p - idx * 88))
				break
			fi
		done
		[ -n "$info_base" ] || return 0
	fi
	dg=$(($(u64 "$d" $((info_base + idx * 88 + 8))) / 1000000))
}

# One QEMU boot that pauses at the reset instead of exiting. Sets dg to
# the guest's root-mount time in ms (or to nothing), q_ready to the ms from
# start to QMP's greeting (QEMU has built the machine and entered its main
# loop) and q_reset to the ms to the STOP event (the guest's reset). Not
# called in a $(...): info_base is kept from one call to the next.
qemu_paused() {
	dg='' q_ready='' q_reset=''
	rm -f "$tmp/qmp.in" "$tmp/qmp.out" "$tmp/dump"
	mkfifo "$tmp/qmp.in" "$tmp/qmp.out" || return 0
	now
	t0=$now_ns
	timeout -s KILL "$DEADLINE" "$Q/lib/ld-linux-aarch64.so.1" --library-path "$LP" \
		"$Q/usr/bin/qemu-system-aarch64" "$@" -action reboot=shutdown,shutdown=pause \
		-qmp stdio <"$tmp/qmp.in" >"$tmp/qmp.out" 2>"$tmp/qerr" &
	qpid=$!
	exec 7>"$tmp/qmp.in" 8<"$tmp/qmp.out"
	echo '{"execute":"qmp_capabilities"}' >&7
	# Blocks until the STOP event, or EOF if QEMU died or hit the deadline.
	while IFS= read -r l <&8; do
		case $l in
		*'"QMP"'*)
			now
			q_ready=$(((now_ns - t0) / 1000000))
			;;
		*'"STOP"'*)
			now
			q_reset=$(((now_ns - t0) / 1000000))
			echo "{\"execute\":\"pmemsave\",\"arguments\":{\"val\":1073741824,\"size\":$dump_size,\"filename\":\"$tmp/dump\"}}" >&7
			echo '{"execute":"quit"}' >&7
			break
			;;
		esac
	done
	while IFS= read -r l <&8; do :; done
	exec 7>&- 8<&-
	wait "$qpid"
	[ ! -s "$tmp/dump" ] || dump_guest_ms "$tmp/dump"
	rm -f "$tmp/dump"
}

# vmm --stats stamps (CLOCK_MONOTONIC, the clock now() reads): sets
# v_ready (start to the first KVM_RUN) and v_reset (to the guest's reset).
vmm_stats() {
	f=$(sed -n 's/^vmm-stats .*first_kvm_run_ns=\([0-9]*\) stop_ns=\([0-9]*\) .*/\1 \2/p' "$tmp/out")
	v_ready='' v_reset=''
	[ -n "$f" ] || return 0
	# shellcheck disable=SC2086 # two numbers
	set -- $f
	v_ready=$((($1 - t0) / 1000000))
	[ "$2" = 0 ] || v_reset=$((($2 - t0) / 1000000))
}

QEMU_ARGS="-M virt,gic-version=3 -enable-kvm -cpu host -m 256 -smp 1 -nographic -nodefaults -no-user-config"
boot_vmm() {
	boot "$tmp/vmm" --kernel "$tmp/Image" --memory 256 --cpus 1 --console "$tmp/con.fifo" --cmdline "$EXTRA" --stats
}
boot_qemu() {
	# shellcheck disable=SC2086 # QEMU_ARGS is a list of words
	boot "$Q/lib/ld-linux-aarch64.so.1" --library-path "$LP" "$Q/usr/bin/qemu-system-aarch64" \
		$QEMU_ARGS -serial "file:$tmp/con.fifo" -kernel "$tmp/Image" -append "$APPEND" -no-reboot
}

echo "host: $HOST_DESC"
echo "vmm:  $("$tmp/vmm" --version 2>&1 | head -n 1); QEMU: $(qemu --version | head -n 1)"
echo "Image: $IMAGE ($(wc -c <"$tmp/Image") bytes, sha256 $(sha256sum "$tmp/Image" | cut -c1-12)); vmm sha256 $(sha256sum "$tmp/vmm" | cut -c1-12)"
echo "command line: $APPEND"
echo "RUNS=$RUNS after WARMUP=$WARMUP, alternating; every boot under timeout -s KILL $DEADLINE; $(nproc) vCPUs, $(free -m | awk '/^Mem:/ {print $2}') MiB"

# One boot of each first, not counted: under TCG, the emulated host's
# first KVM guest pays for translating KVM's own code paths (a first boot
# took up to 3x as long in the guest's own clock).
i=0
while [ "$i" -lt "$WARMUP" ]; do
	boot_vmm
	boot_qemu
	i=$((i + 1))
done

# What starting the process alone costs, no VM: the dynamic loader and
# QEMU's 47 libraries against vmm's one static binary.
v_ver='' q_ver=''
i=0
while [ "$i" -lt 3 ]; do
	now
	t0=$now_ns
	"$tmp/vmm" --version >/dev/null 2>&1
	now
	v_ver="$v_ver $(((now_ns - t0) / 1000000))"
	t0=$now_ns
	qemu --version >/dev/null 2>&1
	now
	q_ver="$q_ver $(((now_ns - t0) / 1000000))"
	i=$((i + 1))
done

echo
echo "ms from start; ready: vmm's first KVM_RUN, QEMU's QMP greeting; reset: the guest's"
echo "PSCI reset reaching the VMM; (x): from QEMU's paused boot that follows the timed one"
printf '%-4s %-5s %8s %8s %8s %8s %8s  %s\n' run vmm ready root guest reset exit status
v_root='' v_exit='' v_guest='' v_rdy='' v_rst=''
q_root='' q_exit='' q_guest='' q_rdy='' q_rst='' q_pguest=''
bad=0
i=1
while [ "$i" -le "$RUNS" ]; do
	boot_vmm
	vmm_stats
	g=$(console_guest_ms)
	[ "$st" = 0 ] || bad=$((bad + 1))
	printf '%-4s %-5s %8s %8s %8s %8s %8s  %s\n' "$i" vmm "${v_ready:--}" "${root_ms:--}" "${g:--}" "${v_reset:--}" "$exit_ms" "$st"
	v_root="$v_root $root_ms" v_exit="$v_exit $exit_ms" v_guest="$v_guest $g" v_rdy="$v_rdy $v_ready" v_rst="$v_rst $v_reset"

	boot_qemu
	g=$(console_guest_ms)
	[ "$st" = 0 ] || bad=$((bad + 1))
	q_root="$q_root $root_ms" q_exit="$q_exit $exit_ms" q_guest="$q_guest $g"
	[ "$st" = 0 ] || sed 's/^/     qemu: /' "$tmp/out" | tail -n 5
	# shellcheck disable=SC2086
	qemu_paused $QEMU_ARGS -serial "file:$tmp/con.paused" -kernel "$tmp/Image" -append "$APPEND"
	printf '%-4s %-5s %8s %8s %8s %8s %8s  %s\n' "$i" qemu "(${q_ready:--})" "${root_ms:--}" "${g:-(${dg:--})}" \
		"(${q_reset:--})" "$exit_ms" "$st"
	q_pguest="$q_pguest $dg" q_rdy="$q_rdy $q_ready" q_rst="$q_rst $q_reset"
	i=$((i + 1))
done

# summary VALUES...: "median (min-max)" of the numeric values, or "n/a".
summary() { printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -n |
	awk '{v[NR] = $1} END {if (NR) printf "%d (%d-%d)", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "n/a"}'; }
med() { printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; else printf 'n/a'; fi; }
# shellcheck disable=SC2086 # lists of numbers
row() { # LABEL VMM-VALUES QEMU-VALUES
	echo "| $1 | $(summary $2) | $(summary $3) | $(ratio "$(med $2)" "$(med $3)") |"
}
# shellcheck disable=SC2086
{
	q_src=console
	[ -n "$(med $q_guest)" ] || { q_guest=$q_pguest q_src="guest memory, paused boots"; }
	echo
	echo "boot to the root-mount attempt, $RUNS runs each, $HOST_DESC"
	echo
	echo "| ms, median (min-max) | vmrun vmm | QEMU virt, KVM | vmm / QEMU |"
	echo "|---|---|---|---|"
	row "start -> root-mount line on the console" "$v_root" "$q_root"
	row "start -> process exit (1 s panic delay included)" "$v_exit" "$q_exit"
	row "root-mount line, guest clock (printk; QEMU: $q_src)" "$v_guest" "$q_guest"
	row "start -> VMM ready (vmm: first KVM_RUN; QEMU: QMP greeting, paused boots)" "$v_rdy" "$q_rdy"
	row "start -> guest reset at the VMM (QEMU: paused boots)" "$v_rst" "$q_rst"
	row "--version, start to exit (no VM; 3 runs)" "$v_ver" "$q_ver"
	[ -n "$(med $q_root)" ] ||
		echo "QEMU's root-mount line is not on its console: the guest kernel has no PL011 driver."
}
[ "$bad" = 0 ] || { echo "boot_aarch64: $bad boot(s) did not exit 0" >&2; exit 1; }
