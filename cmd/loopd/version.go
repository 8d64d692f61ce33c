package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/module"
)

// version and commit are set at build time by the Makefile:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234" ./cmd/loopd
//
// Left empty (go install, go build without the flags), buildInfo fills
// them from the module version and the vcs.* settings the go command
// stamps into the binary (runtime/debug.ReadBuildInfo).
var (
	version string
	commit  string
)

// buildVersion is what loopd version prints: the version, the commit (with
// "-dirty" when it was built from a modified tree) and the Go toolchain
// that built it.
type buildVersion struct {
	Version string
	Commit  string
	Go      string
}

// Version values for a build with no version of its own.
const (
	// versionUntagged: the commit is known, no tag names it.
	versionUntagged = "untagged"
	// versionUnknown: neither a version nor a commit was recorded.
	versionUnknown = "unknown"
)

// String returns the one line loopd --version prints. A build that
// recorded neither says how to get one that does.
func (v buildVersion) String() string {
	if v.Version == versionUnknown && v.Commit == versionUnknown {
		return fmt.Sprintf("loopd unknown (commit unknown: no version was stamped and the go command recorded no vcs.revision; "+
			"make build stamps both, and go build records the commit in a git clone unless -buildvcs=false; %s)", v.Go)
	}
	return fmt.Sprintf("loopd %s (commit %s, %s)", v.Version, v.Commit, v.Go)
}

// currentVersion returns the version of this binary: the -X values when
// set, else what info holds (nil: nothing known): a tagged module version,
// and the commit the go command recorded (vcs.revision, "-dirty" with
// vcs.modified). A version that only names the commit (git describe of an
// untagged commit, a pseudo-version) is "untagged", so that the line says
// the commit once; with no commit either, both are "unknown".
func currentVersion(info *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: version, Commit: commit, Go: runtime.Version()}
	if ok {
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" && !module.IsPseudoVersion(info.Main.Version) {
			v.Version = info.Main.Version
		}
		if v.Commit == "" {
			var rev string
			dirty := false
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			v.Commit = rev
		}
		if info.GoVersion != "" {
			v.Go = info.GoVersion
		}
	}
	if v.Commit == "" {
		v.Commit = versionUnknown
	}
	if v.Version == "" || isCommitName(v.Version, v.Commit) {
		v.Version = versionUntagged
		if v.Commit == versionUnknown {
			v.Version = versionUnknown
		}
	}
	return v
}

// isCommitName reports whether version only names commit: git describe
// --always (the Makefile's VERSION) gives an untagged commit's abbreviated
// hash, which is no version, and the line would say the commit twice.
func isCommitName(version, commit string) bool {
	version, commit = strings.TrimSuffix(version, "-dirty"), strings.TrimSuffix(commit, "-dirty")
	return len(version) >= 7 && strings.HasPrefix(commit, version)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print loopd's version, commit and Go version",
		Long: `version prints the version and commit loopd was built from (set by make
build and make install; a go install binary reports its module version and
the commit the go command stamped into it) and the Go toolchain that built
it. loopd --version prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), cmd.Root().Version)
			return err
		},
	}
}
