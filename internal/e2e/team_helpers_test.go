package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/client"
)

// team is a shared API server with basic auth and three users: the admin
// ("admin") and two regular users, alice and bob. It is what the hostile
// multi-user tests attack: bob tries to reach alice's objects, the admin
// must reach everyone's.
type team struct {
	*skyEnv
	// admin calls the API directly (users, tokens, raw bodies).
	admin *client.Client
}

// teamUsers are the regular users newTeam creates; each one's password is
// the name followed by "pw".
var teamUsers = []string{"alice", "bob"}

// newTeam starts a foreground API server with basic auth on a fresh
// installation (extraServerEnv is added to the server's environment) and
// creates alice and bob. Cleanup tears down every user's clusters, managed
// jobs, services, pools and volumes as the admin, before the installation's
// own cleanup stops the server and counts leftover processes.
func newTeam(t *testing.T, extraServerEnv ...string) *team {
	t.Helper()
	e := newEnv(t)
	srv := *e
	// The local infrastructure is admins-only on a server with users
	// unless the admin allows it (core.EnvLocalForUsers); the team's
	// users launch there, as their attacks need. extraServerEnv may say
	// SKYGO_LOCAL_FOR_USERS=0 (the last value wins).
	srv.env = append(append(append([]string{}, e.env...), "ENABLE_BASIC_AUTH=true", "SKYPILOT_INITIAL_BASIC_AUTH=admin:adminpw", "SKYGO_LOCAL_FOR_USERS=1"), extraServerEnv...)
	startForegroundServer(t, &srv, e.port)
	admin, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://admin:adminpw@127.0.0.1:%d", e.port), Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range teamUsers {
		if err := admin.Do(context.Background(), "POST", "/users/create", map[string]string{"username": u, "password": u + "pw"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	tm := &team{skyEnv: e, admin: admin}
	// Registered after newEnv's cleanup, so it runs first (LIFO), while the
	// server still answers: the admin takes down what every user made.
	t.Cleanup(tm.teardownAll)
	return tm
}

// endpoint is the client environment that logs in as user.
func (tm *team) endpoint(user string) []string {
	return []string{fmt.Sprintf("SKYPILOT_API_SERVER_ENDPOINT=http://%s:%spw@127.0.0.1:%d", user, user, tm.port)}
}

// as runs a sky command as user ("admin", "alice", "bob").
func (tm *team) as(user string, args ...string) result {
	tm.t.Helper()
	return tm.exec(cmdTimeout, tm.endpoint(user), args...)
}

// mustAs is as, failing the test when the command fails.
func (tm *team) mustAs(user string, args ...string) result {
	tm.t.Helper()
	r := tm.as(user, args...)
	if r.code != 0 {
		tm.t.Fatalf("%s: %s\n%s", user, r, tm.serverLogTail())
	}
	return r
}

// clientAs is a Go API client logged in as user, for raw requests.
func (tm *team) clientAs(user string) *client.Client {
	tm.t.Helper()
	c, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://%s:%spw@127.0.0.1:%d", user, user, tm.port), Home: tm.home})
	if err != nil {
		tm.t.Fatal(err)
	}
	return c
}

// teardownAll ends every user's managed jobs, services, pools, clusters and
// volumes as the admin.
func (tm *team) teardownAll() {
	t := tm.t
	if r := tm.as("admin", "jobs", "cancel", "-a", "-u", "-y"); r.code != 0 {
		t.Errorf("team cleanup: %s", r)
	} else if !strings.Contains(r.out(), "No job to cancel") {
		waitFor(60*time.Second, func() bool {
			r := tm.as("admin", "jobs", "queue", "-u", "--skip-finished", "-o", "json")
			return r.code == 0 && strings.TrimSpace(r.stdout) == "[]"
		})
	}
	for _, args := range [][]string{
		{"serve", "down", "-a", "-y"},
		{"jobs", "pool", "down", "-a", "-y"},
	} {
		if r := tm.as("admin", args...); r.code != 0 && !strings.Contains(r.out(), "No ") {
			t.Errorf("team cleanup: %s", r)
		}
	}
	if r := tm.as("admin", "down", "-a", "-u", "-y"); r.code != 0 || strings.Contains(r.stdout, "Cluster(s) failed.") {
		t.Errorf("team cleanup: %s", r)
	}
}

// newTeamWithConfig is newTeam with a server config (the YAML of
// ~/.sky/config.yaml: workspaces, rbac, ...) that only the server reads:
// it is handed over as SKYPILOT_GLOBAL_CONFIG, so the clients' own
// config stays empty.
func newTeamWithConfig(t *testing.T, yaml string, extraServerEnv ...string) *team {
	t.Helper()
	path := writeFile(t, "server-config.yaml", yaml)
	return newTeam(t, append([]string{"SKYPILOT_GLOBAL_CONFIG=" + path}, extraServerEnv...)...)
}
