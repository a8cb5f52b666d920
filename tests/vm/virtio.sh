#!/bin/sh
# VM tests of the virtio devices, on a KVM host that runs Linux guests
# (scripts/on-kvm-host.sh decides where). One guest boots with the real root
# image as vda (read-only) and a test disk as vdb (its root, read-write,
# /init = tests/vm/virtio-init.sh), then checks from inside: both disks seen,
# the root image refusing writes, the rng, a guest->host vsock echo and a
# host->guest one. This script judges the console and the disks afterwards.
#   --bench   also stream 256 MiB guest->host over vsock and read 256 MiB of
#             a third disk; print the figures (make bench-virtio)
# Ends with "virtio: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
B=build
VMM=$B/bin/vmm
VH=$B/tests/vsock_host
ROOT=$B/guest/rootfs.ext4
bench=0
[ "${1:-}" = --bench ] && bench=1

pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1"; fail=$((fail + 1)); }
expect() { # NAME FILE REGEX
	if grep -Eq "$3" "$2"; then ok "$1"; else not_ok "$1: no /$3/ in $2:"; sed 's/^/    /' "$2" | tail -n 40; fi
}

tmp=$(mktemp -d /tmp/vmrun-virtio.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/stage/bin" "$tmp/stage/proc" "$tmp/stage/sys" "$tmp/stage/dev" "$tmp/stage/mnt" "$tmp/stage/tmp"
cp /bin/busybox "$tmp/stage/bin/busybox"
cp $B/tests/vtest "$tmp/stage/bin/vtest"
cp tests/vm/virtio-init.sh "$tmp/stage/init"
chmod 755 "$tmp/stage/init"
mke2fs -q -F -t ext4 -d "$tmp/stage" "$tmp/test.img" 32M
disks="--disk $ROOT,ro --disk $tmp/test.img"
if [ $bench = 1 ]; then
	head -c 300M /dev/urandom >"$tmp/bench.img"
	disks="$disks --disk $tmp/bench.img,ro"
fi
root_sum=$(sha256sum <"$ROOT")
uds=$tmp/v.sock

$VH serve-echo "${uds}_5000" >"$tmp/echo.out" 2>&1 &
$VH connect "$uds" 5001 200000 >"$tmp/connect.out" 2>&1 &
[ $bench = 1 ] && { $VH serve-sink "${uds}_5002" >"$tmp/sink.out" 2>&1 & }
mode=
[ $bench = 1 ] && mode=" vt_mode=bench"
start=$(date +%s%N)
# The deadline: a guest that never resets is killed (TERM, KILL 5 s later);
# then so are the host peers, which would wait for it forever.
timeout -k 5 300 $VMM --kernel $B/guest/vmlinux --memory 256 $disks --vsock-uds "$uds" --console "$tmp/console" \
	--cmdline "root=/dev/vdb rw init=/init$mode" 2>"$tmp/vmm.err"
rc=$?
end=$(date +%s%N)
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
	echo "vmm was killed at its 300 s deadline" >>"$tmp/vmm.err"
	kill $(jobs -p) 2>/dev/null
fi
wait
# The serial console ends lines with CRLF.
tr -d '\r' <"$tmp/console" >"$tmp/console.txt" && mv "$tmp/console.txt" "$tmp/console"
echo "# guest ran $(( (end - start) / 1000000 )) ms; console:"
sed -n 's/^/#   /; /vt\|vtest/p' "$tmp/console"

if [ $rc -eq 0 ]; then
	ok "vmm exits 0 after the guest's reset"
else
	not_ok "vmm exit $rc: $(cat "$tmp/vmm.err")"
	tail -n 30 "$tmp/console" | sed 's/^/    console: /'
fi
sectors=$(( $(stat -c %s "$ROOT") / 512 ))
expect "guest sees the root image as vda, read-only, $sectors sectors" "$tmp/console" "^vt: disk vda sectors=$sectors ro=1"
expect "guest sees the test disk as vdb, writable" "$tmp/console" '^vt: disk vdb sectors=65536 ro=0'
expect "root image mounts read-only" "$tmp/console" '^vt: mounted /dev/vda /mnt ext4 ro'
expect "a write to the root image fails with EROFS" "$tmp/console" '^vt: write to root image refused: .*Read-only file system'
expect "the root image cannot be remounted read-write" "$tmp/console" '^vt: rw remount of root image refused'
expect "a raw write to vda fails" "$tmp/console" '^vt: raw write to vda refused'
expect "virtio-rng is the guest's hwrng and gives bytes" "$tmp/console" '^vt: rng virtio_rng\.[0-9]+ [0-9a-f]{32}$'
expect "guest->host vsock echo of 300000 bytes (guest side)" "$tmp/console" '^vtest: echo ok 300000 bytes'
expect "guest->host vsock echo (host side)" "$tmp/echo.out" '^vsock_host: echoed 300000 bytes'
expect "host->guest vsock: CONNECT 5001 answered OK, 200000 bytes back" "$tmp/connect.out" '^vsock_host: connect ok: "OK [0-9]+", 200000 bytes'
expect "host->guest vsock (guest side)" "$tmp/console" '^vtest: listen ok, echoed 200000 bytes'
expect "guest init ran to the end" "$tmp/console" '^vt: done'
got=$(debugfs -R 'cat /written-by-guest' "$tmp/test.img" 2>/dev/null)
if [ "$got" = "hello from the guest" ]; then ok "a file the guest wrote is in the writable image"; else not_ok "guest's file in the image: '$got'"; fi
if [ "$(sha256sum <"$ROOT")" = "$root_sum" ]; then ok "root image bytes unchanged"; else not_ok "root image changed"; fi
if [ ! -e "$uds" ]; then ok "vmm removed its vsock socket"; else not_ok "vsock socket $uds left behind"; fi
if [ $bench = 1 ]; then
	echo "# bench: vsock guest->host: $(sed -n 's/^vtest: sent //p' "$tmp/console")"
	echo "# bench: vsock guest->host: $(sed -n 's/^vsock_host: received //p' "$tmp/sink.out")"
	echo "# bench: blk sequential read: $(sed -n 's/^vtest: read //p' "$tmp/console")"
fi
echo "virtio: $pass passed, $fail failed"
[ $fail -eq 0 ]
