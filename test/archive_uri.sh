#!/bin/sh
# Prints the URI of the Debian archive this machine installs its own
# release from (the first URIs: of the deb822 stanza of
# /etc/apt/sources.list.d that names its codename, else the first line of
# /etc/apt/sources.list that does), or Debian's own when neither does:
# test/pg_build.sh adds a suite's source packages from it, and
# test/ci_fresh.sh makes a Debian root from it.  Prints nothing else.
set -eu
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
uri=$(awk -v suite="$codename" '
	BEGIN { RS = "" }
	{
		n = split($0, line, "\n")
		uris = ""
		suites = ""
		for (i = 1; i <= n; i++) {
			if (line[i] ~ /^URIs:/)
				uris = substr(line[i], 6)
			if (line[i] ~ /^Suites:/)
				suites = " " substr(line[i], 8) " "
		}
		gsub(/[ \t]+/, " ", suites)
		if (index(suites, " " suite " ")) {
			split(uris, uri, " ")
			print uri[1]
			exit
		}
	}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
	# deb [options] URI SUITE COMPONENT...
	uri=$(awk -v suite="$codename" '
		$1 == "deb" {
			i = 2
			if ($i ~ /^\[/)
				while (i <= NF && $i !~ /\]$/)
					i++
			if ($i ~ /\]$/)
				i++
			if ($(i + 1) == suite) {
				print $i
				exit
			}
		}' /etc/apt/sources.list)
fi
echo "${uri:-http://deb.debian.org/debian}"
