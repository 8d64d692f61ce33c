package reconciler

import (
	"errors"
	"slices"

	"github.com/loopd/loopd/desired"
)

// ErrNoTaker means a drain would leave its host's items with no host to
// take them.
var ErrNoTaker = errors.New("no other live host that is not draining can take its items")

// DrainTaker returns ErrNoTaker unless a host of hosts other than host is
// live and not draining, so that a drain of host has somewhere to move
// its items; nil when there is one.
func DrainTaker(hosts []desired.Host, host string) error {
	if slices.ContainsFunc(hosts, func(h desired.Host) bool { return h.Name != host && h.Live && !h.Draining }) {
		return nil
	}
	return ErrNoTaker
}

// DrainMoves returns the keys of what a drain of host moves: the items of
// records whose lease names host, in records' order.
func DrainMoves(records []desired.Record, host string) []desired.Key {
	var keys []desired.Key
	for _, r := range records {
		if r.Lease.Owner == host {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// DrainLeft returns those of keys (DrainMoves) that still wait for their
// move off host, in keys' order: an item needs no wait once another live
// host of hosts holds it, once it needs no host (desired.Record.NeedsHost),
// or once it is gone from records; a released item no host holds yet
// still waits.
func DrainLeft(records []desired.Record, hosts []desired.Host, host string, keys []desired.Key) []desired.Key {
	live := map[string]bool{}
	for _, h := range hosts {
		live[h.Name] = h.Live
	}
	byKey := map[desired.Key]desired.Record{}
	for _, r := range records {
		byKey[r.Key] = r
	}
	var left []desired.Key
	for _, k := range keys {
		r, ok := byKey[k]
		if !ok || !r.NeedsHost() || (r.Lease.Owner != host && live[r.Lease.Owner]) {
			continue
		}
		left = append(left, k)
	}
	return left
}
