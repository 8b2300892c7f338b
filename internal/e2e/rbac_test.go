package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/client"
)

// TestRegularUserCannotReadOthersJobs: with basic auth, bob cannot read
// alice's job logs, status or queue by naming her cluster, and his
// `queue -u` lists every job on his own clusters but not hers; the admin
// reads both.
func TestRegularUserCannotReadOthersJobs(t *testing.T) {
	e := newEnv(t)
	srv := *e
	srv.env = append(append([]string{}, e.env...), "ENABLE_BASIC_AUTH=true", "SKYPILOT_INITIAL_BASIC_AUTH=admin:adminpw")
	startForegroundServer(t, &srv, e.port)
	endpoint := func(user string) []string {
		return []string{fmt.Sprintf("SKYPILOT_API_SERVER_ENDPOINT=http://%s:%spw@127.0.0.1:%d", user, user, e.port)}
	}
	admin, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://admin:adminpw@127.0.0.1:%d", e.port), Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if err := admin.Do(context.Background(), "POST", "/users/create", map[string]string{"username": u, "password": u + "pw"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string, args ...string) result {
		t.Helper()
		return e.exec(cmdTimeout, endpoint(user), args...)
	}
	mustAs := func(user string, args ...string) result {
		t.Helper()
		r := as(user, args...)
		if r.code != 0 {
			t.Fatalf("%s: %s\n%s", user, r, e.serverLogTail())
		}
		return r
	}
	// Each owner tears down their own cluster: the env's cleanup runs as
	// nobody in particular and would not see them.
	t.Cleanup(func() { as("alice", "down", "-y", "ca"); as("bob", "down", "-y", "cb") })
	mustAs("alice", "launch", "-y", "-c", "ca", "--", "echo alice-private-line")
	mustAs("bob", "launch", "-y", "-c", "cb", "--", "echo bob-line")
	if r := mustAs("alice", "logs", "ca", "1"); !strings.Contains(r.stdout, "alice-private-line") {
		t.Fatalf("alice cannot read her own log:\n%s", r)
	}

	for _, args := range [][]string{
		{"logs", "ca", "1"},
		{"logs", "--no-follow", "ca"},
		{"logs", "--status", "ca", "1"},
		{"queue", "ca"},
	} {
		r := as("bob", args...)
		if r.code == 0 || strings.Contains(r.out(), "alice-private-line") || !strings.Contains(r.out(), "another user's cluster") {
			t.Errorf("bob read alice's cluster: %s", r)
		}
	}
	queueU := func(user string) map[string][]job {
		t.Helper()
		var out map[string][]job
		r := mustAs(user, "queue", "-u", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%s: queue -u -o json: %v\n%s", user, err, r)
		}
		return out
	}
	if q := queueU("bob"); len(q["cb"]) != 1 || q["ca"] != nil {
		t.Errorf("bob's queue -u: %+v, want his cluster cb alone", q)
	}
	if q := queueU("admin"); len(q["ca"]) != 1 || len(q["cb"]) != 1 {
		t.Errorf("admin's queue -u: %+v, want both users' clusters", q)
	}
	adminEnv := []string{fmt.Sprintf("SKYPILOT_API_SERVER_ENDPOINT=http://admin:adminpw@127.0.0.1:%d", e.port)}
	if r := e.exec(cmdTimeout, adminEnv, "logs", "ca", "1"); r.code != 0 || !strings.Contains(r.stdout, "alice-private-line") {
		t.Errorf("the admin cannot read alice's log: %s", r)
	}
	mustAs("alice", "down", "-y", "ca")
	mustAs("bob", "down", "-y", "cb")
}
