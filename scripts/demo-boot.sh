#!/bin/bash
# Boots the guest kernel with 2 vCPUs under build/bin/vmm, the root image as
# a read-only virtio disk, to the image's interim /init, which reports and
# resets the VM. Needs a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh picks one).
set -u
cd "$(dirname "$0")/.."
start=$(date +%s%N)
build/bin/vmm --kernel build/guest/vmlinux --cpus 2 --memory 256 \
	--disk build/guest/rootfs.ext4,ro --cmdline "root=/dev/vda ro init=/init printk.time=1" \
	--console stdout
st=$?
echo "demo: vmm exited $st after $(( ($(date +%s%N) - start) / 1000000 )) ms wall time" \
	"(the interim /init resets the VM; the guest agent and vmrun come next)"
exit $st
