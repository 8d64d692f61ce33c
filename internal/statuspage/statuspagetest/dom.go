// Package statuspagetest is test support for the status page: what a
// rendered page holds, for the page's own tests over httptest and the
// end-to-end test in a real Chromium alike.
package statuspagetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// DOM parses page (a rendered page, or a browser's dumped DOM) and returns
// how many elements of each name it holds, and its text: what a test
// checks to tell an escaped value (text) from markup (an element).
func DOM(t testing.TB, page string) (elements map[string]int, text string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	require.NoError(t, err)
	elements = map[string]int{}
	var sb strings.Builder
	for n := range doc.Descendants() {
		switch n.Type {
		case html.ElementNode:
			elements[n.Data]++
		case html.TextNode:
			sb.WriteString(n.Data)
		}
	}
	return elements, sb.String()
}
