package ghapi

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/doubling"
)

// LimitKind is which of GitHub's rate limits a failed call met
// (Verdict.Limit), "" for none.
type LimitKind = desired.PauseKind

// Limits holds GitHub's rate limits for each installation a worker sends
// calls of (GitHub's REST API docs, "Rate limits for the REST API", and
// "Best practices for using the REST API"), so that a limit met by one
// call pauses the installation's others instead of each call meeting it
// on its own:
//   - a secondary limit (a 403 or 429 saying so, or any answer with
//     Retry-After) pauses every content write of the installation: for
//     Retry-After when GitHub names one, else for MinPause, doubling
//     (at most MaxPause) while the limit persists; the first write after a
//     pause is the one probe, and one that goes through ends the streak;
//   - a primary limit (x-ratelimit-remaining 0) pauses every call until
//     x-ratelimit-reset;
//   - outside a pause, content writes go one at a time at least Gap
//     apart (GitHub asks for a second between content-creating requests,
//     and at most 80 a minute: a second apart is at most 60).
//
// Every call loopd makes writes content (a comment, a reaction), so a
// pause of either kind holds all of them. Safe for concurrent use.
type Limits struct {
	Gap, MinPause, MaxPause time.Duration

	mu     sync.Mutex
	pauses map[pauseKey]desired.Pause
	last   map[string]time.Time // the end of each installation's last write
}

type pauseKey struct {
	installation string
	kind         LimitKind
}

// NewLimits returns Limits with the given gap and pause bounds
// (schema.DefaultGitHubWriteGap, DefaultGitHubPauseMin, DefaultGitHubPauseMax
// in the daemon).
func NewLimits(gap, minPause, maxPause time.Duration) *Limits {
	return &Limits{Gap: gap, MinPause: minPause, MaxPause: maxPause,
		pauses: map[pauseKey]desired.Pause{}, last: map[string]time.Time{}}
}

// Load takes the pauses recorded in the store (by this process before a
// restart, or by another loopd sharing it) where they end later, or carry
// a longer streak, than the ones held.
func (l *Limits) Load(pauses []desired.Pause) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pauses {
		k := pauseKey{p.Installation, p.Kind}
		if old, ok := l.pauses[k]; !ok || p.Until.After(old.Until) || p.Streak > old.Streak {
			l.pauses[k] = p
		}
	}
}

// Admit says whether a call of installation may be made at now: not while
// a pause holds it (ok false, until the pause's end), and otherwise after
// wait, the rest of the Gap since its last write.
func (l *Limits) Admit(installation string, now time.Time) (wait time.Duration, until time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kind := range []LimitKind{desired.PausePrimary, desired.PauseSecondary} {
		if p, held := l.pauses[pauseKey{installation, kind}]; held && p.Holds(now) {
			if p.Until.After(until) {
				until = p.Until
			}
		}
	}
	if !until.IsZero() {
		return 0, until, false
	}
	if last, ok := l.last[installation]; ok {
		wait = max(last.Add(l.Gap).Sub(now), 0)
	}
	return wait, time.Time{}, true
}

// Wrote records that a call of installation ended at now: GitHub took it
// (or, wrote false, it found its comment already there and sent nothing).
// A write that went through ends the installation's streak of secondary
// limits; the pauses it ends are returned, for the store.
func (l *Limits) Wrote(installation string, now time.Time, wrote bool) (ended []desired.Pause) {
	if !wrote {
		return nil // a comment found: no write went through the limit
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[installation] = now
	for _, kind := range []LimitKind{desired.PauseSecondary, desired.PausePrimary} {
		k := pauseKey{installation, kind}
		if _, held := l.pauses[k]; held {
			delete(l.pauses, k)
			ended = append(ended, desired.Pause{Installation: installation, Kind: kind})
		}
	}
	return ended
}

// Limited records that a call of installation met the limit v names at
// now (v.Limit set), and returns the pause it starts.
func (l *Limits) Limited(installation string, v Verdict, now time.Time) desired.Pause {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := pauseKey{installation, v.Limit}
	p := l.pauses[k]
	if p.Streak == 0 {
		p.Since = now
	}
	p.Installation, p.Kind, p.Streak = installation, v.Limit, p.Streak+1
	p.HTTPStatus, p.Message = v.HTTPStatus, v.Message
	d := v.After
	switch {
	case d > 0:
	case v.Limit == desired.PauseSecondary:
		d = doubling.Nth(l.MinPause, l.MaxPause, p.Streak)
	default:
		d = l.MinPause // a primary limit that named no reset
	}
	p.Until = now.Add(d)
	l.last[installation] = now
	l.pauses[k] = p
	return p
}

// Pauses returns the pauses held, ended ones included until a write ends
// them, by installation and kind.
func (l *Limits) Pauses() []desired.Pause {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]desired.Pause, 0, len(l.pauses))
	for _, p := range l.pauses {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Installation != out[j].Installation {
			return out[i].Installation < out[j].Installation
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// pausedDesc is loopd_github_paused_seconds: how long each installation's
// calls of a kind stay paused, from the scrape.
var pausedDesc = prometheus.NewDesc("loopd_github_paused_seconds",
	"Seconds left of a pause of an installation's GitHub calls that a rate limit asked for (limit: secondary holds its content writes, primary every call); 0 once it ended.",
	[]string{"installation", "limit"}, nil)

// Collector returns the prometheus collector of l's pauses
// (loopd_github_paused_seconds), read at each scrape by now.
func (l *Limits) Collector(now func() time.Time) prometheus.Collector {
	return pauseCollector{l: l, now: now}
}

type pauseCollector struct {
	l   *Limits
	now func() time.Time
}

func (c pauseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pausedDesc }

func (c pauseCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, p := range c.l.Pauses() {
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, max(p.Until.Sub(now), 0).Seconds(), p.Installation, string(p.Kind))
	}
}
