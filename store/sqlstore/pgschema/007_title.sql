-- SQLite's version 15: the issue's or pull request's title and page on
-- GitHub (desired.Spec.Title, URL).
ALTER TABLE work_items ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE work_items ADD COLUMN url TEXT NOT NULL DEFAULT '';
