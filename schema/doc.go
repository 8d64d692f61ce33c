// Package schema is loopd's configuration: the types of loopd.yaml, their
// contract as a JSON Schema (loopd.schema.json, draft 2020-12, embedded),
// loading with defaults and cross-field checks, and hot reload.
//
// Load and Parse report every problem of an invalid file at once, each as
// file:line:col: key: message, in a *ValidationError that wraps ErrInvalid.
// A Watcher keeps the last good config while the file changes under it.
package schema
