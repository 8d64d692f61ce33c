package webhook

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	"golang.org/x/text/unicode/rangetable"
)

// The visible escapes of hidden text (docs/design.md, "Prompts"). Each is
// one bracketed token, so the agent sees where hidden text was and what it
// held.
const (
	escapeOpen  = "⟦" // U+27E6
	escapeClose = "⟧" // U+27E7
	// hiddenWord starts every escape of invisible code points, e.g.
	// ⟦hidden U+200B⟧ or ⟦hidden tags "run this"⟧.
	hiddenWord = "hidden"
	// commentLabel and unterminatedLabel start the escape that wraps an
	// HTML comment, which GitHub's markdown does not show.
	commentLabel      = "hidden HTML comment: "
	unterminatedLabel = "hidden HTML comment, unterminated, so GitHub shows nothing from here on: "
	// definitionLabel starts the escape that wraps a link reference
	// definition, which GitHub's markdown parses and does not show.
	definitionLabel = "hidden link reference definition: "
)

// formatTable holds the sets that Unicode's Default_Ignorable_Code_Point is
// generated from (DerivedCoreProperties.txt: Other_Default_Ignorable_Code_Point
// + Cf + Variation_Selector − White_Space − U+FFF9..U+FFFB − U+13430..U+13440
// − Prepended_Concatenation_Mark), in the Unicode version of Go's unicode
// package (unicode.Version).
var formatTable = rangetable.Merge(unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector)

// invisible reports whether r is a code point a reader of GitHub does not
// see: a Default_Ignorable_Code_Point, plus the two ranges of format
// characters that property leaves out only because a renderer that does not
// support them should show a glyph, which browsers do not (interlinear
// annotation U+FFF9–U+FFFB and the Egyptian hieroglyph format controls).
// White space and the prepended concatenation marks (U+0600–U+0605 …),
// which render visibly, are not invisible. The Tags block, the zero-width
// characters and joiners, the bidi controls and marks, the soft hyphen,
// the variation selectors and the Hangul fillers all are.
func invisible(r rune) bool {
	return r >= 0xAD && unicode.Is(formatTable, r) &&
		!unicode.Is(unicode.White_Space, r) && !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
}

// Code points the keep rules name.
const (
	zwnj          = '\u200C'
	zwj           = '\u200D'
	vs15          = '\uFE0E' // text presentation
	vs16          = '\uFE0F' // emoji presentation
	keycap        = '\u20E3' // COMBINING ENCLOSING KEYCAP
	blackFlag     = '\U0001F3F4'
	tagBase       = 0xE0000 // a tag is U+E0000 + an ASCII code
	tagFirstASCII = 0xE0020
	tagLastASCII  = 0xE007E
	cancelTag     = '\U000E007F'
)

// rgiTagSequences are the tag specs of the emoji tag sequences Unicode
// recommends for general interchange (UTS #51, emoji-sequences.txt,
// RGI_Emoji_Tag_Sequence): the flags of England, Scotland and Wales, each
// U+1F3F4, the tags of its spec, then CANCEL TAG.
var rgiTagSequences = []string{"gbeng", "gbsct", "gbwls"}

// nonSymbolEmojiBases are the bases of emoji variation sequences (Unicode
// emoji-variation-sequences.txt) that are neither ASCII nor a symbol: ‼ ⁉ ℹ
// 〰 〽. Every other base is a symbol (category S) or a keycap base.
var nonSymbolEmojiBases = []rune{'\u203C', '\u2049', '\u2139', '\u3030', '\u303D'}

// revealer writes text with its invisible code points shown as escapes,
// except where the keep rules below find them part of what is seen.
type revealer struct {
	b      strings.Builder
	run    []rune // invisible code points not yet written
	last   rune   // the last rune written; -1 at the start and after an escape
	base   rune   // the last visible rune written; -1 likewise
	letter rune   // the last visible rune written that is not a mark; -1 likewise
}

