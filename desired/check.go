package desired

// Check is what makes a CI failure one prompt (webhook's CI rule). The
// item must exist (store.Ingest.NoCreate applies); a Commit that is not
// the recorded head (Spec.HeadSHA, when known) queues nothing
// (store.IngestResult.StaleCommit); a Conflicts key already claimed for
// the item queues nothing (store.IngestResult.Deduplicated);
// otherwise the delivery is queued and every Claims key is claimed for the
// item, in the same transaction.
type Check struct {
	Commit    string
	Claims    []string
	Conflicts []string
}
