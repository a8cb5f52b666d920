#!/bin/sh
# cache-report.sh before|after FILE: what make check found in the cache
# (${VMRUN_CACHE:-/var/cache/vmrun}) and what it had to add.
#   before FILE   note the cache's entries (and its packages) in FILE
#   after FILE    one line: "caches: warm", or "caches: cold: built ..."
#                 naming every entry that appeared since (kernels, root
#                 images, emulated hosts) and how many packages came in
set -u
cache=${VMRUN_CACHE:-/var/cache/vmrun}
list() {
	ls -A "$cache" 2>/dev/null | grep -v '^\.'
	n=$(ls "$cache/debs" 2>/dev/null | wc -l)
	echo "debs:$n"
}
case ${1:-} in
before) list >"$2" ;;
after)
	now=$(list)
	was=$(cat "$2" 2>/dev/null)
	debs_was=$(echo "$was" | sed -n 's/^debs://p')
	debs_now=$(echo "$now" | sed -n 's/^debs://p')
	new=$(echo "$now" | grep -v '^debs:' | grep -vxF -f "$2" 2>/dev/null | tr '\n' ' ')
	got=$(( ${debs_now:-0} - ${debs_was:-0} ))
	if [ -z "$new" ] && [ "$got" -le 0 ]; then
		echo "caches: warm (nothing added to $cache)"
	else
		echo "caches: cold: built ${new:-nothing new}; $got packages downloaded (into $cache)"
	fi
	;;
*) echo "usage: $0 before|after FILE" >&2; exit 2 ;;
esac
