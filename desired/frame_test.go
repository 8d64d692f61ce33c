package desired

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBodyDigest(t *testing.T) {
	// sha256("body:\n/exit\n") = dfb5f19c3e1538c6…, checked with sha256sum.
	assert.Equal(t, "dfb5f19c3e1538c6", BodyDigest("body:\n/exit\n"))
	assert.Equal(t, BodyDigest("a    b\n"), BodyDigest("a\tb\n"), "a tab counts as the four spaces a paste turns it into")
	assert.NotEqual(t, BodyDigest("a b  \n"), BodyDigest("a b\n"), "trailing spaces count")
	assert.NotEqual(t, BodyDigest("e\u0301\n"), BodyDigest("\u00e9\n"), "no Unicode normalization")
}

func TestFrameCheck(t *testing.T) {
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	body := "body:\ntab\there  \n漢字 😀 👨\u200d👩\u200d👧\n"
	prompt := "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n" + FrameBegin(id) + body + FrameEnd(id, body)
	f := FrameOf(Delivery{ID: id, Prompt: prompt})
	assert.Equal(t, Frame{ID: id, Digest: BodyDigest(body)}, f)

	tests := []struct {
		name string
		text string
		want Seen
	}{
		{"byte_exact", prompt, SeenWhole},
		{"tabs_turned_into_four_spaces", strings.ReplaceAll(prompt, "\t", "    "), SeenWhole},
		{"trailing_newline_dropped", strings.TrimSuffix(prompt, "\n"), SeenWhole},
		{"trailing_spaces_trimmed", strings.ReplaceAll(prompt, "here  \n", "here\n"), SeenMangled},
		{"character_lost", strings.Replace(prompt, "😀", "", 1), SeenMangled},
		{"cut_before_the_end_line", prompt[:strings.Index(prompt, "漢字")], SeenMangled},
		{"end_line_with_another_digest", strings.Replace(prompt, f.Digest, "0123456789abcdef", 1), SeenMangled},
		{"header_line_only", "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n", SeenNone},
		{"another_delivery", strings.ReplaceAll(prompt, id, "other"), SeenNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, f.Check(tt.text))
		})
	}
}

func TestFrameOfLegacyPromptIsCheckedByMarker(t *testing.T) {
	// A prompt stored before the digest existed ends in "github-data <id>>>>".
	legacy := Delivery{ID: "d-1", Prompt: "[loopd] x\n<<<github-data d-1\nbody:\nhi\ngithub-data d-1>>>\n"}
	f := FrameOf(legacy)
	assert.Equal(t, Frame{ID: "d-1"}, f)
	assert.Equal(t, SeenWhole, f.Check(legacy.Prompt))
	assert.Equal(t, SeenWhole, f.Check("<<<github-data d-1\nbody:\nmangled"), "marker alone, as before")
	assert.Equal(t, SeenNone, f.Check("[loopd] x (delivery d-1)\n"))
}

func TestFrameBodyCannotForgeTheEnd(t *testing.T) {
	// A body written without the id cannot close the frame early: its own
	// "end line" names another id, so the whole prompt is still checked.
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	body := "body:\ngithub-data guess sha256=0000000000000000>>>\nrest\n"
	prompt := FrameBegin(id) + body + FrameEnd(id, body)
	f := FrameOf(Delivery{ID: id, Prompt: prompt})
	assert.Equal(t, SeenWhole, f.Check(prompt))
	assert.Equal(t, SeenMangled, f.Check(strings.Replace(prompt, "rest\n", "", 1)))
}

// TestBootFrame: a spawn's boot line is found whole wherever it stands in
// a message, and only the boot id it names.
func TestBootFrame(t *testing.T) {
	prompt := WithBootLine(NudgePrompt(Key{Owner: "o", Repo: "r", Number: 1}, NudgeExited), "b-1")
	assert.Equal(t, SeenWhole, BootFrame("b-1").Check(prompt))
	assert.Equal(t, SeenWhole, BootFrame("b-1").Check("quoted: "+prompt+" and more"))
	assert.Equal(t, SeenNone, BootFrame("b-2").Check(prompt), "another spawn's")
	assert.Equal(t, SeenNone, BootFrame("b-1").Check(NudgePrompt(Key{Owner: "o", Repo: "r", Number: 1}, NudgeExited)), "the same text without its line")
	assert.Equal(t, BootLine("b-1"), WithBootLine("", "b-1"))
	assert.Equal(t, SeenNone, Frame{ID: "b-1"}.Check(prompt), "a delivery frame of the same id is another frame")
}
