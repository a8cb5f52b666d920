#!/bin/bash
# Boots the guest kernel with 2 vCPUs under build/bin/vmm, showing its
# console, and reports the time to the root-mount attempt. Needs a KVM host
# that runs Linux guests (scripts/on-kvm-host.sh picks one).
set -u
cd "$(dirname "$0")/.."
start=$(date +%s%N)
build/bin/vmm --kernel build/guest/vmlinux --cpus 2 --memory 256 \
	--cmdline "loglevel=7 printk.time=1" --console stdout
st=$?
echo "demo: vmm exited $st after $(( ($(date +%s%N) - start) / 1000000 )) ms wall time" \
	"(the guest panics at the root mount, having no disk yet, and panic=1 resets it 1 s later)"
exit $st
