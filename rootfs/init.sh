#!/bin/sh
# Interim PID 1 until the guest agent replaces it: bring up the kernel
# filesystems, report on the console, and reset the VM (reboot=k).
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo "vmrun-rootfs: init reached"
exec reboot -f
