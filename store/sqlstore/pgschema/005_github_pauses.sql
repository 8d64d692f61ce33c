-- SQLite's version 13: the pauses of each installation's GitHub calls
-- that its rate limits asked for (desired.Pause).
CREATE TABLE github_pauses (
	installation TEXT NOT NULL CHECK (installation <> ''),
	kind         TEXT NOT NULL CHECK (kind IN ('secondary', 'primary')),
	until        BIGINT,
	since        BIGINT,
	streak       BIGINT NOT NULL CHECK (streak >= 0),
	http_status  BIGINT NOT NULL,
	message      TEXT NOT NULL,
	PRIMARY KEY (installation, kind)
);