// reveal returns s with every invisible code point written as a visible
// escape (⟦hidden U+200B⟧), except those that are part of what a reader
// sees (keep). A run of Tag characters is decoded and shown as the ASCII it
// spells (⟦hidden tags "…"⟧), because that is how a language model reads
// it. Every other rune of s is kept byte for byte.
func reveal(s string) string {
	if !strings.ContainsFunc(s, invisible) {
		return s
	}
	v := revealer{last: -1, base: -1, letter: -1}
	v.b.Grow(len(s) + 32)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !invisible(r) {
			v.flush()
			v.b.WriteString(s[i : i+n])
			v.visible(r)
		} else if k := v.keep(s[i:]); k > 0 {
			v.flush()
			v.b.WriteString(s[i : i+k])
			v.last, _ = utf8.DecodeLastRuneInString(s[i : i+k])
			n = k
		} else {
			v.run = append(v.run, r)
		}
		i += n
	}
	v.flush()
	return v.b.String()
}

// visible records that the visible rune r was written.
func (v *revealer) visible(r rune) {
	v.last, v.base = r, r
	if !unicode.Is(unicode.M, r) {
		v.letter = r
	}
}

// keep returns how many bytes at the start of s, which starts with an
// invisible code point, belong to what a reader sees and are kept as they
// are; 0 means none. The rules (first match):
//   - the flag of England, Scotland or Wales: U+1F3F4, its tags, CANCEL TAG;
//   - U+FE0E or U+FE0F right after an emoji base (a non-ASCII symbol, one of
//     ‼ ⁉ ℹ 〰 〽, or # * 0–9 when U+20E3 follows);
//   - U+FE00–U+FE0D right after a math symbol (the standardized variation
//     sequences in text, ≩︀); a Mongolian free variation selector right
//     after a Mongolian letter;
//   - ZWJ between two symbols, the first maybe with its U+FE0F (emoji ZWJ
//     sequences, 👨‍👩‍👧, ❤️‍🔥);
//   - ZWJ or ZWNJ between two letters of one script that uses them in
//     ordinary text (joiningScripts; after the first one's marks): Persian
//     ZWNJ, Indic conjuncts.
//
// Ideographic variation selectors (U+E0100–U+E01EF), and a selector or a
// joiner after a letter of any other script, are shown: each can follow
// almost any ideograph or letter without changing what a reader sees, so
// kept they would carry about a byte of hidden data per character.
//
// Each rule needs its base written just before, with nothing invisible in
// between, so a second variation selector, or a joiner after an escape, is
// shown. Anything else invisible is shown.
func (v *revealer) keep(s string) int {
	if len(v.run) > 0 {
		return 0 // an invisible code point not kept stands between it and its base
	}
	r, n := utf8.DecodeRuneInString(s)
	next, _ := utf8.DecodeRuneInString(s[n:])
	if invisible(next) {
		next = -1
	}
	direct := v.last >= 0 && v.last == v.base
	switch {
	case r >= tagFirstASCII && r <= tagLastASCII:
		if !direct || v.base != blackFlag {
			return 0
		}
		for _, spec := range rgiTagSequences {
			seq := tags(spec) + string(cancelTag)
			if strings.HasPrefix(s, seq) {
				return len(seq)
			}
		}
	case r == vs15 || r == vs16:
		b := v.base
		if direct && ((b > unicode.MaxASCII && unicode.IsSymbol(b)) || slices.Contains(nonSymbolEmojiBases, b) ||
			(strings.ContainsRune("#*0123456789", b) && next == keycap)) {
			return n
		}
	case r >= '\uFE00' && r <= '\uFE0D':
		if direct && unicode.Is(unicode.Sm, v.base) {
			return n
		}
	case r >= '\u180B' && r <= '\u180F':
		if direct && unicode.Is(unicode.Mongolian, v.base) && unicode.IsLetter(v.base) {
			return n
		}
	case r == zwj || r == zwnj:
		emoji := r == zwj && v.last >= 0 && (v.last == v.base || v.last == vs16) &&
			(unicode.Is(unicode.So, v.base) || unicode.Is(unicode.Sk, v.base)) && unicode.Is(unicode.So, next)
		if emoji || (direct && unicode.IsLetter(next) && sameJoiningScript(v.letter, next)) {
			return n
		}
	}
	return 0
}

