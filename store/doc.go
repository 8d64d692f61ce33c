// Package store is the contract of loopd's durable storage: the Store that
// keeps work items (desired.Record), their deliveries, the GitHub outbox
// and the event journal; the Fleet that lets several hosts share one store
// through leases and fencing; the Listener that wakes them; and Retention,
// what a store forgets. It also holds what those take and return (Ingest,
// IngestResult, StatusWrite, the filters) and their sentinel errors.
//
// The package names no driver: store/sqlstore implements it over SQLite
// and PostgreSQL, and store/storetest holds the conformance suites every
// implementation runs, in the manner of io/fs and testing/fstest. Only
// cmd wires an implementation; a package that needs a few of a store's
// methods declares an interface of its own.
package store
