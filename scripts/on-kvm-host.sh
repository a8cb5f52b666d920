#!/bin/bash
# on-kvm-host.sh [--any-kvm] [--limit SEC] WHAT CMD...: run CMD where it can
# run, within SEC seconds in all.
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
# --limit SEC bounds CMD, the emulated host's boot included: past it CMD (or
# the emulated host with everything in it) is killed, "WHAT: timed out after
# SEC s" is printed and the status is 124, so a wedged guest or host becomes
# a failed test instead of a hang.
set -u
any=0
limit=0
while [ $# -gt 0 ]; do
	case $1 in
	--any-kvm) any=1; shift ;;
	--limit) limit=$2; shift 2 ;;
	*) break ;;
	esac
done
what=$1
shift
cd "$(dirname "$0")/.."

if [ "$any" = 1 ]; then
	need="runs payloads"
	err=$(timeout 60 build/bin/vmm --accept-emulated-kvm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
else
	need="runs guest kernels in hardware"
	err=$(timeout 60 build/bin/vmm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
fi
rc=$?
[ $rc -eq 0 ] || [ -n "$err" ] || err="probe ended with status $rc"

if [ -c /dev/kvm ] && [ $rc -eq 0 ]; then
	echo "$what: local /dev/kvm $need (probe passed); running directly"
	if [ "$limit" -gt 0 ]; then
		timeout -k 10 "$limit" "$@"
	else
		"$@"
	fi
	st=$?
else
	echo "$what: local /dev/kvm cannot be used (${err:-no /dev/kvm}); running on the emulated KVM host (tests/kvmhost/run)"
	if [ "$limit" -gt 0 ]; then
		KVMHOST_TIMEOUT=$limit tests/kvmhost/run "$@"
	else
		tests/kvmhost/run "$@"
	fi
	st=$?
fi
[ $st -ne 124 ] || [ "$limit" -eq 0 ] || echo "$what: timed out after $limit s" >&2
exit $st
