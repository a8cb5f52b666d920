#!/bin/bash
# on-kvm-host.sh WHAT CMD...: run CMD on a KVM host that boots Linux guests.
# The decision is a probe, not a guess: vmm boots the reset payload without
# --accept-emulated-kvm, which succeeds only where KVM runs guest kernel
# code in hardware. Where it does, CMD runs here; otherwise on the emulated
# KVM host (tests/kvmhost/run). One line says which, prefixed by WHAT.
set -u
what=$1
shift
cd "$(dirname "$0")/.."
err=$(build/bin/vmm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
if [ -c /dev/kvm ] && [ -z "$err" ]; then
	echo "$what: local /dev/kvm runs guest kernels in hardware (probe passed); running directly"
	exec "$@"
fi
echo "$what: local /dev/kvm cannot boot Linux (${err:-no /dev/kvm}); running on the emulated KVM host (tests/kvmhost/run)"
exec tests/kvmhost/run "$@"
