-- The schema of SQLite's version 8 (store/sqlstore/sqlite.go's migrations), in
-- PostgreSQL's types: booleans as BOOLEAN, integers and times (Unix
-- nanoseconds, NULL for a zero time) as BIGINT, blobs as BYTEA. The keys
-- and the columns Records orders by use the "C" collation, so that items
-- sort by bytes, as in SQLite, whatever the database's locale.

CREATE TABLE work_items (
	key                TEXT COLLATE "C" PRIMARY KEY,
	owner              TEXT COLLATE "C" NOT NULL CHECK (owner <> ''),
	repo               TEXT COLLATE "C" NOT NULL CHECK (repo <> ''),
	number             BIGINT NOT NULL CHECK (number > 0),
	kind               TEXT NOT NULL,
	harness            TEXT NOT NULL,
	cwd                TEXT NOT NULL,
	closed             BOOLEAN NOT NULL,
	state_changed_at   BIGINT,
	held               BOOLEAN NOT NULL,
	generation         BIGINT NOT NULL,
	status             TEXT NOT NULL,
	updated_at         BIGINT NOT NULL,
	release_generation BIGINT NOT NULL DEFAULT 0,
	release_fresh      BOOLEAN NOT NULL DEFAULT FALSE,
	head_ref           TEXT NOT NULL DEFAULT '',
	head_sha           TEXT NOT NULL DEFAULT '',
	head_at            BIGINT,
	lease_owner        TEXT COLLATE "C" NOT NULL DEFAULT '',
	lease_generation   BIGINT NOT NULL DEFAULT 0 CHECK (lease_generation >= 0),
	CHECK (key = owner || '/' || repo || '#' || number)
);
CREATE INDEX work_items_by_key_parts ON work_items (owner, repo, number);
CREATE INDEX work_items_by_lease_owner ON work_items (lease_owner);

-- seq is arrival order: inserts run under the writers' advisory lock, so
-- a greater seq is always committed later (pendingCache relies on it).
CREATE TABLE deliveries (
	seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            TEXT NOT NULL UNIQUE,
	work_item     TEXT COLLATE "C" NOT NULL REFERENCES work_items (key),
	event         TEXT NOT NULL,
	action        TEXT NOT NULL,
	sender        TEXT NOT NULL,
	prompt        TEXT NOT NULL,
	received_at   BIGINT,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'state_only')),
	delivered_at  BIGINT,
	commit_sha    TEXT NOT NULL DEFAULT '',
	source_kind   TEXT NOT NULL DEFAULT '',
	source_id     BIGINT NOT NULL DEFAULT 0,
	prompt_bytes  BIGINT NOT NULL DEFAULT 0 CHECK (prompt_bytes >= 0),
	prompt_header TEXT NOT NULL DEFAULT '',
	frame_digest  TEXT NOT NULL DEFAULT ''
);
-- Every column Records reads of a pending delivery (compactColumns), so
-- that a pass reads the index alone.
CREATE INDEX deliveries_pending ON deliveries (work_item, seq)
	INCLUDE (id, event, action, sender, received_at, commit_sha, source_kind, source_id,
		prompt_bytes, prompt_header, frame_digest)
	WHERE state = 'pending';

CREATE TABLE events (
	id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	time      BIGINT,
	name      TEXT NOT NULL,
	level     BIGINT NOT NULL,
	work_item TEXT COLLATE "C" NOT NULL,
	attrs     TEXT NOT NULL
);
CREATE INDEX events_by_work_item ON events (work_item, time);
CREATE INDEX events_by_time ON events (time);

CREATE TABLE session_reports (
	work_item  TEXT COLLATE "C" PRIMARY KEY REFERENCES work_items (key),
	session_id TEXT NOT NULL,
	source     TEXT NOT NULL,
	at         BIGINT
);

CREATE TABLE check_claims (
	work_item TEXT COLLATE "C" NOT NULL REFERENCES work_items (key),
	claim     TEXT NOT NULL,
	delivery  TEXT NOT NULL,
	PRIMARY KEY (work_item, claim)
);

CREATE TABLE outbox (
	id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	work_item    TEXT COLLATE "C" NOT NULL REFERENCES work_items (key),
	kind         TEXT NOT NULL CHECK (kind IN ('announce', 'react', 'notify')),
	body         TEXT NOT NULL,
	marker       TEXT NOT NULL,
	target_kind  TEXT NOT NULL,
	target_id    BIGINT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('pending', 'posted', 'failed')),
	attempts     BIGINT NOT NULL CHECK (attempts >= 0),
	next_attempt BIGINT,
	created_at   BIGINT,
	done_at      BIGINT,
	http_status  BIGINT NOT NULL,
	error        TEXT NOT NULL,
	url          TEXT NOT NULL,
	generation   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_by_work_item ON outbox (work_item, id);

-- The Fleet (store/fleet.go). lease_ttl is in nanoseconds; heartbeat is
-- the database's clock.
CREATE TABLE hosts (
	name      TEXT COLLATE "C" PRIMARY KEY CHECK (name <> ''),
	capacity  BIGINT NOT NULL CHECK (capacity >= 0),
	lease_ttl BIGINT NOT NULL CHECK (lease_ttl > 0),
	draining  BOOLEAN NOT NULL,
	heartbeat BIGINT NOT NULL
);

CREATE TABLE transcripts (
	work_item  TEXT COLLATE "C" NOT NULL REFERENCES work_items (key),
	session_id TEXT NOT NULL,
	off        BIGINT NOT NULL CHECK (off >= 0),
	data       BYTEA NOT NULL,
	PRIMARY KEY (work_item, session_id, off)
);
