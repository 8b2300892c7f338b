package api

// The upload of a task's local files (internal/upload): the client asks
// for the limits, sends a manifest and learns which blobs the server
// lacks, sends those in chunks, then commits the manifest and puts the
// tree's id in the task (TaskSpec.UploadID).

// Upload endpoints. They answer directly (no request record) and need
// the same credentials as every other call.
const (
	PathUploadLimits = "/upload_v2/limits"
	PathUpload       = "/upload_v2"
	PathUploadBlob   = "/upload_v2/blob"
	PathUploadCommit = "/upload_v2/commit"
	// PathUploadBatch takes many small blobs in one PUT: a tar stream
	// whose entries are named by sha256 and carry their size and mode.
	// It answers UploadBatchResult.
	PathUploadBatch = "/upload_v2/batch"
)

// UploadBatchResult is the answer of PathUploadBatch.
type UploadBatchResult struct {
	// Stored counts the blobs the store did not have yet.
	Stored int `json:"stored"`
}

// Entry types of a manifest.
const (
	EntryFile    = "file"
	EntryDir     = "dir"
	EntrySymlink = "symlink"
)

// UploadEntry is one file, directory or symlink. Path is slash-separated
// and starts with its root ("workdir/src/a.py", "mounts/0").
type UploadEntry struct {
	Path string `json:"path"`
	Type string `json:"type"`
	// Mode is the permission bits (0o755).
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Link is a symlink's target, kept as written.
	Link string `json:"link,omitempty"`
}

// UploadManifest is the body of PathUpload and PathUploadCommit.
type UploadManifest struct {
	Entries []UploadEntry `json:"entries"`
}

// UploadLimits is the answer of PathUploadLimits.
type UploadLimits struct {
	// MaxBytes bounds the total size of one upload's files.
	MaxBytes int64 `json:"max_bytes"`
	// ChunkBytes is the largest chunk PathUploadBlob accepts.
	ChunkBytes int64 `json:"chunk_bytes"`
}

// UploadBlob is a blob the server lacks: Have bytes of a partial upload
// are already there, so the client resumes at that offset.
type UploadBlob struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Have   int64  `json:"have"`
	// Mode is the permission bits of a file with this content, which the
	// blob is stored with (its tree files are links to it).
	Mode uint32 `json:"mode"`
}

// UploadNeeds is the answer of PathUpload.
type UploadNeeds struct {
	Missing []UploadBlob `json:"missing"`
}

// UploadChunkResult is the answer of PathUploadBlob (query sha256, size,
// offset and mode, the permission bits in octal; PUT with the chunk as
// body, GET to ask how much is there).
// A PUT at an offset other than Have is refused with 409 and this body.
type UploadChunkResult struct {
	Have     int64 `json:"have"`
	Complete bool  `json:"complete"`
}

// UploadResult is the answer of PathUploadCommit.
type UploadResult struct {
	// ID names the assembled tree; it is derived from the content, so the
	// same files give the same id.
	ID    string `json:"id"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}
