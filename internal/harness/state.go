package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/loopd/loopd/internal/sandbox"
)

// State is what of its CLI's state one spawn of an item gets
// (ItemStater): what its environment sets, and what its sandbox shows.
type State struct {
	// Env is set on top of the adapter's Env: the item's own home
	// (CODEX_HOME, GEMINI_CLI_HOME), the config dir a sandbox shows
	// (CLAUDE_CONFIG_DIR).
	Env map[string]string
	// Binds are what a sandbox shows of the CLI's state, in order: the
	// item's own state at its path, and the account's login shared by
	// every item (a refresh one CLI writes reaches the others).
	Binds []sandbox.Bind
}

// ItemStater is implemented by adapters whose CLI keeps its state per work
// item: in a home of its own keyed by the workdir, where the CLI's layout
// cannot be split by binds (Codex's sessions/YYYY/MM/DD, Gemini's
// projects.json and tmp/<slug>), or in a per-item view of the config dir
// that only a sandbox shows (Claude Code's, whose transcripts are already
// per workdir).
type ItemStater interface {
	// ItemState makes the item's state ready for a spawn in workdir that
	// resumes conversation id ("" for a fresh one), in a sandbox when
	// sandboxed, and returns what the spawn gets.
	ItemState(workdir, id string, sandboxed bool) (State, error)
}

// ItemState is a's state of the item in workdir for a spawn (ItemStater);
// an adapter that keeps none gives the zero State.
func ItemState(a Adapter, workdir, id string, sandboxed bool) (State, error) {
	if s, ok := a.(ItemStater); ok {
		return s.ItemState(workdir, id, sandboxed)
	}
	return State{}, nil
}

// itemsDir is the directory inside a CLI's shared home that holds the
// homes (or views) of the items, one per workdir (itemDir).
const itemsDir = "loopd-items"

// itemName matches what of a workdir's base name an item's dir keeps.
var itemName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// itemDir is the directory of the item in the physical workdir dir under
// a CLI's shared home: <home>/loopd-items/<base>-<hash>, the base name of
// dir kept readable and the first 16 hex digits of the SHA-256 of dir
// telling apart two workdirs of one name. The workdir is the key, as it
// is the conversation's: the item finds its state again on another host
// with the same workdir.
func itemDir(home, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	base := strings.Trim(itemName.ReplaceAllString(filepath.Base(dir), "-"), "-.")
	if len(base) > 40 {
		base = base[:40]
	}
	return filepath.Join(home, itemsDir, base+"-"+hex.EncodeToString(sum[:8]))
}

// linkShared makes each of names in the item's dir item a symlink to the
// file of that name in the shared dir, when the shared file exists, so
// that every item reads the account's login and a CLI that writes it in
// place writes the shared one; a sandbox shows the shared files at their
// path (sharedBinds). A regular file in item that is newer than the shared
// one (a login made, or a token refreshed, by a CLI that replaces the file
// rather than writing it) is adopted first: it replaces the shared file,
// so that nothing the CLI refreshed is lost, and the link is made again.
func linkShared(item, shared string, names ...string) error {
	for _, name := range names {
		own, common := filepath.Join(item, name), filepath.Join(shared, name)
		info, err := os.Lstat(own)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case info.Mode().IsRegular():
			if sh, err := os.Stat(common); err == nil && !info.ModTime().After(sh.ModTime()) {
				if err := os.Remove(own); err != nil {
					return err
				}
				break
			}
			// The item's is the newer login: it becomes the account's.
			if err := os.Rename(own, common); err != nil {
				return fmt.Errorf("adopt %s: %w", own, err)
			}
		case info.Mode()&fs.ModeSymlink != 0:
			if target, _ := os.Readlink(own); target == common {
				continue
			}
			if err := os.Remove(own); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is not a file", own)
		}
		if _, err := os.Stat(common); err != nil {
			continue // no login yet: the item's CLI makes its own
		}
		if err := os.Symlink(common, own); err != nil {
			return err
		}
	}
	return nil
}

// sharedBinds are the binds that show the files of names in the shared
// dir at their path, writable, for those that exist (linkShared's
// targets).
func sharedBinds(shared string, names ...string) []sandbox.Bind {
	var out []sandbox.Bind
	for _, name := range names {
		p := filepath.Join(shared, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			out = append(out, sandbox.Bind{Source: p, Write: true})
		}
	}
	return out
}

// copyInto copies the file at from to to (mode 0600) when from exists,
// replacing to whole (a temporary file renamed); a missing from leaves to
// as it is, the item's own.
func copyInto(from, to string) error {
	in, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), to)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// linkConversation gives the item's home the file of a conversation made
// before the item had a home of its own, at rel below its shared home:
// a hard link at the same place below the item's home, so that the CLI,
// which looks for it below its home only, finds it there, and its writes
// reach the one file. It does nothing when the item's home has it, or
// the shared home does not.
func linkConversation(shared, item, rel string) error {
	from, to := filepath.Join(shared, rel), filepath.Join(item, rel)
	if _, err := os.Lstat(to); err == nil {
		return nil
	}
	if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	return os.Link(from, to)
}
