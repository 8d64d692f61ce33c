-- SQLite's version 16: the GitHub App installation the item's deliveries
-- came through (desired.Spec.Installation), 0 for none named.
ALTER TABLE work_items ADD COLUMN installation BIGINT NOT NULL DEFAULT 0;
