package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// This file holds the planner's part of "never talk to itself": the
// agent's own push is dropped, and the loop breaker stops an item that
// gets more events than its route allows in an hour.

// isPush reports whether d is a push to a pull request
// (pull_request.synchronize) that names its new head: the only kind of
// delivery that can be the agent's own push.
func isPush(d desired.Delivery) bool {
	return d.Event == "pull_request" && d.Action == "synchronize" && d.Commit != ""
}

// pushCommits returns the commits of rec's pending pushes that observation
// must look for in its workdir (observed.Need.Commits): those not in
// flight, since what is in flight is already being delivered.
func pushCommits(rec desired.Record) []string {
	var out []string
	for _, d := range rec.Pending {
		if isPush(d) && !inFlight(rec.Status, d.ID) {
			out = append(out, d.Commit)
		}
	}
	return out
}

// inFlight reports whether delivery id is the paste or the boot prompt in
// flight.
func inFlight(st desired.Status, id string) bool {
	return id == st.SendingDeliveryID || id == st.SpawnDeliveryID
}

// dropOwnPushes drops, before the item is planned, each pending push whose
// new head the item's workdir already holds (observed.Observation.Holds):
// the agent pushed it itself, from that workdir, and being told about it
// would make it react to its own work. A push the workdir does not hold,
// or that observation could not read, stays pending. rec comes back as the
// executor will leave it.
func dropOwnPushes(rp *desired.Record, obs *observed.Observation, _ *Policy) ([]actions.Action, *desired.Record, bool) {
	held := obs.Holds[rp.Key]
	if len(held) == 0 {
		return nil, rp, false
	}
	r := *rp
	var (
		out     []actions.Action
		pending []desired.Delivery
	)
	for _, d := range r.Pending {
		if isPush(d) && !inFlight(r.Status, d.ID) && held[d.Commit] {
			out = append(out, actions.DropDelivery{Key: r.Key, DeliveryID: d.ID, Commit: d.Commit, Reason: actions.ReasonOwnPush})
			continue
		}
		pending = append(pending, d)
	}
	r.Pending = pending
	return out, &r, false
}

// stormed is the loop breaker: it reports whether one more delivery to r
// at now would be more than its route's maxDeliveriesPerHour within
// schema.DeliveryStormWindow, counted from the times its deliveries
// reached the conversation (desired.Status.DeliveredAt). An item whose
// repository lost its route keeps the default bound.
func stormed(r *desired.Record, p *Policy, now time.Time) bool {
	limit := schema.DefaultMaxDeliveriesPerHour
	if route, ok := p.route(r.Key); ok {
		limit = route.MaxDeliveries()
	}
	n := 0
	for _, t := range r.Status.DeliveredAt {
		if now.Sub(t) < schema.DeliveryStormWindow {
			n++
		}
	}
	return n >= limit
}
