package sqlstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRebind: SQLite's placeholders become PostgreSQL's as SQLite numbers
// them, and a ? in a quoted literal or identifier stays.
func TestRebind(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`a = ? AND b = ?`, `a = $1 AND b = $2`},
		{`a = ? AND b = ?1 AND c = ?1 LIMIT ?2`, `a = $1 AND b = $1 AND c = $1 LIMIT $2`},
		{`a = ?3 AND b = ?`, `a = $3 AND b = $4`},
		{`a = '?' AND "b?" = ? AND c = 'it''s ?'`, `a = '?' AND "b?" = $1 AND c = 'it''s ?'`},
		{`VALUES (?, ?, FALSE, ?)`, `VALUES ($1, $2, FALSE, $3)`},
	} {
		assert.Equal(t, tt.want, rebind(tt.in), tt.in)
		assert.Equal(t, tt.want, rebind(tt.in), "cached: %s", tt.in)
	}
}
