package desired

import "strings"

// ReplayLatest is how many of an item's latest delivered events a replay
// asks the store for (store.Store.History), besides the opening one.
const ReplayLatest = 8

// Replay returns the text that replays history, the events an item's agent
// was already given (store.Store.History: its opening event and its latest ones,
// in arrival order), for a fresh conversation that replaces the one that
// held them: codev's fallback replays its original prompt, and an agent
// told only "read the issue" starts over.
//
// Each event is its stored prompt, whole: the header line loopd wrote,
// then the untrusted body inside its frame (FrameBegin, FrameEnd), exactly
// as ingest rendered it (webhook.Render), so a replayed body is framed as
// untrusted like any other event and cannot forge the end of its block. A
// prompt is never cut (a cut frame would read as a mangled event): the
// result holds at most max bytes, taking the opening event first, then the
// latest events from the newest back; an event that does not fit is left
// out, and the text says how many were. It returns the text and how many
// events it replays; "" and 0 when history is empty or nothing fits.
func Replay(history []Delivery, max int) (string, int) {
	if len(history) == 0 {
		return "", 0
	}
	intro := func(kept int) string { return replayIntro(len(history) - kept) }
	// Reserve room for the longest intro.
	room := max - len(intro(0))
	keep := make([]bool, len(history))
	kept := 0
	take := func(i int) {
		if n := len(history[i].Prompt) + 1; !keep[i] && n <= room {
			keep[i], room, kept = true, room-n, kept+1
		}
	}
	take(0)
	for i := len(history) - 1; i > 0; i-- {
		take(i)
	}
	if kept == 0 {
		return "", 0
	}
	var b strings.Builder
	b.WriteString(intro(kept))
	for i, d := range history {
		if keep[i] {
			b.WriteString(d.Prompt)
			if !strings.HasSuffix(d.Prompt, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), kept
}
