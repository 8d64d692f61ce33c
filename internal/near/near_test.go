package near

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNames(t *testing.T) {
	phases := []string{"Idle", "Queued", "Running", "Exited", "Stopped", "Parked"}
	for _, tc := range []struct {
		got  string
		want []string
	}{
		{"runing", []string{"Running"}},
		{"RUNNING", []string{"Running"}},
		{"running", []string{"Running"}},
		{"stoped", []string{"Stopped"}},
		{"exit", []string{"Exited"}},
		{"sleeping", nil},
		{"", nil},
		{"Running", nil}, // no miss at all
	} {
		assert.Equal(t, tc.want, Names(tc.got, phases), tc.got)
	}
	assert.Equal(t, []string{"stateDir", "statedirs"}, Names("StateDir", []string{"webhooks", "statedirs", "stateDir"}),
		"nearest first: the case-only miss before the one edit away")
}

func TestDidYouMean(t *testing.T) {
	assert.Empty(t, DidYouMean(nil))
	assert.Equal(t, "; did you mean stateDir?", DidYouMean([]string{"stateDir"}))
	assert.Equal(t, "; did you mean one of a, b?", DidYouMean([]string{"a", "b"}))
}
