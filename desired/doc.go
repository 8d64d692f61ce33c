// Package desired holds the work-item record (spec and status), its queued
// deliveries and the store that keeps them: SQLite in WAL mode by default
// (modernc.org/sqlite, no cgo), one file in the state dir.
//
// Ingest writes Spec and deliveries; the executor writes Status. A work item
// is owner/repo#number and maps injectively onto one tmux session name.
package desired
