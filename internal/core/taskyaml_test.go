package core

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/task"
)

// A task sent as YAML ends as the body the CLI builds from the same file:
// one loader, one conversion.
func TestSubmittedTaskIsTheCLIsBody(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	data := filepath.Join(dir, "data.txt")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := `name: train
workdir: ` + work + `
num_nodes: 2
resources:
  infra: local
  cpus: 2+
  any_of:
    - {memory: 1+}
    - {memory: 2+}
envs: {MODEL: m1}
secrets: {TOKEN: s3cr3tvalue}
file_mounts:
  /data/x.txt: ` + data + `
setup: echo setup
run: echo run $MODEL
`
	// The CLI's way: a file, its checks, task.Spec.
	file := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	dag, err := task.Load(file, task.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.ValidateForLaunch(dag.Tasks[0]); err != nil {
		t.Fatal(err)
	}
	want, err := task.Spec(dag.Tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	want.UploadID = "tree-1"

	b := api.LaunchBody{TaskYAML: y, UploadID: "tree-1", ClusterName: "c"}
	if err := submittedLaunch(&b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Task, want) {
		t.Fatalf("task_yaml resolved to\n%+v\nthe CLI sends\n%+v", b.Task, want)
	}
	if b.TaskYAML != "" || b.UploadID != "" {
		t.Errorf("the resolved body keeps task_yaml/upload_id: %+v", b)
	}
	if b.Task.Secrets["TOKEN"] != "s3cr3tvalue" || strings.Contains(b.Task.YAML, "s3cr3tvalue") {
		t.Errorf("secrets: %v, recorded YAML %q", b.Task.Secrets, b.Task.YAML)
	}
	if _, ok := b.Task.Resources.ToMap()["any_of"]; !ok {
		t.Errorf("resources not canonical: %v", b.Task.Resources)
	}

	// exec resolves the same way.
	eb := api.ExecBody{TaskYAML: y, UploadID: "tree-1"}
	if err := submittedTask(&eb.Task, eb.TaskYAML, eb.UploadID); err != nil || !reflect.DeepEqual(eb.Task, want) {
		t.Fatalf("exec: %v\n%+v", err, eb.Task)
	}
}

func opErrorOf(t *testing.T, err error) *op.Error {
	t.Helper()
	var oe *op.Error
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T) is not an op.Error", err, err)
	}
	return oe
}

func TestSubmittedTaskErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantType, wantMsg string
	}{
		{"bad yaml", "name: x\nrun: echo\nresources:\n  cpus: [\n", "InvalidSkyPilotConfigError", "<task_yaml>:"},
		{"unknown field", "name: x\nrunn: echo\n", "InvalidSkyPilotConfigError", "<task_yaml>:2"},
		{"relative workdir", "workdir: ./src\nrun: ls\n", "ValueError", `workdir "./src" is not an absolute path`},
		{"home workdir", "workdir: ~/src\nrun: ls\n", "ValueError", "not an absolute path"},
		{"relative mount", "file_mounts:\n  /d: data\nrun: ls\n", "ValueError", `file mount source "data" is not an absolute path`},
		{"pipeline", "name: p\n---\nrun: a\n---\nrun: b\n", "ValueError", "submit it as dag_yaml to /jobs/launch"},
		{"bad name", "name: bad name\nrun: ls\n", "ValueError", "<task_yaml>:1"},
	} {
		b := api.LaunchBody{TaskYAML: tc.yaml}
		oe := opErrorOf(t, submittedLaunch(&b))
		if oe.Type != tc.wantType || !strings.Contains(oe.Message, tc.wantMsg) {
			t.Errorf("%s: %s: %q, want %s containing %q", tc.name, oe.Type, oe.Message, tc.wantType, tc.wantMsg)
		}
	}
	// The server never looks at the client's paths: a missing one is fine.
	b := api.LaunchBody{TaskYAML: "workdir: /no/such/dir/on/the/server\nrun: ls\n", UploadID: "u"}
	if err := submittedLaunch(&b); err != nil || b.Task.Workdir != "/no/such/dir/on/the/server" || b.Task.UploadID != "u" {
		t.Fatalf("absolute missing workdir: %v %+v", err, b.Task)
	}
	both := api.LaunchBody{TaskYAML: "run: ls\n", Task: api.TaskSpec{Run: "ls"}}
	if oe := opErrorOf(t, submittedLaunch(&both)); !strings.Contains(oe.Message, "both task and task_yaml") {
		t.Errorf("both: %v", oe)
	}
	stray := api.LaunchBody{UploadID: "u", Task: api.TaskSpec{Run: "ls"}}
	if oe := opErrorOf(t, submittedLaunch(&stray)); !strings.Contains(oe.Message, "upload_id is given without task_yaml") {
		t.Errorf("stray upload id: %v", oe)
	}
	wait := api.LaunchBody{TaskYAML: "run: ls\n", WaitFor: "jobs"}
	if oe := opErrorOf(t, submittedLaunch(&wait)); !strings.Contains(oe.Message, "idle_minutes_to_autostop") {
		t.Errorf("wait_for alone: %v", oe)
	}
	// A CLI body passes untouched.
	cli := api.LaunchBody{Task: api.TaskSpec{Run: "ls", NumNodes: 1}}
	if err := submittedLaunch(&cli); err != nil || cli.Task.Run != "ls" {
		t.Fatalf("CLI body: %v %+v", err, cli)
	}
}

