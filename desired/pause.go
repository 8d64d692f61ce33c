package desired

import "time"

// PauseKind is which of an installation's GitHub calls a pause holds.
type PauseKind string

// The kinds of pause (GitHub's REST API docs, "Rate limits for the REST
// API").
const (
	// PauseSecondary holds every content write (a comment, a reaction):
	// GitHub answered one with its secondary rate limit.
	PauseSecondary PauseKind = "secondary"
	// PausePrimary holds every call until the installation's hourly
	// budget resets (x-ratelimit-reset).
	PausePrimary PauseKind = "primary"
)

// Pause is a pause of the GitHub calls of one installation, which GitHub
// asked for by a rate limit. It is kept in the store, so that every loopd
// sharing it, and loopd get, sees it, and a restart still honours it.
type Pause struct {
	// Installation names whose calls pause: "installation <id>" for a
	// GitHub App's, "token" for a token's.
	Installation string
	Kind         PauseKind
	// Until is when calls may go again (the next is a probe); Since is
	// when the limit was first met, Streak how many limits in a row it has
	// met since without a call going through.
	Until, Since time.Time
	Streak       int
	// HTTPStatus and Message are GitHub's last answer.
	HTTPStatus int
	Message    string
}

// Holds reports whether p still holds its installation's calls at now.
func (p Pause) Holds(now time.Time) bool { return now.Before(p.Until) }
