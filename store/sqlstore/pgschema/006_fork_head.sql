-- SQLite's version 14: whether a fork's pull request lets the base
-- repository's maintainers push to its head
-- (desired.Spec.MaintainerCanModify).
ALTER TABLE work_items ADD COLUMN maintainer_can_modify BOOLEAN NOT NULL DEFAULT FALSE;
