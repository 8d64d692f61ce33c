package desired

// Check is what makes a CI failure one prompt (webhook's CI rule). The
// item must exist (NoCreate applies); a Commit that is not the recorded
// head (Spec.HeadSHA, when known) queues nothing (StaleCommit); a Conflicts
// key already claimed for the item queues nothing (Deduplicated);
// otherwise the delivery is queued and every Claims key is claimed for the
// item, in the same transaction.
type Check struct {
	Commit    string
	Claims    []string
	Conflicts []string
}