// joiningScripts are the scripts whose ordinary text uses ZWJ and ZWNJ
// between letters: the cursive scripts with Unicode joining types (Arabic,
// which Persian and Urdu write in, Syriac, N'Ko, Mongolian) and the Brahmic
// scripts whose conjuncts and half forms the joiners select (The Unicode
// Standard, §23.2 "Layout Controls").
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian,
	unicode.Devanagari, unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya,
	unicode.Tamil, unicode.Telugu, unicode.Kannada, unicode.Malayalam, unicode.Sinhala,
	unicode.Khmer, unicode.Myanmar,
}

// sameJoiningScript reports whether a and b are letters of one of the
// joiningScripts, so that a joiner between them is part of what a reader
// sees.
func sameJoiningScript(a, b rune) bool {
	if a < 0 || !unicode.IsLetter(a) {
		return false
	}
	for _, sc := range joiningScripts {
		if unicode.Is(sc, a) {
			return unicode.Is(sc, b)
		}
	}
	return false
}

// flush writes the run of invisible code points as one escape: each code
// point as U+XXXX (repeats as U+XXXX×N), and Tag characters that encode
// ASCII as the quoted text they spell.
func (v *revealer) flush() {
	if len(v.run) == 0 {
		return
	}
	v.b.WriteString(escapeOpen + hiddenWord)
	for i := 0; i < len(v.run); {
		r := v.run[i]
		j := i + 1
		if r >= tagFirstASCII && r <= tagLastASCII {
			var ascii strings.Builder
			ascii.WriteByte(byte(r - tagBase))
			for ; j < len(v.run) && v.run[j] >= tagFirstASCII && v.run[j] <= tagLastASCII; j++ {
				ascii.WriteByte(byte(v.run[j] - tagBase))
			}
			v.b.WriteString(" tags " + strconv.Quote(ascii.String()))
		} else {
			for j < len(v.run) && v.run[j] == r {
				j++
			}
			fmt.Fprintf(&v.b, " U+%04X", r)
			if j-i > 1 {
				v.b.WriteString("×" + strconv.Itoa(j-i))
			}
		}
		i = j
	}
	v.b.WriteString(escapeClose)
	v.run = v.run[:0]
	v.last, v.base, v.letter = -1, -1, -1
}

// tags returns the Tag characters that spell the ASCII text s.
func tags(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		b.WriteRune(tagBase + rune(c))
	}
	return b.String()
}

// gfm parses markdown as GitHub does: CommonMark with the GFM extensions,
// its link reference definitions read by linkDefinitions.
var gfm = goldmark.New(
	goldmark.WithParser(parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithParagraphTransformers(util.Prioritized(linkDefinitions{}, 100)),
	)),
	goldmark.WithExtensions(extension.GFM),
).Parser()

// span is a byte range [start, end) of a body.
type span struct {
	start, end   int
	unterminated bool // an HTML comment that never ends: it hides the rest of the body
	quoted       bool // an HTML comment that opens inside a block quote
	definition   bool // a link reference definition, not an HTML comment
}

// rawHTML is a segment of raw HTML of a markdown body, and whether it
// lies inside a block quote.
type rawHTML struct {
	text.Segment
	quoted bool
}

// inQuote reports whether n lies inside a block quote.
func inQuote(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if p.Kind() == ast.KindBlockquote {
			return true
		}
	}
	return false
}

// htmlComments returns the HTML comments of the markdown s that GitHub does
// not show, in order (hiddenMarkup).
func htmlComments(s string) []span {
	if !strings.Contains(s, "<!--") {
		return nil
	}
	comments, _ := hiddenMarkup(s)
	return comments
}

