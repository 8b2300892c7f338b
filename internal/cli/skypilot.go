package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
)

// noteSkyPilotClusters tells the user, once for a given set of names, that
// SkyPilot's own state holds clusters SkyGo does not manage. SkyGo only
// reads SkyPilot's database (immutably); what it has told is remembered in
// its own directory.
func noteSkyPilotClusters(ctx context.Context, io *IOStreams) {
	home, err := homeDir()
	if err != nil {
		return
	}
	names, err := state.SkyPilotClusters(ctx, paths.SkyPilotStateDB(home))
	if err != nil || len(names) == 0 {
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
