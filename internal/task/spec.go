package task

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// Spec turns a loaded task into what the server runs: absolute paths,
// resources in canonical form, secrets revealed for transport (the server
// redacts them in its records). The CLI builds its request bodies with it
// and the server turns a task sent as YAML into the same body with it, so
// a task means one thing whichever way it arrives.
func Spec(t *Task) (api.TaskSpec, error) {
	s := api.TaskSpec{Name: t.Name, NumNodes: t.NumNodes, Envs: t.Envs, Setup: t.Setup, Run: t.Run,
		WaitForSchedulingTimeout: t.WaitForSchedulingTimeout.Seconds(), Config: t.Config}
	if t.Resources != nil {
		s.Resources = t.Resources.ToMap()
	}
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
	for dst, fm := range t.FileMounts {
		if fm.Storage != nil || IsCloudURI(fm.Source) {
			return s, fmt.Errorf("file_mounts %s: bucket and cloud storage mounts are not available in this build yet; mount a local path instead", dst)
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
		if v.Ephemeral() {
			return s, fmt.Errorf("volumes %s: ephemeral volumes (size:) are not available in this build; create one with `sky volumes apply` and name it", mp)
		}
		s.Volumes = append(s.Volumes, api.VolumeMount{Path: mp, Name: v.Name, SubPath: v.SubPath})
	}
	if y, err := t.ToYAML(); err == nil {
		s.YAML = string(y)
	}
	return s, nil
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
