#!/bin/bash
# e2fsprogs' corrupt file system images (its tests/*/image*), for the eval's
# corrupt-workspace case: the source package of the installed e2fsprogs
# (the libext2fs the extractor links), fetched through apt with a deb-src
# list of this script's own, so apt checks the archive's signature and the
# system's apt state is not touched. Kept in the cache; printed: the
# directory holding the compressed images, tests/NAME/image*.
#   e2fs-test-images.sh [CACHE]
set -eu
cache=${1:-${VMRUN_CACHE:-/var/cache/vmrun}}
version=$(dpkg-query -W -f '${source:Version}' e2fsprogs)
upstream=${version%-*}
dir=$cache/e2fsprogs-tests-$version
if [ ! -f "$dir/.complete" ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/e2fs-src.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
	. /etc/os-release
	cat >"$work/parts/src.sources" <<-EOF
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: $VERSION_CODENAME
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	apt=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
		-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
	apt-get "${apt[@]}" -qq update >&2
	(cd "$work/src" && apt-get "${apt[@]}" -qq source --download-only "e2fsprogs=$version" >&2)
	mkdir -p "$work/out"
	tar -xzf "$work/src/e2fsprogs_$upstream.orig.tar.gz" -C "$work/out" --strip-components=1 \
		--wildcards '*/tests/*/image*'
	rm -rf "$dir"
	mkdir -p "$cache"
	mv "$work/out/tests" "$dir"
	touch "$dir/.complete"
fi
echo "$dir"