// hiddenMarkup returns what of the markdown s GitHub parses and does not
// show, each in order: its HTML comments and its link reference
// definitions (linkDefinitions). Only raw HTML counts as a comment: an HTML
// block, or an inline comment; "<!--" in a code span, a code block, a link
// reference definition or plain text is shown as text. A comment opened in
// an HTML block and not closed by "-->" in later raw HTML hides everything
// after it, as the browser reads the rest of the page as the comment. A
// comment is quoted when it opens in a block quote.
func hiddenMarkup(s string) (comments, definitions []span) {
	src := []byte(s)
	var raw []rawHTML
	doc := gfm.Parse(text.NewReader(src), parser.WithContext(parser.NewContext()))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.HTMLBlock:
			q := inQuote(n)
			for i := range n.Lines().Len() {
				raw = append(raw, rawHTML{n.Lines().At(i), q})
			}
			if n.HasClosure() {
				raw = append(raw, rawHTML{n.ClosureLine, q})
			}
		case *ast.RawHTML:
			if n.Segments.Len() > 0 && strings.HasPrefix(s[n.Segments.At(0).Start:], "<!--") {
				q := inQuote(n)
				for i := range n.Segments.Len() {
					raw = append(raw, rawHTML{n.Segments.At(i), q})
				}
			}
		case *ast.LinkReferenceDefinition:
			if l := n.Lines(); l.Len() > 0 {
				definitions = append(definitions, span{start: l.At(0).Start, end: l.At(l.Len() - 1).Stop, definition: true, quoted: inQuote(n)})
			}
		}
		return ast.WalkContinue, nil
	})
	slices.SortFunc(raw, func(a, b rawHTML) int { return a.Start - b.Start })

	open, quoted := -1, false
	for _, seg := range raw {
		for pos := max(seg.Start, 0); pos < seg.Stop; {
			part := s[pos:seg.Stop]
			if open < 0 {
				j := strings.Index(part, "<!--")
				if j < 0 {
					break
				}
				open, pos, quoted = pos+j, pos+j+4, seg.quoted
				// "<!-->" and "<!--->" are whole, empty comments (HTML,
				// "abrupt-closing-of-empty-comment").
				for _, empty := range []string{">", "->"} {
					if strings.HasPrefix(s[pos:seg.Stop], empty) {
						comments = append(comments, span{start: open, end: pos + len(empty), quoted: quoted})
						open, pos = -1, pos+len(empty)
						break
					}
				}
				continue
			}
			end := commentEnd(part)
			if end < 0 {
				break
			}
			comments = append(comments, span{start: open, end: pos + end, quoted: quoted})
			open, pos = -1, pos+end
		}
	}
	if open >= 0 {
		comments = append(comments, span{start: open, end: len(s), unterminated: true, quoted: quoted})
	}
	return comments, definitions
}

// commentEnd returns the index just past the first "-->" or "--!>" (both
// end a comment in HTML) in s; -1 for none.
func commentEnd(s string) int {
	end := -1
	for _, closer := range []string{"-->", "--!>"} {
		if j := strings.Index(s, closer); j >= 0 && (end < 0 || j+len(closer) < end) {
			end = j + len(closer)
		}
	}
	return end
}

// revealMarkdown is reveal for a markdown body, which also shows each HTML
// comment and each link reference definition GitHub hides, wrapped in an
// escape that says so (⟦hidden HTML comment: <!-- … -->⟧,
// ⟦hidden link reference definition: [//]: # (…)⟧). Inside it, "⟦" and "⟧"
// are written as ⟦U+27E6⟧ and ⟦U+27E7⟧, so the hidden text cannot end its
// escape early. The markup is found in s as given (hiddenMarkup); clean
// (removing controls) is applied to each part before it is shown.
func revealMarkdown(s string, clean func(string) string) string {
	if !strings.Contains(s, "<!--") && !strings.Contains(s, "]:") {
		return reveal(clean(s))
	}
	hidden := merge(hiddenMarkup(s))
	if len(hidden) == 0 {
		return reveal(clean(s))
	}
	brackets := strings.NewReplacer(escapeOpen, escapeOpen+"U+27E6"+escapeClose, escapeClose, escapeOpen+"U+27E7"+escapeClose)
	var b strings.Builder
	at := 0
	for _, h := range hidden {
		b.WriteString(reveal(clean(s[at:h.start])))
		label := commentLabel
		switch {
		case h.definition:
			label = definitionLabel
		case h.unterminated:
			label = unterminatedLabel
		}
		b.WriteString(escapeOpen + label + reveal(brackets.Replace(clean(s[h.start:h.end]))) + escapeClose)
		at = h.end
	}
	b.WriteString(reveal(clean(s[at:])))
	return b.String()
}

// merge returns the spans of both lists in order, a span that starts inside
// an earlier one taken into it (a definition inside an unterminated
// comment).
func merge(a, b []span) []span {
	all := slices.Concat(a, b)
	slices.SortStableFunc(all, func(x, y span) int { return x.start - y.start })
	var out []span
	for _, sp := range all {
		if n := len(out); n > 0 && sp.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}
