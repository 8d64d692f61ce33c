-- SQLite's version 12: GitHub as it behaves. Each delivery's own
-- identity (store.Ingest.Identity), one per item, so that a replay under
-- another delivery id changes nothing; the time of each item's last
-- open/closed change (Ingest's old events); the items by head commit
-- (store.Store.Heads); and the CI of each pull request item's commit
-- (store.Ingest.CI), which replaces the claims of one prompt per check.
ALTER TABLE deliveries ADD COLUMN identity TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX deliveries_by_identity ON deliveries (work_item, identity) WHERE identity <> '';
ALTER TABLE work_items ADD COLUMN flipped_at BIGINT;
CREATE INDEX work_items_by_head ON work_items (head_sha) WHERE head_sha <> '';
DROP TABLE check_claims;
CREATE TABLE ci_commits (
	work_item  TEXT COLLATE "C" NOT NULL REFERENCES work_items (key),
	commit_sha TEXT NOT NULL,
	state      TEXT NOT NULL CHECK (state IN ('collecting', 'sent', 'stale')),
	checks     TEXT NOT NULL,
	failed     BIGINT NOT NULL CHECK (failed >= 0),
	last_at    BIGINT,
	delivery   TEXT NOT NULL,
	PRIMARY KEY (work_item, commit_sha)
);
CREATE INDEX ci_commits_collecting ON ci_commits (last_at) WHERE state = 'collecting' AND failed > 0;