func TestSubmittedJobs(t *testing.T) {
	pipe := `name: pipe
---
resources: {cpus: 1+}
secrets: {TOKEN: pipesecret1}
run: echo a
---
name: train
workdir: /abs/work
run: echo b
`
	b := api.JobsLaunchBody{DAGYAML: pipe, UploadIDs: []string{"", "up-2"}}
	if err := submittedJobs(&b); err != nil {
		t.Fatal(err)
	}
	if b.Name != "pipe" || b.Execution != "serial" || len(b.Tasks) != 2 || b.Tasks[0].Name != "pipe-0" || b.Tasks[1].Name != "train" {
		t.Fatalf("pipeline body: %+v", b)
	}
	if b.Tasks[0].UploadID != "" || b.Tasks[1].UploadID != "up-2" || b.Tasks[1].Workdir != "/abs/work" {
		t.Errorf("uploads: %+v", b.Tasks)
	}
	if b.YAML == "" || strings.Contains(b.YAML, "pipesecret1") || b.Tasks[0].Secrets["TOKEN"] != "pipesecret1" {
		t.Errorf("user_yaml %q, secrets %v", b.YAML, b.Tasks[0].Secrets)
	}
	if b.DAGYAML != "" || b.UploadIDs != nil {
		t.Errorf("dag_yaml kept: %+v", b)
	}
	// -n (the body's name) names the job, not the pipeline's tasks, which
	// the loader named after the pipeline.
	named := api.JobsLaunchBody{DAGYAML: pipe, Name: "mine"}
	if err := submittedJobs(&named); err != nil || named.Name != "mine" || named.Tasks[0].Name != "pipe-0" {
		t.Fatalf("named: %v %+v", err, named)
	}
	// A single task takes the job's name, as the CLI gives it.
	one := api.JobsLaunchBody{DAGYAML: "run: echo\n", Name: "solo"}
	if err := submittedJobs(&one); err != nil || len(one.Tasks) != 1 || one.Tasks[0].Name != "solo" {
		t.Fatalf("one: %v %+v", err, one)
	}

	group := `name: grp
execution: parallel
primary_tasks: [trainer]
termination_delay: 30s
---
name: trainer
run: echo t
---
name: helper
run: echo h
`
	g := api.JobsLaunchBody{DAGYAML: group}
	if err := submittedJobs(&g); err != nil {
		t.Fatal(err)
	}
	if g.Execution != "parallel" || !reflect.DeepEqual(g.PrimaryTasks, []string{"trainer"}) || g.TerminationDelay["default"] != "30s" {
		t.Fatalf("job group header: %+v", g)
	}
	pooled := api.JobsLaunchBody{DAGYAML: group, Pool: "p"}
	if oe := opErrorOf(t, submittedJobs(&pooled)); !strings.Contains(oe.Message, "cannot run on a pool") {
		t.Errorf("group on a pool: %v", oe)
	}

	for _, tc := range []struct {
		body    api.JobsLaunchBody
		wantMsg string
	}{
		{api.JobsLaunchBody{DAGYAML: pipe, UploadIDs: []string{"x"}}, "upload_ids has 1 entries for 2 tasks"},
		{api.JobsLaunchBody{DAGYAML: "name: p\n---\nworkdir: rel\nrun: x\n"}, `workdir "rel" is not an absolute path`},
		{api.JobsLaunchBody{DAGYAML: "run: [\n"}, "<dag_yaml>:"},
		{api.JobsLaunchBody{DAGYAML: "run: x\n", Tasks: []api.TaskSpec{{Run: "x"}}}, "both tasks and dag_yaml"},
		{api.JobsLaunchBody{UploadIDs: []string{"x"}, Tasks: []api.TaskSpec{{Run: "x"}}}, "upload_ids is given without dag_yaml"},
	} {
		b := tc.body
		if oe := opErrorOf(t, submittedJobs(&b)); !strings.Contains(oe.Message, tc.wantMsg) {
			t.Errorf("%+v: %q, want %q", tc.body, oe.Message, tc.wantMsg)
		}
	}
}

