#!/bin/bash
# rootless-as.sh KVM_NODE CGROUP TMPDIR VMRUN ARGS...: run VMRUN ARGS as
# nobody (65534), without root or any capability, from the cgroup CGROUP,
# in a private mount namespace where KVM_NODE (a copy of /dev/kvm that
# nobody may open) is bound over /dev/kvm. Nothing outside this process
# tree sees the bind. Used by tests/e2e/jail.sh; run as root.
set -eu
node=$1 cg=$2 runs=$3
shift 3
exec unshare -m --propagation private sh -c '
	mount --bind "$1" /dev/kvm
	echo $$ >"$2/cgroup.procs"
	shift 2
	exec setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all --bounding-set=-all "$@"
' rootless-as "$node" "$cg" env TMPDIR="$runs" "$@"
