#!/bin/bash
# Runs the Linux-guest VM tests where they can run. The decision is a probe,
# not a guess: vmm boots the reset payload without --accept-emulated-kvm,
# which succeeds only where KVM runs guest kernel code in hardware.
set -u
cd "$(dirname "$0")/../.."
err=$(build/bin/vmm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
if [ -c /dev/kvm ] && [ -z "$err" ]; then
	echo "vm tests: local /dev/kvm runs guest kernels in hardware (probe passed); running them directly"
	exec tests/vm/boot.sh
fi
echo "vm tests: local /dev/kvm cannot boot Linux (${err:-no /dev/kvm}); running them on the emulated KVM host (tests/kvmhost/run)"
exec tests/kvmhost/run tests/vm/boot.sh
