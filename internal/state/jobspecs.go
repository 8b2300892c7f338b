package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ClusterJobSpec is what a cluster job was submitted with (`sky.cluster_job_spec`).
type ClusterJobSpec struct {
	ClusterHash string
	ClusterName string
	JobID       int
	// TaskYAML is the task as dumped with secrets redacted.
	TaskYAML string
	// Entrypoint is the command that submitted the job, secrets redacted.
	Entrypoint string
}

// PutClusterJobSpec records a job's spec once: a submit repeated after a
// cut-off (the same job adopted) keeps the first record.
func (s *Store) PutClusterJobSpec(ctx context.Context, j ClusterJobSpec) error {
	_, err := s.exec(ctx, "put cluster job spec", `INSERT INTO cluster_job_specs
		(cluster_hash, job_id, cluster_name, task_yaml, entrypoint, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster_hash, job_id) DO NOTHING`,
		j.ClusterHash, j.JobID, j.ClusterName, j.TaskYAML, j.Entrypoint, nowSeconds())
	return err
}

// GetClusterJobSpec reads the spec of job jobID of the cluster with hash;
// ErrNotFound when none was recorded.
func (s *Store) GetClusterJobSpec(ctx context.Context, clusterHash string, jobID int) (*ClusterJobSpec, error) {
	j := ClusterJobSpec{ClusterHash: clusterHash, JobID: jobID}
	err := s.queryRow(ctx, "get cluster job spec", `SELECT cluster_name, task_yaml, entrypoint FROM cluster_job_specs
		WHERE cluster_hash = ? AND job_id = ?`, clusterHash, jobID).Scan(&j.ClusterName, &j.TaskYAML, &j.Entrypoint)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %d of cluster %s: %w", jobID, clusterHash, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get cluster job spec: %w", err)
	}
	return &j, nil
}
