package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// VolumeStatus is a volume's state as `sky volumes ls` shows it.
type VolumeStatus string

// Volume statuses (SkyPilot's).
const (
	VolumeReady    VolumeStatus = "READY"
	VolumeInUse    VolumeStatus = "IN_USE"
	VolumeNotReady VolumeStatus = "NOT_READY"
)

// Volume is one row of the volumes table: a volume made by `sky volumes
// apply`, with the clusters that have it attached. Config is the
// volume's config: section as JSON; only its infrastructure reads it.
type Volume struct {
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	LaunchedAt     float64         `json:"launched_at"`
	Cloud          string          `json:"cloud"`
	Region         string          `json:"region"`
	Zone           string          `json:"zone"`
	SizeGi         float64         `json:"size"`
	Config         json.RawMessage `json:"config"`
	NameOnCloud    string          `json:"name_on_cloud"`
	UserHash       string          `json:"user_hash"`
	UserName       string          `json:"user_name"`
	Workspace      string          `json:"workspace"`
	LastAttachedAt float64         `json:"last_attached_at"`
	LastUse        string          `json:"last_use"`
	Status         VolumeStatus    `json:"status"`
	UsedByClusters []string        `json:"usedby_clusters"`
	IsEphemeral    bool            `json:"is_ephemeral"`
	ErrorMessage   string          `json:"error_message"`
	CreationYAML   string          `json:"creation_yaml"`
	// Version counts the writes of the row (see UpdateVolume).
	Version int64 `json:"-"`
}

// UsedBy reports whether cluster has the volume attached.
func (v *Volume) UsedBy(cluster string) bool { return slices.Contains(v.UsedByClusters, cluster) }

// Attach records cluster as a user of the volume (IN_USE).
func (v *Volume) Attach(cluster string, at float64) {
	if !v.UsedBy(cluster) {
		v.UsedByClusters = append(v.UsedByClusters, cluster)
		slices.Sort(v.UsedByClusters)
	}
	v.LastAttachedAt = at
	v.Status = VolumeInUse
}

// Detach drops cluster from the users; with none left the volume is
// READY again (a NOT_READY volume keeps its status and message).
func (v *Volume) Detach(cluster string) {
	v.UsedByClusters = slices.DeleteFunc(v.UsedByClusters, func(c string) bool { return c == cluster })
	if len(v.UsedByClusters) == 0 && v.Status == VolumeInUse {
		v.Status = VolumeReady
	}
}

const volumeCols = `name, type, launched_at, cloud, region, zone, size_gi, config, name_on_cloud, user_hash,
	user_name, workspace, last_attached_at, last_use, status, usedby_clusters, is_ephemeral, error_message,
	creation_yaml, version`

func scanVolume(sc interface{ Scan(...any) error }) (*Volume, error) {
	var v Volume
	var config, usedBy string
	var eph int
	if err := sc.Scan(&v.Name, &v.Type, &v.LaunchedAt, &v.Cloud, &v.Region, &v.Zone, &v.SizeGi, &config,
		&v.NameOnCloud, &v.UserHash, &v.UserName, &v.Workspace, &v.LastAttachedAt, &v.LastUse, &v.Status,
		&usedBy, &eph, &v.ErrorMessage, &v.CreationYAML, &v.Version); err != nil {
		return nil, err
	}
	v.Config, v.IsEphemeral = rawOrNil(config), eph != 0
	if err := json.Unmarshal([]byte(usedBy), &v.UsedByClusters); err != nil {
		return nil, fmt.Errorf("volume %s: unreadable usedby_clusters: %w", v.Name, err)
	}
	return &v, nil
}

func (v *Volume) columns() (config, usedBy string) {
	config = string(v.Config)
	if config == "" {
		config = "{}"
	}
	users := v.UsedByClusters
	if users == nil {
		users = []string{}
	}
	b, _ := json.Marshal(users)
	return config, string(b)
}

