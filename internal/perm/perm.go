// Package perm is the rule of which files loopd takes its orders and its
// secrets from: those no other user can change, or, for a secret, read. It
// follows OpenSSH, which refuses a private key that others can read
// (sshkey_perm_ok: "UNPROTECTED PRIVATE KEY FILE") and, with StrictModes,
// an authorized_keys file that others can write, or that sits in a
// directory others can write (auth_secure_path, safe_path). A config file
// names the commands loopd runs and the places it writes: whoever can
// change it runs as loopd.
//
// The rule (docs/design.md, "Files and their modes"), for a file and,
// walking up to /, every directory above it, along the path as given and
// along the path its symlinks lead to:
//   - it is owned by loopd's user (the effective uid) or by root;
//   - neither its group nor others may write it; a directory that others
//     may write is allowed only with the sticky bit (/tmp), where others
//     cannot move or remove what they do not own, when the entry loopd
//     goes through in it is owned by loopd's user or root;
//   - a secret is not readable by others, nor by its group when loopd's
//     user owns it (that is loopd's own choice to share it); a file root
//     owns may be read by its group, which is how a service manager hands
//     one over (Kubernetes' fsGroup; systemd's credentials, read through
//     an ACL whose mask shows as the group's bits).
//
// POSIX ACLs are not read otherwise. A file that does not exist is no
// refusal: its reader says it is missing.
package perm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is wrapped by the errors of Trusted and Secret: a file, or a
// directory above it, that another user can change (or, for a secret,
// read).
var ErrUnsafe = errors.New("unsafe owner or mode")

// Trusted returns nil when no user but loopd's own and root can change the
// file at path, or the directories it is reached through. Otherwise the
// error wraps ErrUnsafe and names the path, its mode or owner, and the
// command that fixes it.
func Trusted(path string) error { return check(path, false, os.Geteuid()) }

// Secret is Trusted for a file that holds a secret: no user but loopd's
// own and root can read it either.
func Secret(path string) error { return check(path, true, os.Geteuid()) }

// check applies the rule to path for the user uid; secret also asks that
// others cannot read it.
func check(path string, secret bool, uid int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := file(abs, st, secret, uid); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	for _, p := range []string{abs, real} {
		if err := dirs(p, uid); err != nil {
			return err
		}
	}
	return nil
}

// file checks the file path (stat st, through its symlinks).
func file(path string, st fs.FileInfo, secret bool, uid int) error {
	owner := ownerOf(st)
	if owner != uid && owner != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by loopd's user (uid %d) or root: %w", path, owner, uid, ErrUnsafe)
	}
	mode := st.Mode().Perm()
	if mode&0o022 != 0 {
		return fmt.Errorf("%s: mode %04o lets other users write it (chmod go-w %s): %w", path, mode, path, ErrUnsafe)
	}
	if secret && (mode&0o004 != 0 || (mode&0o040 != 0 && owner == uid)) {
		return fmt.Errorf("%s: mode %04o lets other users read it (chmod 600 %s): %w", path, mode, path, ErrUnsafe)
	}
	return nil
}

// dirs checks the directories above path, from its own up to /, each with
// the entry below it that path goes through.
func dirs(path string, uid int) error {
	child := path
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return err
		}
		owner, mode := ownerOf(st), st.Mode()
		if owner != uid && owner != 0 {
			return fmt.Errorf("directory %s is owned by uid %d, not by loopd's user (uid %d) or root, who can replace %s: %w",
				dir, owner, uid, child, ErrUnsafe)
		}
		if mode.Perm()&0o022 != 0 {
			ok := mode&fs.ModeSticky != 0
			if ok {
				// In a sticky directory only the owner of an entry (or of
				// the directory) can move or remove it.
				cst, err := os.Lstat(child)
				if err != nil {
					return err
				}
				o := ownerOf(cst)
				ok = o == uid || o == 0
			}
			if !ok {
				return fmt.Errorf("directory %s: mode %04o lets other users replace %s (chmod go-w %s): %w",
					dir, mode.Perm(), child, dir, ErrUnsafe)
			}
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
		child = dir
	}
}

// ownerOf returns the uid that owns the file st describes.
func ownerOf(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
