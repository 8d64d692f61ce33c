package doubling

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNth: the waits start at initial, double, stop growing at max, and
// never end.
func TestNth(t *testing.T) {
	s := time.Second
	tests := []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 2 * s}, {2, 4 * s}, {3, 8 * s}, {4, 10 * s}, {50, 10 * s}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Nth(2*s, 10*s, tt.n), "n=%d", tt.n)
	}
	b := New(2*s, 10*s)
	for range 100 {
		b.NextBackOff()
	}
	assert.Equal(t, 10*s, b.NextBackOff(), "never stops")
}
