#!/bin/busybox sh
# PID 1 of the virtio test disk, which tests/vm/virtio.sh boots as the root
# (vdb, read-write) next to the real root image (vda, read-only). It checks
# the guest's side and reports "vt: ..." lines on the console; the host
# script judges them. vt_mode=bench (a kernel parameter, so in our
# environment) adds the throughput runs.
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
for d in vda vdb vdc; do
	[ -b /dev/$d ] && echo "vt: disk $d sectors=$($B cat /sys/block/$d/size) ro=$($B cat /sys/block/$d/ro)"
done
if $B mount -t ext4 -o ro /dev/vda /mnt; then
	echo "vt: mounted $($B grep ' /mnt ' /proc/mounts)"
	if $B touch /mnt/probe 2>/tmp/err; then
		echo "vt: write to root image SUCCEEDED"
	else
		echo "vt: write to root image refused: $($B cat /tmp/err)"
	fi
	if $B mount -o remount,rw /mnt 2>/tmp/err; then
		echo "vt: rw remount of root image SUCCEEDED"
	else
		echo "vt: rw remount of root image refused: $($B cat /tmp/err)"
	fi
	$B umount /mnt
fi
if echo x | $B dd of=/dev/vda bs=512 count=1 conv=sync,notrunc,fsync 2>/tmp/err; then
	echo "vt: raw write to vda SUCCEEDED"
else
	echo "vt: raw write to vda refused: $($B head -n 1 /tmp/err)"
fi
echo "hello from the guest" >/written-by-guest
$B sync
echo "vt: rng $($B cat /sys/class/misc/hw_random/rng_current) $($B dd if=/dev/hwrng bs=16 count=1 2>/dev/null | $B od -An -tx1 | $B tr -d ' \n')"
/bin/vtest echo 5000 300000
/bin/vtest listen 5001
if [ "${vt_mode:-}" = bench ]; then
	/bin/vtest send 5002 256
	/bin/vtest read /dev/vdc 256
fi
echo "vt: done"
$B sync
$B reboot -f
