package core

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/task"
)

// Tasks sent as YAML (task_yaml, dag_yaml: the Python SDK) are loaded
// here with the loader the CLI uses on a file, so the body that reaches
// the backend is the one the CLI would have sent for the same YAML. The
// names stand for the file in the loader's file:line messages.
const (
	taskYAMLName = "<task_yaml>"
	dagYAMLName  = "<dag_yaml>"
)

// noLocalEnv keeps the loader off the server's environment: a bare
// ${VAR} of the YAML is the client's to fill, never the server's.
var noLocalEnv = task.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }}

// loadSubmitted loads a YAML of the SDK: loader errors (schema,
// structure) are InvalidSkyPilotConfigError, as /validate says them.
func loadSubmitted(name, text string) (*task.DAG, error) {
	dag, err := task.LoadBytes(name, []byte(text), noLocalEnv)
	if err != nil {
		return nil, &op.Error{Type: "InvalidSkyPilotConfigError", Message: err.Error()}
	}
	return dag, nil
}

// submittedChecks are the CLI's pre-launch checks for a task whose local
// paths are the client's (absolute, not looked at here).
func submittedChecks(t *task.Task) error {
	if err := task.ValidateSubmitted(t); err != nil {
		return &op.Error{Type: "ValueError", Message: err.Error()}
	}
	if err := task.CheckRunnable(t); err != nil {
		return &op.Error{Type: "ValueError", Message: err.Error()}
	}
	return nil
}

// specOf is task.Spec with the request's error type.
func specOf(t *task.Task) (api.TaskSpec, error) {
	s, err := task.Spec(t)
	if err != nil {
		return s, &op.Error{Type: "ValueError", Message: err.Error()}
	}
	return s, nil
}

// loadTaskYAML loads the task_yaml of an op that also takes its parts
// as JSON: nil when none was sent (an upload_id then has nothing to
// belong to). what names the YAML's kind, parts the JSON fields it
// replaces; withParts says the body carries them too.
func loadTaskYAML(text, uploadID, what, parts string, withParts bool) (*task.DAG, error) {
	if text == "" {
		if uploadID != "" {
			return nil, &op.Error{Type: "ValueError", Message: "upload_id is given without task_yaml: put the upload id in task.upload_id, or send the " + what + " as task_yaml"}
		}
		return nil, nil
	}
	if withParts {
		return nil, &op.Error{Type: "ValueError", Message: "the body has both " + parts + " and task_yaml: send one of them"}
	}
	return loadSubmitted(taskYAMLName, text)
}

// submittedTask resolves the task_yaml of /launch, /exec or /optimize
// into *spec; without task_yaml, *spec is the client's and stays.
func submittedTask(spec *api.TaskSpec, text, uploadID string) error {
	dag, err := loadTaskYAML(text, uploadID, "task", "task", !reflect.ValueOf(*spec).IsZero())
	if dag == nil || err != nil {
		return err
	}
	if len(dag.Tasks) != 1 {
		return &op.Error{Type: "ValueError", Message: fmt.Sprintf("task_yaml holds %d tasks (a pipeline or job group); submit it as dag_yaml to /jobs/launch", len(dag.Tasks))}
	}
	t := dag.Tasks[0]
	if err := submittedChecks(t); err != nil {
		return err
	}
	s, err := specOf(t)
	if err != nil {
		return err
	}
	s.UploadID = uploadID
	*spec = s
	return nil
}

// submittedLaunch resolves a launch body's task_yaml and checks what the
// CLI checks of its flags against the task.
func submittedLaunch(b *api.LaunchBody) error {
	sent := b.TaskYAML != ""
	if err := submittedTask(&b.Task, b.TaskYAML, b.UploadID); err != nil {
		return err
	}
	b.TaskYAML, b.UploadID = "", ""
	if sent && b.WaitFor != "" && b.IdleMinutes == nil && !b.Down && b.Task.Resources.Autostop == nil {
		return &op.Error{Type: "ValueError", Message: "wait_for sets what resets the autostop idle timer: give idle_minutes_to_autostop (or down, or resources.autostop in the task) too"}
	}
	return nil
}

