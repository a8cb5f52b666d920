#!/bin/bash
# Time from process start to the guest kernel's root-mount attempt, for our
# vmm (vmlinux and bzImage) and for QEMU's microvm machine booting the same
# kernel's bzImage (QEMU boots an uncompressed vmlinux only with a PVH
# note, which our config leaves out), all with the same command line, on
# the KVM host this runs on (make bench-boot picks the local one or the
# emulated one). Printed, not asserted.
set -u
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
KERNEL=build/guest/vmlinux
BZIMAGE=build/guest/bzImage
ROOT_MOUNT='VFS: Unable to mount root fs'
CMDLINE="console=ttyS0 reboot=k panic=1 pci=off nomodule i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd quiet"

# time_to_root CMD...: ms from start until the root-mount line appears.
time_to_root() {
	local start at=""
	start=$(date +%s%N)
	while IFS= read -r line; do
		case $line in *"$ROOT_MOUNT"*) at=$(date +%s%N); break ;; esac
	done < <(timeout 120 "$@" 2>&1)
	[ -n "$at" ] && echo $(( (at - start) / 1000000 ))
}

# stats VALUES...: "min .. median .. max .. ms" of the non-empty values.
stats() { printf '%s\n' "$@" | grep . | sort -n |
	awk '{v[NR]=$1} END {if (NR) printf "min %d  median %d  max %d ms", v[1], v[int((NR+1)/2)], v[NR]; else printf "no data"}'; }
# median VALUES...: the median of the non-empty values, or nothing.
median() { printf '%s\n' "$@" | grep . | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }

vmm=()
vmmbz=()
qemu=()
for _ in $(seq "$RUNS"); do
	vmm+=("$(time_to_root build/bin/vmm --kernel "$KERNEL" --memory 256 --no-default-cmdline --cmdline "$CMDLINE")")
	vmmbz+=("$(time_to_root build/bin/vmm --kernel "$BZIMAGE" --memory 256 --no-default-cmdline --cmdline "$CMDLINE")")
	qemu+=("$(time_to_root qemu-system-x86_64 -M microvm -enable-kvm -cpu host -m 256 -nodefaults \
		-no-user-config -display none -serial stdio -no-reboot -kernel "$BZIMAGE" -append "$CMDLINE")")
done
echo "boot to root-mount attempt, $RUNS runs each, same kernel and command line:"
echo "  vmrun vmm, vmlinux:    $(stats "${vmm[@]}")"
echo "  vmrun vmm, bzImage:    $(stats "${vmmbz[@]}")"
echo "  QEMU microvm, bzImage: $(stats "${qemu[@]}")"
vm=$(median "${vmm[@]}")
qm=$(median "${qemu[@]}")
[ -n "$vm" ] && [ -n "$qm" ] && awk -v a="$vm" -v b="$qm" 'BEGIN {printf "  ratio of medians: %.2fx QEMU microvm (target <= 0.5x)\n", a / b}'
