-- SQLite's version 11: what decides whether an item's harness may read its
-- workdir's own settings (reconciler.ProjectSettingsOf): a pull request's
-- head repository (desired.Spec.HeadRepo), who opened the item
-- (desired.Spec.Author) and who pushed its head commit
-- (desired.Spec.HeadPusher).
ALTER TABLE work_items ADD COLUMN head_repo TEXT NOT NULL DEFAULT '';
ALTER TABLE work_items ADD COLUMN author TEXT NOT NULL DEFAULT '';
ALTER TABLE work_items ADD COLUMN head_pusher TEXT NOT NULL DEFAULT '';
