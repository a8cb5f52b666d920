#!/bin/bash
# make demo: the main job as far as it exists today: boot the guest kernel
# under our own VMM, on the local KVM when it runs Linux guests in hardware,
# else on the emulated KVM host (and say so).
set -u
cd "$(dirname "$0")/.."
err=$(build/bin/vmm --kernel build/payloads/reset.elf --memory 16 2>&1 >/dev/null)
if [ -c /dev/kvm ] && [ -z "$err" ]; then
	echo "demo: local /dev/kvm runs guest kernels in hardware; booting directly"
	exec scripts/demo-boot.sh
fi
echo "demo: local /dev/kvm cannot boot Linux (${err:-no /dev/kvm});"
echo "demo: booting on the emulated KVM host (tests/kvmhost/run), which is much slower"
exec tests/kvmhost/run scripts/demo-boot.sh
