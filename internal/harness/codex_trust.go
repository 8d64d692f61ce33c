package harness

import (
	"bytes"
	"fmt"
	"strings"
)

// codexTrustKey is the key of a project's table in Codex's config.toml
// whose value says whether Codex loads the project's own config.
const codexTrustKey = "trust_level"

// codexTrust edits Codex's config.toml at path so that the project dir is
// trusted (trusted) or holds no trust (otherwise), in the form Codex
// 0.171.0 writes itself when its folder dialog trusts a directory:
//
//	[projects."/srv/agents/acme/api/7"]
//	trust_level = "trusted"
//
// Trusted, it sets trust_level in that table, adding the table at the end
// when it is missing; otherwise it removes a trust_level of "trusted" from
// it and leaves any other value (an "untrusted" the user chose). Every
// other line is kept as written, comments included; the file is written
// only when it changes, atomically with its mode (a symlink is followed).
// It returns an error wrapping ErrBadSettings, and leaves the file as it
// is, when dir appears in it in any other form (an inline table, a dotted
// key, a literal string), which loopd cannot edit without a TOML parser
// and must not leave trusted.
func codexTrust(path, dir string, trusted bool) error {
	if strings.ContainsAny(dir, "\"\\'") || strings.ContainsFunc(dir, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("%w: the workdir %q cannot be named in it as a plain TOML string", ErrBadSettings, dir)
	}
	path, data, mode, err := readSettingsFile(path)
	if err != nil {
		return err
	}
	header := `[projects."` + dir + `"]`
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	table, trust := -1, -1
	for i, line := range lines {
		t := strings.TrimSpace(line)
		switch {
		case isHeader(t, header):
			if table >= 0 {
				return fmt.Errorf("%w: %s twice", ErrBadSettings, header)
			}
			table = i
		case strings.Contains(line, `"`+dir+`"`) || strings.Contains(line, `'`+dir+`'`):
			return fmt.Errorf("%w: line %d names %s in a form loopd does not edit (write it as %s)", ErrBadSettings, i+1, dir, header)
		case table >= 0 && trust < 0 && strings.HasPrefix(t, "["):
			trust = -2 // the table ended without the key
		case table >= 0 && trust == -1 && isKey(t, codexTrustKey):
			trust = i
		}
	}
	if trust == -2 {
		trust = -1
	}
	want := codexTrustKey + ` = "trusted"` + "\n"
	switch {
	case trusted && trust >= 0 && strings.TrimSpace(lines[trust]) == strings.TrimSpace(want):
		return nil
	case trusted && trust >= 0:
		lines[trust] = want
	case trusted && table >= 0:
		lines = append(lines[:table+1], append([]string{want}, lines[table+1:]...)...)
	case trusted:
		if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			lines[n-1] += "\n"
		}
		if len(lines) > 0 {
			lines = append(lines, "\n")
		}
		lines = append(lines, header+"\n", want)
	case trust >= 0 && codexTrustValue(lines[trust]) == "trusted":
		lines = append(lines[:trust], lines[trust+1:]...)
	default:
		return nil
	}
	out := []byte(strings.Join(lines, ""))
	if bytes.Equal(out, data) {
		return nil
	}
	return writeSettingsFile(path, out, mode)
}

// isHeader reports whether the trimmed line t is the table header h,
// maybe followed by a comment.
func isHeader(t, h string) bool {
	rest, ok := strings.CutPrefix(t, h)
	rest = strings.TrimSpace(rest)
	return ok && (rest == "" || strings.HasPrefix(rest, "#"))
}

// isKey reports whether the trimmed line t sets the bare key k.
func isKey(t, k string) bool {
	rest, ok := strings.CutPrefix(t, k)
	return ok && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "=")
}

// codexTrustValue is the string a trust_level line sets ("trusted",
// "untrusted"), its quotes and any comment after it removed; "" for a
// value that is not a one-line string.
func codexTrustValue(line string) string {
	_, v, _ := strings.Cut(line, "=")
	v = strings.TrimSpace(v)
	if len(v) < 2 || (v[0] != '"' && v[0] != '\'') {
		return ""
	}
	end := strings.IndexByte(v[1:], v[0])
	if end < 0 {
		return ""
	}
	return v[1 : end+1]
}
