package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRenderConcatMatchesTemplate renders route templates both ways: a
// template of text and fields only renders by concatenation exactly as
// text/template renders it, and any other template (or a field the data
// lacks) is left to text/template.
func TestRenderConcatMatchesTemplate(t *testing.T) {
	data := []templateData{
		workdirData{Owner: "octo-org", Repo: "api", Number: 42, Kind: "pull_request"},
		checkoutData{Owner: "octo-org", Repo: "api.go", Number: -7},
	}
	tests := []struct {
		text   string
		concat bool
	}{
		{"/w/{{.Owner}}/{{.Repo}}/{{.Number}}", true},
		{"/w/{{.Repo}}-{{.Kind}}", true},
		{"git@github.com:{{.Owner}}/{{.Repo}}.git", true},
		{"loop/issue-{{.Number}}", true},
		{"/w/{{- .Owner -}} /x {{/* a comment */}}{{.Repo}}", true},
		{"plain text", true},
		{"", true},
		{"/w/{{.Owner | printf \"%s-x\"}}", false},
		{"/w/{{if .Number}}{{.Number}}{{end}}", false},
		{"/w/{{$x := .Repo}}{{$x}}", false},
		{"/w/{{printf \"%05d\" .Number}}", false},
		{"/w/{{.Owner.Name}}", false},
	}
	for _, tt := range tests {
		c, err := parsed("test", tt.text)
		require.NoError(t, err, tt.text)
		assert.Equal(t, tt.concat, c.parts != nil, tt.text)
		for _, d := range data {
			var b strings.Builder
			want, wantErr := "", c.tmpl.Execute(&b, d)
			if wantErr == nil {
				want = b.String()
			}
			got, err := render("test", tt.text, d)
			if wantErr != nil {
				assert.Error(t, err, tt.text)
				continue
			}
			require.NoError(t, err, tt.text)
			assert.Equal(t, want, got, tt.text)
		}
	}
	// A field the data lacks is text/template's error, whichever way.
	_, err := render("test", "/w/{{.Kind}}", checkoutData{Owner: "o", Repo: "r"})
	assert.ErrorContains(t, err, "Kind")
}
