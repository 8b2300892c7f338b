package task

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/storage"
)

// Spec turns a loaded task into what the server runs: absolute paths,
// resources in canonical form, secrets revealed for transport (the server
// redacts them in its records). The CLI builds its request bodies with it
// and the server turns a task sent as YAML into the same body with it, so
// a task means one thing whichever way it arrives.
func Spec(t *Task) (api.TaskSpec, error) {
	s := api.TaskSpec{Name: t.Name, NumNodes: t.NumNodes, Envs: t.Envs, Setup: t.Setup, Run: t.Run,
		WaitForSchedulingTimeout: t.WaitForSchedulingTimeout.Seconds(), Config: t.Config}
	s.Resources = resources.SpecOf(t.Resources)
	if len(t.Secrets) > 0 {
		s.Secrets = map[string]string{}
		for k, v := range t.Secrets {
			s.Secrets[k] = v.Reveal()
		}
	}
	if w := t.Workdir; w != nil {
		if w.URL != "" {
			s.WorkdirGit, s.WorkdirRef = w.URL, w.Ref
		} else if w.Path != "" {
			p, err := filepath.Abs(expandHome(w.Path))
			if err != nil {
				return s, err
			}
			s.Workdir = p
		}
	}
	for _, dst := range sortedKeys(t.FileMounts) {
		fm := t.FileMounts[dst]
		if fm.Storage != nil || IsCloudURI(fm.Source) {
			sm, err := storageMount(dst, fm)
			if err != nil {
				return s, err
			}
			s.Storage = append(s.Storage, sm)
			continue
		}
		p, err := filepath.Abs(expandHome(fm.Source))
		if err != nil {
			return s, err
		}
		if s.FileMounts == nil {
			s.FileMounts = map[string]string{}
		}
		s.FileMounts[dst] = p
	}
	for _, mp := range sortedKeys(t.Volumes) {
		v := t.Volumes[mp]
		m := api.VolumeMount{Path: mp, Name: v.Name, SubPath: v.SubPath}
		if v.Ephemeral() {
			gi, err := SizeGi(v.Size)
			if err != nil {
				return s, fmt.Errorf("volumes %s: %w", mp, err)
			}
			m.Ephemeral = &api.EphemeralVolume{SizeGi: gi, Type: v.Type, Labels: v.Labels, Config: v.Config}
		}
		s.Volumes = append(s.Volumes, m)
	}
	if y, err := t.ToYAML(); err == nil {
		s.YAML = string(y)
	}
	return s, nil
}

// storageMount is the api form of a bucket file mount: a mapping entry, or
// a cloud URI string (COPY, as SkyPilot turns those into storage copied
// down). Names and stores are checked here, where the CLI can still say
// so before anything is uploaded.
func storageMount(dst string, fm *FileMount) (api.StorageMount, error) {
	st := fm.Storage
	if st == nil {
		st = &Storage{Source: []string{fm.Source}, Mode: "COPY", Persistent: true}
	}
	sm := api.StorageMount{Dst: dst, Name: st.Name, Store: st.Store, Mode: st.Mode, Persistent: st.Persistent,
		Type: st.Type, Config: st.Config, SourceIsList: st.SourceIsList}
	if !st.SourceIsList && len(st.Source) == 1 && IsCloudURI(st.Source[0]) {
		store, bucket, sub, err := storage.ParseURI(st.Source[0])
		if err != nil {
			return sm, fmt.Errorf("file_mounts %s: %w", dst, err)
		}
		if sm.Store != "" && sm.Store != store {
			return sm, fmt.Errorf("file_mounts %s: store %s does not match the source %s; drop `store` or give a %s source", dst, sm.Store, st.Source[0], sm.Store)
		}
		sm.Store, sm.Name, sm.SubPath, sm.URI = store, bucket, sub, st.Source[0]
		if sub != "" && sm.Mode != "COPY" {
			return sm, fmt.Errorf("file_mounts %s: mode %s mounts a bucket's root, not %s; use source: %s://%s, or mode: COPY", dst, sm.Mode, st.Source[0], strings.ToLower(store), bucket)
		}
	} else {
		for _, src := range st.Source {
			p, err := filepath.Abs(expandHome(src))
			if err != nil {
				return sm, err
			}
			sm.Source = append(sm.Source, p)
			if st.SourceIsList {
				sm.SourceNames = append(sm.SourceNames, filepath.Base(p))
			}
		}
		if sm.Mode == "COPY" && len(sm.Source) == 0 {
			// SkyPilot refuses it only for a bucket it would create; an
			// existing one is known only on the server, which checks.
			sm.Store = cmp.Or(sm.Store, storage.S3)
		}
	}
	if sm.Store == "" {
		sm.Store = storage.DefaultStore
	}
	if err := storage.CheckStore(sm.Store); err != nil {
		return sm, fmt.Errorf("file_mounts %s: %w", dst, err)
	}
	if err := storage.ValidateName(sm.Store, sm.Name); err != nil {
		return sm, fmt.Errorf("file_mounts %s: %w", dst, err)
	}
	return sm, nil
}

