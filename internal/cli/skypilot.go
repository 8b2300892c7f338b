package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/paths"
)

// noteSkyPilotClusters tells the user, once for a given set of names, that
// SkyPilot's own state holds clusters SkyGo does not manage. SkyGo only
// reads SkyPilot's database (immutably); what it has told is remembered in
// its own directory. Reading SQLite is the server program's (the CLI does
// not link a database), so it is asked only when the file exists and has
// changed since it was last asked (its size and time, and its WAL's).
func noteSkyPilotClusters(ctx context.Context, f *Factory) {
	io := f.IO
	home, err := homeDir()
	if err != nil {
		return
	}
	stamp := fileStamp(paths.SkyPilotStateDB(home)) + fileStamp(paths.SkyPilotStateDB(home)+"-wal")
	if stamp == "" {
		return
	}
	checked := filepath.Join(paths.Root(home), "skypilot_state_checked")
	if b, err := os.ReadFile(checked); err == nil && string(b) == stamp {
		return
	}
	exe, err := f.serverBinary()
	if err != nil {
		return
	}
	out, err := exec.CommandContext(ctx, exe, "skypilot-clusters").Output()
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(checked), 0o700); err == nil {
		_ = os.WriteFile(checked, []byte(stamp), 0o600)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return
	}
	marker := filepath.Join(paths.Root(home), "skypilot_clusters_noted")
	list := strings.Join(names, ", ")
	if b, err := os.ReadFile(marker); err == nil && string(b) == list {
		return
	}
	fmt.Fprintf(io.ErrOut, "Note: SkyPilot's own state (%s) lists %d cluster%s that SkyGo does not manage: %s. "+
		"Reach them with your SkyPilot installation's `sky` command; SkyGo leaves them untouched. (Shown once.)\n",
		paths.SkyPilotStateDB(home), len(names), map[bool]string{true: "", false: "s"}[len(names) == 1], list)
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err == nil {
		_ = os.WriteFile(marker, []byte(list), 0o600)
	}
}

// fileStamp is a file's size and modification time, "" when it is absent.
func fileStamp(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d\n", filepath.Base(p), st.Size(), st.ModTime().UnixNano())
}
