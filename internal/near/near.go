// Package near finds what a mistyped name was meant to be, for the "did
// you mean" of an error: a config key, a phase, a command's argument.
package near

import (
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// maxEdits is how far a near miss may be from its name: two edits
// (insertions, deletions or substitutions), as cobra's command
// suggestions (Command.SuggestionsMinimumDistance's default).
const maxEdits = 2

// Names returns the candidates got is a near miss of, nearest first and in
// the candidates' order among equals: those equal to got but for case,
// then those within two edits of it, compared without case. Nothing is
// near an empty got.
func Names(got string, candidates []string) []string {
	type hit struct {
		name  string
		edits int
	}
	lower := strings.ToLower(got)
	var hits []hit
	for _, c := range candidates {
		if got == "" || c == got {
			continue
		}
		if d := levenshtein.ComputeDistance(lower, strings.ToLower(c)); d <= maxEdits {
			hits = append(hits, hit{c, d})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.edits - b.edits })
	var out []string
	for _, h := range hits {
		out = append(out, h.name)
	}
	return out
}

// DidYouMean is the tail of an error naming names: "" for none, else
// "; did you mean X?" or "; did you mean one of X, Y?".
func DidYouMean(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + names[0] + "?"
	}
	return "; did you mean one of " + strings.Join(names, ", ") + "?"
}
