# signal_parser.sh: reads SIGNAL BLOCKs. Sourced by the agents, not run:
#   . "$WORKSPACE/lib/signal_parser.sh"
#
# A SIGNAL BLOCK is a line that is exactly `SIGNAL BLOCK` and, on the next
# line, its status line:
#   Agent=comparator | Cycle=2026-11-27-001 | Step=COMPARE | Confidence=4 | Risk=low | Next=diagnoser
# The agents' sections accumulate in one document, so the LAST block is the
# one that counts.

# signal_last FILE prints the status line of the last SIGNAL BLOCK in FILE,
# trimmed. With no block it prints nothing and returns 1.
signal_last() {
	awk '
		{ t = $0; gsub(/^[ \t\r]+|[ \t\r]+$/, "", t) }
		t == "SIGNAL BLOCK" { at = NR; line = ""; next }
		at && NR == at + 1 { line = t }
		END { if (line == "") exit 1; print line }
	' "$1"
}

# signal_field LINE KEY prints the value of KEY in a status line
# `A=x | B=y`, trimmed (keys compare without case). Returns 1 if KEY is
# absent.
signal_field() {
	printf '%s\n' "$1" | awk -v want="$2" '
		{
			n = split($0, part, "|")
			for (i = 1; i <= n; i++) {
				eq = index(part[i], "=")
				if (eq == 0) continue
				k = substr(part[i], 1, eq - 1); v = substr(part[i], eq + 1)
				gsub(/^[ \t]+|[ \t]+$/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
				if (tolower(k) == tolower(want)) { print v; found = 1; exit }
			}
		}
		END { exit !found }
	'
}
