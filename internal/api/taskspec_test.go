package api

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/fielderr"
)

// oldLaunch is a launch body as the server before typed resources
// encoded it (and stored its task in job and service records): the
// resources were a map[string]any holding resources.ToMap.
const oldLaunch = `{"task":{"name":"rec","num_nodes":2,"resources":{"accelerators":"A100:8","any_of":[{"accelerators":"H100:8"},{"accelerators":"A100:8","infra":"*/*/us-east-1a"}],"autostop":{"down":false,"idle_minutes":10,"wait_for":"jobs_and_ssh"},"cpus":"8+","disk_size":256,"infra":"aws/us-east-1","job_recovery":{"max_restarts_on_errors":2,"strategy":"FAILOVER"},"labels":{"team":"ml"},"memory":"32","ports":["8080","9000-9002"],"priority":5,"use_spot":true},"run":"echo hi"},"cluster_name":"c"}`

// TestTaskSpecResourcesWire: a body or record written before resources
// were typed decodes into typed resources and encodes back to the same
// bytes; a task without resources still leaves the key out.
func TestTaskSpecResourcesWire(t *testing.T) {
	var b LaunchBody
	if err := json.Unmarshal([]byte(oldLaunch), &b); err != nil {
		t.Fatal(err)
	}
	r := b.Task.Resources
	if r.Infra.String() != "aws/us-east-1" || r.AcceleratorName() != "A100" || !r.Spot() || len(r.AnyOf) != 2 || r.Priority == nil || *r.Priority != 5 {
		t.Errorf("decoded resources: %s (%+v)", r.String(), r.Resources)
	}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != oldLaunch {
		t.Errorf("re-encoded\n%s\nwant\n%s", out, oldLaunch)
	}
	for spec, want := range map[string]string{
		`{"num_nodes":1,"run":"x"}`:                  `{"num_nodes":1,"run":"x"}`,
		`{"num_nodes":1,"resources":{},"run":"x"}`:   `{"num_nodes":1,"run":"x"}`,
		`{"num_nodes":1,"resources":null,"run":"x"}`: `{"num_nodes":1,"run":"x"}`,
	} {
		var ts TaskSpec
		if err := json.Unmarshal([]byte(spec), &ts); err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if out, _ := json.Marshal(ts); string(out) != want {
			t.Errorf("%s re-encoded as %s, want %s", spec, out, want)
		}
	}
}

// TestTaskSpecBadResources: resources that are not valid fail to decode
// with the loader's message, its path starting at resources.
func TestTaskSpecBadResources(t *testing.T) {
	for body, want := range map[string]string{
		`{"task":{"resources":{"cpus":"lots"}}}`:          "resources.cpus: ",
		`{"task":{"resources":{"acclerators":"A100"}}}`:   "resources.acclerators: ",
		`{"task":{"resources":"A100"}}`:                   "resources: resources must be a mapping",
		`{"task":{"resources":{"any_of":[{"cpus":-1}]}}}`: "resources.any_of[0].cpus: ",
	} {
		var b LaunchBody
		err := json.Unmarshal([]byte(body), &b)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want a field error starting %q", body, err, want)
		}
	}
}
