package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// MaxBranchLen is the longest name BranchName returns, in bytes. Branch
// names become folder names of worktrees, and Windows limits a whole path
// to 260 characters by default.
const MaxBranchLen = 64

// BranchName builds a branch name that git accepts from free text, such as
// an item's id, a task's order and its title:
//
//	BranchName("ITEM-12", "3", "Add the Login page!") == "item-12-3-add-the-login-page"
//
// The rules:
//   - Letters are lower-cased and accents dropped ("Café" gives "cafe").
//   - The parts are joined by spaces, and the text is cut into words at
//     every character other than a-z, 0-9 and '.'; the words are joined
//     by '-'. So '-', '_', spaces and punctuation all become one '-', and
//     letters outside a-z (other scripts) are left out.
//   - A '/' in a part is kept as a separator of name components, so a
//     part "agentrunner/" puts the branches in a folder of their own;
//     empty components are dropped.
//   - Runs of '.' become one '.', and words neither start nor end with
//     one, so there is no "..", no component starting with '.' and no
//     ending "."; a component ending in ".lock" ends in "-lock" instead.
//   - A name longer than MaxBranchLen is cut and ends in '-' and eight hex
//     digits of a hash of the whole name, so names that differ only past
//     the cut stay different; put what tells tasks apart (the order)
//     before free text anyway.
//
// The result is "" when no part has a letter or a digit: that is no
// branch name, and Ensure refuses it.
func BranchName(parts ...string) string {
	text := fold(strings.Join(parts, " "))
	var comps []string
	for _, comp := range strings.Split(text, "/") {
		if slug := slugWords(comp); slug != "" {
			comps = append(comps, slug)
		}
	}
	return noLock(bound(strings.Join(comps, "/")))
}

// fold lower-cases s and drops accents: it decomposes each letter and
// leaves out the combining marks.
func fold(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// slugWords joins the words of one name component with '-'.
func slugWords(comp string) string {
	var words []string
	for _, w := range strings.FieldsFunc(comp, notWordRune) {
		if w = tidyDots(w); w != "" {
			words = append(words, w)
		}
	}
	return strings.Join(words, "-")
}

// notWordRune reports the runes that separate words.
func notWordRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.')
}

// tidyDots collapses runs of '.' in a word and trims them off its ends.
func tidyDots(w string) string {
	for strings.Contains(w, "..") {
		w = strings.ReplaceAll(w, "..", ".")
	}
	return strings.Trim(w, ".")
}

// bound cuts a name longer than MaxBranchLen and ends it in a hash of the
// whole name.
func bound(name string) string {
	if len(name) <= MaxBranchLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "-" + hex.EncodeToString(sum[:4])
	head := strings.TrimRight(name[:MaxBranchLen-len(tail)], "-./")
	return head + tail
}

// noLock renames components ending in ".lock", which git reserves for its
// lock files.
func noLock(name string) string {
	comps := strings.Split(name, "/")
	for i, c := range comps {
		if strings.HasSuffix(c, ".lock") {
			comps[i] = strings.TrimSuffix(c, ".lock") + "-lock"
		}
	}
	return strings.Join(comps, "/")
}
