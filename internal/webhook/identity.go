package webhook

import (
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
)

// identity returns the event's own identity (desired.Ingest.Identity):
// the event name, its action and parts, joined by spaces, the first part
// the thing's own id (a comment's, a review's, a check run's) or the
// item's updated_at; empty parts are left out. GitHub's signature covers the body, not
// X-GitHub-Delivery, so a body sent again under another delivery id is a
// replay of the same identity. A payload whose first part is missing has
// none ("").
func identity(event, action string, parts ...string) string {
	if len(parts) == 0 || parts[0] == "" {
		return ""
	}
	out := []string{event, action}
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// id is a numeric id as an identity part, "" for none.
func id(n int64) string {
	if n <= 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// stamp is a payload's time as an identity part, "" for none.
func stamp(t github.Timestamp) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
