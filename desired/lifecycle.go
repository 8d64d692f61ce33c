package desired

import (
	"slices"
	"time"
)

// The delivery lifecycle. A delivery moves
//
//	pending ─▶ carried as a boot prompt ─▶ delivered
//	pending ─▶ sending (pasted) ─────────▶ delivered
//
// and back to pending when the spawn or the pane that carried it ends
// before it reached the conversation. Pending and delivered are the
// delivery's own row (deliveries.state in the SQLite store): the one record
// of whether it was delivered, written by PutStatus's delivered list in the
// same transaction as the status, and Record.Pending holds exactly the
// deliveries not delivered. The status only names what is in flight: the
// boot prompt of the current spawn (SpawnDeliveryID) and the paste not yet
// seen in the conversation (SendingDeliveryID, SentAt, SendAttempts). The
// transitions below are the only code that writes those fields.

// Carry returns s with delivery id carried as the boot prompt of the spawn
// being recorded; "" for a spawn that boots with no delivery (a nudge, or
// the header of an event too long for argv).
func (s Status) Carry(id string) Status {
	s.SpawnDeliveryID = id
	return s
}

// Send returns s with delivery id pasted at at. A paste of the delivery
// already in flight (retry) is one more attempt; any other starts at one.
func (s Status) Send(id string, at time.Time, retry bool) Status {
	attempts := 1
	if retry && s.SendingDeliveryID == id {
		attempts = s.SendAttempts + 1
	}
	s.SendingDeliveryID, s.SentAt, s.SendAttempts = id, at, attempts
	return s
}

// Resubmit returns s after the text of the paste in flight, left in the
// input box, was submitted again at at: one more attempt.
func (s Status) Resubmit(at time.Time) Status {
	s.SentAt, s.SendAttempts = at, s.SendAttempts+1
	return s
}

// Deliver returns s once delivery id reached the conversation: it is no
// longer in flight, as boot prompt or as paste. The caller records the
// delivery itself as delivered in the same write (PutStatus).
func (s Status) Deliver(id string) Status {
	if id == "" {
		return s
	}
	if s.SendingDeliveryID == id {
		s = s.DropSend()
	}
	if s.SpawnDeliveryID == id {
		s.SpawnDeliveryID = ""
	}
	return s
}

// deliveredKept bounds Status.DeliveredAt, above the largest
// maxDeliveriesPerHour the config accepts (1000).
const deliveredKept = 1024

// Counted returns s with one more delivery counted at at, for the loop
// breaker: DeliveredAt keeps the times within window of at, and at most
// deliveredKept of them. s's slice is left unchanged.
func (s Status) Counted(at time.Time, window time.Duration) Status {
	kept := make([]time.Time, 0, len(s.DeliveredAt)+1)
	for _, t := range s.DeliveredAt {
		if at.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	kept = append(kept, at)
	if over := len(kept) - deliveredKept; over > 0 {
		kept = kept[over:]
	}
	s.DeliveredAt = kept
	return s
}

// DropSend returns s with the paste in flight given up (the pane died, the
// item was stopped or needs attention): unless it was delivered, its
// delivery is pending again and goes with the next spawn or paste.
func (s Status) DropSend() Status {
	s.SendingDeliveryID, s.SentAt, s.SendAttempts = "", time.Time{}, 0
	return s
}

// DropInFlight returns s with both the boot prompt and the paste in flight
// given up: the session ended (a stop).
func (s Status) DropInFlight() Status {
	s = s.DropSend()
	s.SpawnDeliveryID = ""
	return s
}

// RetiredSessionIDsMax bounds Status.RetiredSessionIDs.
const RetiredSessionIDsMax = 16

// Retire returns s with id added to the retired conversation ids, newest
// last, keeping at most RetiredSessionIDsMax; s's slice is left unchanged.
// A retired id is never resumed again.
func (s Status) Retire(id string) Status {
	if id == "" || slices.Contains(s.RetiredSessionIDs, id) {
		return s
	}
	ids := append(slices.Clone(s.RetiredSessionIDs), id)
	if over := len(ids) - RetiredSessionIDsMax; over > 0 {
		ids = ids[over:]
	}
	s.RetiredSessionIDs = ids
	return s
}

// Follow returns s in the conversation id the running harness reported
// (Claude Code's /clear starts a new one) or loopd learned (Codex's
// rollout): the recorded and confirmed ids become id, the id is no longer
// unconfirmed, and the counts that judge a conversation, fast failures and
// churn, start again, since the new conversation has not died yet; the
// item's failed runs, which the restart budget counts, are kept.
func (s Status) Follow(id string) Status {
	s.HarnessSessionID, s.ConfirmedSessionID = id, id
	s.IDUnconfirmed = false
	s.FastFailures, s.ChurnFailures, s.LastWords = 0, 0, ""
	return s
}

// HadConversation reports whether the item's harness started a
// conversation: an id is recorded, or one is still to be learned
// (IDUnconfirmed).
func (s Status) HadConversation() bool { return s.HarnessSessionID != "" || s.IDUnconfirmed }

// Retired reports whether id was retired.
func (s Status) Retired(id string) bool { return slices.Contains(s.RetiredSessionIDs, id) }

// Released returns s after an operator's release of generation (the
// Spec.ReleaseGeneration it carries out): the restart budget's counts,
// any wait, the deliveries the loop breaker counts and a usage limit the
// item reported are cleared (the operator says it is over: LimitSeen is
// marked Released and kept in ReleasedLimits, and no released limit is
// taken again), and the item goes
// to phase; a fresh release also retires the conversation retire, clears
// its churn count and asks for a new conversation (FreshRequested) until
// the next fresh spawn.
func (s Status) Released(generation int64, phase Phase, fresh bool, retire string) Status {
	s.Phase = phase
	s.Failures, s.FastFailures, s.NextAttempt = 0, 0, time.Time{}
	s.LimitReset, s.LimitUntil, s.LimitDefault = time.Time{}, time.Time{}, false
	s.LimitSeen.Released = s.LimitSeen != (SeenLimit{})
	s = s.releaseLimit(s.LimitSeen)
	s.ReleasedGeneration = generation
	s.Reason = "released"
	// A release ends a delivery storm: the deliveries counted so far are
	// the operator's to judge, not the next hour's.
	s.DeliveredAt = nil
	s.NoticedBlock = ""
	if fresh {
		s = s.Retire(retire)
		s.FreshRequested, s.ChurnFailures = true, 0
	}
	return s
}

// Clone returns s with its own copies of the slices and the pointers it
// holds, so that a change to one never shows in the other.
func (s Status) Clone() Status {
	s.RetiredSessionIDs = slices.Clone(s.RetiredSessionIDs)
	s.DeliveredAt = slices.Clone(s.DeliveredAt)
	s.ReleasedLimits = slices.Clone(s.ReleasedLimits)
	s.AmbiguousIDs = slices.Clone(s.AmbiguousIDs)
	s.HarnessNames = slices.Clone(s.HarnessNames)
	s.CountedIDs = slices.Clone(s.CountedIDs)
	s.Hours = slices.Clone(s.Hours)
	if s.LastExitStatus != nil {
		v := *s.LastExitStatus
		s.LastExitStatus = &v
	}
	if s.Replaced != nil {
		x := *s.Replaced
		s.Replaced = &x
	}
	s.Answers = slices.Clone(s.Answers)
	if s.Question != nil {
		q := *s.Question
		q.Context, q.Choices = slices.Clone(q.Context), slices.Clone(q.Choices)
		s.Question = &q
	}
	return s
}
