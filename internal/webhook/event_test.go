package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/desired"
)

// itemURL is the item's page under the repository's, for an http(s)
// address only: anything else a payload could carry gives no link.
func TestItemURL(t *testing.T) {
	for _, tc := range []struct {
		repo string
		kind desired.Kind
		want string
	}{
		{"https://github.com/Codertocat/Hello-World", desired.KindIssue, "https://github.com/Codertocat/Hello-World/issues/7"},
		{"https://github.com/Codertocat/Hello-World/", desired.KindPullRequest, "https://github.com/Codertocat/Hello-World/pull/7"},
		{"http://ghe.example.com/org/api", desired.KindIssue, "http://ghe.example.com/org/api/issues/7"},
		{"javascript:alert(1)", desired.KindIssue, ""},
		{"https://github.com/a/b?x=1", desired.KindIssue, ""},
		{"https://user:pw@github.com/a/b", desired.KindIssue, ""},
		{"", desired.KindIssue, ""},
	} {
		assert.Equal(t, tc.want, itemURL(tc.repo, tc.kind, 7), tc.repo)
	}
}
