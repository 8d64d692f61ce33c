package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUsing: a process that holds a file open uses it; one that works in
// a directory uses it when its command name passes the match; once it is
// gone, neither is used.
func TestUsing(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "index.lock")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	require.Eventually(t, func() bool {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm")
		return string(comm) == "sleep\n"
	}, 10*time.Second, 10*time.Millisecond, "sleep never ran")
	for _, tc := range []struct {
		name        string
		dirs, files []string
		match       func(string) bool
		want        bool
	}{
		{"file_open", nil, []string{file}, nil, true},
		{"works_in_the_dir", []string{dir}, nil, nil, true},
		{"works_below_the_dir", []string{filepath.Dir(dir)}, nil, nil, true},
		{"name_not_matched", []string{dir}, nil, func(c string) bool { return c == "git" }, false},
		{"neither", []string{other}, []string{filepath.Join(other, "x.lock")}, nil, false},
	} {
		if got, err := Using(tc.dirs, tc.files, tc.match); err != nil || got != tc.want {
			t.Errorf("%s: Using = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got, err := Using([]string{dir}, []string{file}, nil); err != nil || got {
		t.Errorf("after the process ended: Using = %v, %v", got, err)
	}
}
