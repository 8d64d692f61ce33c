package desired

import (
	"testing"
)

// FuzzSessionName checks that two different keys never share a session
// name, and that every name has the shape tmux takes (sessionNameShape). The
// keys are those loopd can hold: ParseKey reads back what Key.String
// writes (an owner without '/', a positive number), as GitHub's logins and
// repository names always are; two keys outside that set can print alike
// (a/b + c and a + b/c), and the name hashes that print.
func FuzzSessionName(f *testing.F) {
	for _, pair := range [][2]Key{
		{{"a-b", "c", 1}, {"a", "b-c", 1}},
		{{"Acme", "API", 1}, {"acme", "api", 1}},
		{{"acme", "_", 22}, {"acme", "22", 14435996}},
		{{"a", "b", 11}, {"a", "b1", 1}},
		{{"a.b", "c", 1}, {"a_b", "c", 1}},
		{{"o", "r#1", 2}, {"o", "r", 12}},
		{{"octo-org", "api", 42}, {"octo-org", "api", 42}},
	} {
		f.Add(pair[0].Owner, pair[0].Repo, pair[0].Number, pair[1].Owner, pair[1].Repo, pair[1].Number)
	}
	f.Fuzz(func(t *testing.T, owner1, repo1 string, n1 int, owner2, repo2 string, n2 int) {
		a, b := Key{owner1, repo1, n1}, Key{owner2, repo2, n2}
		for _, k := range []Key{a, b} {
			if back, err := ParseKey(k.String()); err != nil || back != k {
				t.Skip("not a key loopd can hold")
			}
		}
		na, nb := SessionName(a), SessionName(b)
		if !sessionNameShape.MatchString(na) || !sessionNameShape.MatchString(nb) {
			t.Fatalf("bad session name shape: %q (%s), %q (%s)", na, a, nb, b)
		}
		if a != b && na == nb {
			t.Fatalf("%s and %s share session %s", a, b, na)
		}
		if a == b && na != nb {
			t.Fatalf("%s gets two names: %s, %s", a, na, nb)
		}
	})
}