// serve.up/update and jobs.pool_apply take the service or pool YAML as
// task_yaml and resolve it as `sky serve up` / `sky jobs pool apply`
// resolve the same file.
func TestSubmittedServiceAndPool(t *testing.T) {
	svcYAML := `service:
  readiness_probe: /health
  replicas: 2
resources: {infra: local, ports: 8080}
run: python3 -m http.server 8080
`
	dag, err := task.LoadBytes("svc.yaml", []byte(svcYAML), task.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantTask, wantSvc, err := task.ServiceSubmission(dag, "svc.yaml", task.ValidateForLaunch)
	if err != nil {
		t.Fatal(err)
	}
	wantTask.UploadID = "u1"
	up := api.ServeUpBody{Name: "web", TaskYAML: svcYAML, UploadID: "u1"}
	if err := submittedService(&up.Task, &up.Service, up.TaskYAML, up.UploadID); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(up.Task, wantTask) || !reflect.DeepEqual(up.Service, wantSvc) {
		t.Errorf("serve.up from task_yaml:\n got %+v\n     %+v\nwant %+v\n     %+v", up.Task, up.Service, wantTask, wantSvc)
	}
	if up.Service.Replicas == nil || *up.Service.Replicas != 2 || up.Service.Probe.Path != "/health" {
		t.Errorf("service section not carried: %+v", up.Service)
	}

	poolYAML := "pool: {workers: 3}\nresources: {infra: local}\nsetup: echo ready\n"
	pb := api.PoolApplyBody{Name: "p", TaskYAML: poolYAML}
	if err := submittedPool(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Task == nil || pb.Policy == nil || pb.Policy.Workers == nil || *pb.Policy.Workers != 3 || pb.Task.Setup != "echo ready" || pb.TaskYAML != "" {
		t.Errorf("pool_apply from task_yaml: %+v", pb)
	}

	for _, tc := range []struct {
		name, yaml, want string
		pool             bool
	}{
		{"pool YAML to serve up", poolYAML, "is a pool YAML", false},
		{"service without pool section", svcYAML, "has no pool: section", true},
		{"pool with ports", "pool: {workers: 1}\nresources: {ports: 8080}\nsetup: x\n", "Cannot specify ports in a pool", true},
		{"relative workdir", "pool: {workers: 1}\nworkdir: ./src\nsetup: x\n", "not an absolute path", true},
		{"bad YAML", "service: [\n", "<task_yaml>", false},
	} {
		var err error
		if tc.pool {
			b := api.PoolApplyBody{TaskYAML: tc.yaml}
			err = submittedPool(&b)
		} else {
			var ts api.TaskSpec
			var sv api.ServiceSpec
			err = submittedService(&ts, &sv, tc.yaml, "")
		}
		if oe := opErrorOf(t, err); !strings.Contains(oe.Message, tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// sky.optimize returns each task's YAML with the resources chosen; what
// the optimizer does not choose (ports) stays as asked.
func TestOptimizedTask(t *testing.T) {
	spec := api.TaskSpec{YAML: "name: t\nresources:\n  accelerators: A100:8\n  ports: 8080\nrun: train\n"}
	p := &optimizer.Plan{Tasks: []optimizer.TaskPlan{{Chosen: optimizer.Candidate{Cloud: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge", AccName: "A100", AccCount: 8, UseSpot: true}}}}
	got, err := optimizedTask(spec, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"infra: aws/us-east-1", "instance_type: p4d.24xlarge", "A100: 8", "use_spot: true", "ports: 8080", "run: train", "name: t"} {
		if !strings.Contains(got, want) {
			t.Errorf("optimized task lacks %q:\n%s", want, got)
		}
	}
}
