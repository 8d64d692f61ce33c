// Package sqlstore implements package store's contracts over database/sql:
// one SQL core (sqlStore) with a dialect for each backend, SQLite in WAL
// mode (OpenSQLite: modernc.org/sqlite, no cgo, one file in the state dir,
// the embedded default) and PostgreSQL through pgx (OpenPostgres: the
// store several hosts share). The core group-commits concurrent writes,
// caches decoded statuses and pending deliveries, and migrates each
// backend's schema at open.
//
// Only cmd imports it, and the backends' own tests; everything else takes
// the contract (store.Store) or a smaller interface of its own.
package sqlstore
