package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
)

// TestBodyDecodedAtTheEdge: a body that is not its operation's (a task's
// resources that are not valid) is refused with a 400 naming the field,
// before any request is made; a good one is decoded once, as it arrives,
// and its operation gets the typed value.
func TestBodyDecodedAtTheEdge(t *testing.T) {
	launch := op.Desc[api.LaunchBody, api.LaunchResult]{Name: "launch"}
	var runs atomic.Int32
	var got atomic.Pointer[api.LaunchBody]
	o := op.Handle(launch, func(_ context.Context, r *op.Request, b api.LaunchBody) (api.LaunchResult, error) {
		runs.Add(1)
		if _, ok := r.Decoded.(*api.LaunchBody); !ok {
			t.Errorf("the op decoded its body again: Decoded is %T", r.Decoded)
		}
		got.Store(&b)
		return api.LaunchResult{ClusterName: b.ClusterName}, nil
	})
	c, err := client.New(client.Options{Endpoint: liveServer(t, newTestServer(t, Options{}, o)), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = client.SubmitEncoded(ctx, c, launch, []byte(`{"cluster_name":"c","task":{"num_nodes":1,"resources":{"cpus":"lots"}}}`))
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Detail, "resources.cpus:") || !strings.Contains(ae.Detail, "/launch") {
		t.Fatalf("bad resources: %v, want a 400 naming resources.cpus", err)
	}
	recs, err := c.Status(ctx, client.StatusOptions{AllStatus: true})
	if err != nil || len(recs) != 0 {
		t.Errorf("a refused body left requests: %+v %v", recs, err)
	}
	res, err := client.Call(ctx, c, launch, api.LaunchBody{ClusterName: "c", Task: api.TaskSpec{NumNodes: 1}})
	if err != nil || res.ClusterName != "c" || runs.Load() != 1 {
		t.Fatalf("good body: %+v %v (runs %d)", res, err, runs.Load())
	}
	id, err := client.SubmitEncoded(ctx, c, launch, []byte(`{"cluster_name":"d","task":{"num_nodes":1,"resources":{"cpus":"4+","cloud":"aws"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if b := got.Load(); b.ClusterName != "d" || b.Task.Resources.CPUs == nil || b.Task.Resources.Infra.String() != "aws" {
		t.Errorf("the op got %s with resources %s", b.ClusterName, b.Task.Resources.String())
	}
}