// CreateVolume inserts a new volume; ErrExists when the name (or its
// name on the cloud, in the same place) is taken.
func (s *Store) CreateVolume(ctx context.Context, v *Volume) error {
	if v.Name == "" || v.Type == "" || v.NameOnCloud == "" {
		return errors.New("create volume: name, type and name_on_cloud are required")
	}
	if v.Status == "" {
		v.Status = VolumeReady
	}
	if v.Workspace == "" {
		v.Workspace = "default"
	}
	if v.LaunchedAt == 0 {
		v.LaunchedAt = nowSeconds()
	}
	v.Version = 1
	config, usedBy := v.columns()
	_, err := s.exec(ctx, "create volume", `INSERT INTO volumes (`+volumeCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.Name, v.Type, v.LaunchedAt, v.Cloud, v.Region, v.Zone, v.SizeGi, config, v.NameOnCloud, v.UserHash,
		v.UserName, v.Workspace, v.LastAttachedAt, v.LastUse, string(v.Status), usedBy, boolInt(v.IsEphemeral),
		v.ErrorMessage, v.CreationYAML, v.Version)
	if isUniqueViolation(err) {
		return fmt.Errorf("volume %s: %w", v.Name, ErrExists)
	}
	return err
}

// GetVolume reads one volume; ErrNotFound when there is none.
func (s *Store) GetVolume(ctx context.Context, name string) (*Volume, error) {
	v, err := scanVolume(s.queryRow(ctx, "get volume", `SELECT `+volumeCols+` FROM volumes WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("volume %s: %w", name, ErrNotFound)
	}
	return v, err
}

// ListVolumes returns every volume, by name.
func (s *Store) ListVolumes(ctx context.Context) ([]*Volume, error) {
	rows, err := s.query(ctx, "list volumes", `SELECT `+volumeCols+` FROM volumes ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Volume
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// VolumeMutation edits a volume's current row; it may run more than once.
// ErrNoChange leaves the row as it is.
type VolumeMutation func(v *Volume) error

// UpdateVolume applies mutate to the current row of a volume and writes
// it conditionally on the version read, as UpdateCluster does. It returns
// the row as written (or as it is after ErrNoChange).
func (s *Store) UpdateVolume(ctx context.Context, name string, mutate VolumeMutation) (*Volume, error) {
	for range conflictRetries {
		var out *Volume
		err := s.tx(ctx, "update volume", func(tx *sql.Tx) error {
			cur, err := s.volumeTx(ctx, tx, name)
			if err != nil {
				return err
			}
			next := *cur
			next.UsedByClusters = slices.Clone(cur.UsedByClusters)
			if err := mutate(&next); errors.Is(err, ErrNoChange) {
				out = cur
				return nil
			} else if err != nil {
				return err
			}
			next.Name, next.Version = cur.Name, cur.Version+1
			config, usedBy := next.columns()
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE volumes SET type = ?, cloud = ?, region = ?, zone = ?,
				size_gi = ?, config = ?, last_attached_at = ?, last_use = ?, status = ?, usedby_clusters = ?,
				error_message = ?, version = ? WHERE name = ? AND version = ?`),
				next.Type, next.Cloud, next.Region, next.Zone, next.SizeGi, config, next.LastAttachedAt, next.LastUse,
				string(next.Status), usedBy, next.ErrorMessage, next.Version, name, cur.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return ErrConflict
			}
			out = &next
			return nil
		})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update volume %s: %w", name, ErrConflict)
}

// DeleteVolume removes a volume if check (nil: always) agrees with its
// current row, in one transaction: a volume that a launch attached after
// the caller looked is not deleted under it. check returning ErrNoChange
// keeps the row and makes DeleteVolume return (false, nil).
func (s *Store) DeleteVolume(ctx context.Context, name string, check func(v *Volume) error) (bool, error) {
	removed := false
	err := s.tx(ctx, "delete volume", func(tx *sql.Tx) error {
		cur, err := s.volumeTx(ctx, tx, name)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(cur); errors.Is(err, ErrNoChange) {
				return nil
			} else if err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM volumes WHERE name = ? AND version = ?`), name, cur.Version)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		removed = n > 0
		return nil
	})
	return removed, err
}

func (s *Store) volumeTx(ctx context.Context, tx *sql.Tx, name string) (*Volume, error) {
	v, err := scanVolume(tx.QueryRowContext(ctx, s.rebind(`SELECT `+volumeCols+` FROM volumes WHERE name = ?`+s.forUpdate()), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("volume %s: %w", name, ErrNotFound)
	}
	return v, err
}

// LockVolume serialises the operations on one volume name (apply and
// delete, which also act on the infrastructure) across every server of
// the database, as LockCluster does for clusters. Cluster names have no
// slash, so the two never share a lock.
func (s *Store) LockVolume(ctx context.Context, name string) (func(), error) {
	return s.LockCluster(ctx, "volume/"+name)
}