// submittedJobs resolves a jobs.launch body's dag_yaml into its tasks and
// header, as `sky jobs launch` builds them from a file: the job's name
// (the body's name, else the YAML's), the tasks' inferred names, one
// upload id per task.
func submittedJobs(b *api.JobsLaunchBody) error {
	if b.DAGYAML == "" {
		if len(b.UploadIDs) > 0 {
			return &op.Error{Type: "ValueError", Message: "upload_ids is given without dag_yaml: put each upload id in its task's upload_id, or send the DAG as dag_yaml"}
		}
		return nil
	}
	if len(b.Tasks) > 0 {
		return &op.Error{Type: "ValueError", Message: "the body has both tasks and dag_yaml: send one of them"}
	}
	dag, err := loadSubmitted(dagYAMLName, b.DAGYAML)
	if err != nil {
		return err
	}
	if len(b.UploadIDs) > 0 && len(b.UploadIDs) != len(dag.Tasks) {
		return &op.Error{Type: "ValueError", Message: fmt.Sprintf("upload_ids has %d entries for %d tasks: give one per task, in document order (\"\" for a task without local files)", len(b.UploadIDs), len(dag.Tasks))}
	}
	flagName := b.Name
	if name := task.ManagedJobName(dag, flagName); name != "" {
		// Unnamed, the job is named by the submit, as one of the CLI's
		// would be had it no name to give.
		b.Name = name
		task.NameTasks(dag, name, flagName)
	}
	if _, err := task.FillJobsLaunch(dag, b, submittedChecks); err != nil {
		var oe *op.Error
		if errors.As(err, &oe) {
			return oe
		}
		return &op.Error{Type: "ValueError", Message: err.Error()}
	}
	for i, id := range b.UploadIDs {
		b.Tasks[i].UploadID = id
	}
	b.DAGYAML, b.UploadIDs = "", nil
	return nil
}

// kindOrValueError gives a submission error its request error type.
func kindOrValueError(err error) error {
	var oe *op.Error
	if errors.As(err, &oe) {
		return oe
	}
	return &op.Error{Type: "ValueError", Message: err.Error()}
}

// submittedService resolves the task_yaml of serve.up or serve.update
// into the task and service they carry.
func submittedService(spec *api.TaskSpec, svc *api.ServiceSpec, text, uploadID string) error {
	dag, err := loadTaskYAML(text, uploadID, "service", "task/service", !reflect.ValueOf(*spec).IsZero() || !reflect.ValueOf(*svc).IsZero())
	if dag == nil || err != nil {
		return err
	}
	s, sv, err := task.ServiceSubmission(dag, taskYAMLName, task.ValidateSubmitted)
	if err != nil {
		return kindOrValueError(err)
	}
	s.UploadID = uploadID
	*spec, *svc = s, sv
	return nil
}

// submittedPool resolves the task_yaml of jobs.pool_apply into the
// workers' task and the pool's policy.
func submittedPool(b *api.PoolApplyBody) error {
	dag, err := loadTaskYAML(b.TaskYAML, b.UploadID, "pool", "task/policy", b.Task != nil || b.Policy != nil)
	if dag == nil || err != nil {
		return err
	}
	s, policy, err := task.PoolSubmission(dag, taskYAMLName)
	if err != nil {
		return kindOrValueError(err)
	}
	// A pool's workers run setup only: no run to check, but the paths
	// must be the client's absolute ones as for any submitted task.
	if err := task.ValidateSubmitted(dag.Tasks[0]); err != nil {
		return &op.Error{Type: "ValueError", Message: err.Error()}
	}
	s.UploadID = b.UploadID
	b.Task, b.Policy = &s, &policy
	b.TaskYAML, b.UploadID = "", ""
	return nil
}
