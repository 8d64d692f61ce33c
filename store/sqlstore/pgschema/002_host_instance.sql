-- SQLite's version 9: the instance (desired.Host.Instance) that heartbeats
-- under each host name, so that two live daemons never share one; '' for
-- a row written before.
ALTER TABLE hosts ADD COLUMN instance TEXT NOT NULL DEFAULT '';
