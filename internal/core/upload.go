package core

import (
	"errors"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/upload"
)

// resolveUploads points a task's workdir and local file-mount sources at
// the copies its client uploaded (the paths in the body name the
// client's files, which this server may not see), holding the tree until
// release; shown maps each copy's path back to the client's, for the
// request log. A task with local paths but no upload is refused: reading the
// server's own files at a path a client names would hand that client the
// server's disk. mounts says whether the file mounts are synced (exec
// syncs only the workdir, and its client uploads only that).
func (e *Env) resolveUploads(t *api.TaskSpec, u api.User, mounts bool) (release func(), shown map[string]string, err error) {
	roots := upload.Roots(*t, mounts)
	if len(roots) == 0 {
		return func() {}, nil, nil
	}
	if t.UploadID == "" {
		return nil, nil, &op.Error{Type: "ValueError", Message: "the task names local files (" + roots[0].Source + ") but its client did not upload them; " +
			"use a SkyGo client that uploads the workdir and file mounts (any `sky launch`/`sky exec` of this version does)"}
	}
	tree, release, err := upload.Open(paths.Uploads(e.Home), u.ID, t.UploadID)
	if err != nil {
		if errors.Is(err, upload.ErrNoTree) {
			return nil, nil, &op.Error{Type: "ValueError", Message: err.Error()}
		}
		return nil, nil, err
	}
	return release, upload.Rebase(t, tree, mounts), nil
}
