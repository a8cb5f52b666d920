#!/bin/bash
# on-kvm-host.sh [--any-kvm] [--arch aarch64] [--limit SEC] WHAT CMD...: run
# CMD where it can run, within SEC seconds in all.
#
# --arch aarch64: CMD needs an aarch64 KVM host (the cross-built vmm in
# build/aarch64). This machine is one only if it is aarch64 and its KVM
# passes that vmm's --probe with the arm64 kernel; anywhere else CMD runs
# on the emulated aarch64 host (tests/kvmhost/run-aarch64).
#
# Three kinds of host, told apart by a probe, never by a guess:
#   hardware KVM      runs Linux guests and payloads: CMD runs here
#   an emulating KVM  (a PVM nested host) runs tiny payloads, not Linux
#   no usable KVM     (no /dev/kvm, or one we cannot open) runs neither
# The probe is vmm booting the reset payload. Without --any-kvm (CMD boots
# Linux) it must pass vmm's host check, which only hardware does; with
# --any-kvm (CMD runs payloads) --accept-emulated-kvm waives that check, so
# any working /dev/kvm passes. Where the probe fails, CMD runs on the
# emulated KVM host (tests/kvmhost/run). One line, prefixed by WHAT, says
# which and why.
#
# --where: print where a CMD that boots Linux would run, "local" or
# "emulated", and run nothing (vm-lanes.sh asks before running lanes side
# by side).
#
# --limit SEC bounds CMD, the emulated host's boot included: past it CMD (or
# the emulated host with everything in it) is killed, "WHAT: timed out after
# SEC s" is printed and the status is 124, so a wedged guest or host becomes
# a failed test instead of a hang.
set -u
any=0
limit=0
where=0
arch=
while [ $# -gt 0 ]; do
	case $1 in
	--any-kvm) any=1; shift ;;
	--arch) arch=$2; shift 2 ;;
	--limit) limit=$2; shift 2 ;;
	--where) where=1; shift ;;
	*) break ;;
	esac
done
what=${1:-}
[ $# -eq 0 ] || shift
cd "$(dirname "$0")/.."
started=$(date +%s)

emulated_host=tests/kvmhost/run
if [ "$arch" = aarch64 ]; then
	emulated_host=tests/kvmhost/run-aarch64
	need="runs aarch64 guests"
	if [ "$(uname -m)" = aarch64 ]; then
		err=$(timeout 60 build/aarch64/bin/vmm --probe --kernel build/aarch64/guest/Image --memory 64 2>&1 >/dev/null)
		rc=$?
	else
		err="this machine is $(uname -m)"
		rc=1
	fi
elif [ -n "$arch" ]; then
	echo "$what: --arch $arch: only aarch64 is known" >&2
	exit 2
elif [ "$any" = 1 ]; then
	need="runs payloads"
	err=$(timeout 60 build/bin/vmm --accept-emulated-kvm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
	rc=$?
else
	need="runs guest kernels in hardware"
	err=$(timeout 60 build/bin/vmm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
	rc=$?
fi
[ $rc -eq 0 ] || [ -n "$err" ] || err="probe ended with status $rc"
if [ "$where" = 1 ]; then
	[ -c /dev/kvm ] && [ $rc -eq 0 ] && echo local || echo emulated
	exit 0
fi

if [ -c /dev/kvm ] && [ $rc -eq 0 ]; then
	echo "$what: local /dev/kvm $need (probe passed); running directly"
	if [ "$limit" -gt 0 ]; then
		timeout -k 10 "$limit" "$@"
	else
		"$@"
	fi
	st=$?
else
	echo "$what: local /dev/kvm cannot be used (${err:-no /dev/kvm}); running on the emulated KVM host ($emulated_host)"
	if [ "$limit" -gt 0 ]; then
		KVMHOST_TIMEOUT=$limit $emulated_host "$@"
	else
		$emulated_host "$@"
	fi
	st=$?
fi
[ $st -ne 124 ] || [ "$limit" -eq 0 ] || echo "$what: timed out after $limit s" >&2
# Where make check's minutes go, a line per script.
echo "$what: $(( $(date +%s) - started )) s, status $st"
exit $st