// ManagedJobName is a managed job's name: the flag's (-n) when given, then
// the YAML's (the header of a pipeline or job group, else the one task's);
// "" when none names it.
func ManagedJobName(dag *DAG, flagName string) string {
	switch {
	case flagName != "":
		return flagName
	case dag.Name != "":
		return dag.Name
	case len(dag.Tasks) == 1 && dag.Tasks[0].Name != "":
		return dag.Tasks[0].Name
	}
	return ""
}

// NameTasks fills the task names SkyPilot infers: a single task shares
// the job's name (which -n sets); an unnamed pipeline task i is
// "<job>-<i>". Cluster names and the queue's TASK rows come from these.
func NameTasks(dag *DAG, name string, flagName string) {
	if len(dag.Tasks) == 1 {
		if t := dag.Tasks[0]; t.Name == "" || flagName != "" {
			t.Name = name
		}
		return
	}
	for i, t := range dag.Tasks {
		if t.Name == "" {
			t.Name = fmt.Sprintf("%s-%d", name, i)
		}
	}
}

// FillJobsLaunch puts a loaded DAG into a jobs.launch body: the header of
// a job group, each task checked with check and turned into its Spec, and
// the DAG's dump as user_yaml. It returns the secret values of the tasks,
// which the recorded command line must not show.
func FillJobsLaunch(dag *DAG, b *api.JobsLaunchBody, check func(*Task) error) ([]string, error) {
	b.Execution = string(Serial)
	if dag.IsJobGroup() {
		if b.Pool != "" {
			return nil, fmt.Errorf("a job group (execution: parallel) cannot run on a pool: drop -p/--pool %s", b.Pool)
		}
		b.Execution = string(Parallel)
		b.PrimaryTasks = dag.PrimaryTasks
		if td := dag.TerminationDelay; td.Default != 0 || len(td.PerJob) > 0 {
			b.TerminationDelay = map[string]string{}
			if td.Default != 0 {
				b.TerminationDelay["default"] = delaySeconds(td.Default)
			}
			for k, v := range td.PerJob {
				b.TerminationDelay[k] = delaySeconds(v)
			}
		}
	}
	var secrets []string
	b.Tasks = nil
	for _, t := range dag.Tasks {
		if err := check(t); err != nil {
			return nil, err
		}
		spec, err := Spec(t)
		if err != nil {
			return nil, err
		}
		for _, v := range spec.Secrets {
			secrets = append(secrets, v)
		}
		b.Tasks = append(b.Tasks, spec)
	}
	// The DAG as loaded, not the file's bytes: its secret values are
	// redacted wherever they appear, however short.
	if y, err := dag.ToYAML(); err == nil {
		b.YAML = string(y)
	}
	return secrets, nil
}

// delaySeconds is a termination delay as the API takes it ("30s").
func delaySeconds(d time.Duration) string {
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + "s"
}
