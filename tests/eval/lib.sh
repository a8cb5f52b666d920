# The eval scripts' JSON writers (sourced by run.sh and corrupt_images.sh).

# A JSON string of $1 (control characters other than newline and tab dropped).
jstr() {
	printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\010\013-\037' |
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}
# A JSON array of the lines of $1.
jlines() {
	local first=1 l
	printf '['
	while IFS= read -r l; do
		[ -n "$l" ] || continue
		[ $first = 1 ] || printf ','
		first=0
		jstr "$l"
	done <<<"$1"
	printf ']'
}
