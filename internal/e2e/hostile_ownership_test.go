package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
)

// volumeNames are the names `sky volumes ls -o json` shows user.
func (tm *team) volumeNames(user string) []string {
	tm.t.Helper()
	var recs []struct {
		Name   string         `json:"name"`
		Config map[string]any `json:"config"`
	}
	r := tm.mustAs(user, "volumes", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		tm.t.Fatalf("%s: volumes ls -o json: %v\n%s", user, err, r)
	}
	var out []string
	for _, v := range recs {
		out = append(out, v.Name)
	}
	return out
}

func hasName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// TestHostileVolumesOwnership: bob can neither list, delete (by name or
// with -a), take over by name, nor mount alice's volume; alice keeps her
// data; the admin sees and deletes everyone's.
func TestHostileVolumesOwnership(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	t.Cleanup(func() { tm.as("admin", "volumes", "delete", "-y", "-a") })
	tm.mustAs("alice", "volumes", "apply", "-y", "-n", "alicevol", "--type", "host-dir", "--infra", "local")
	tm.mustAs("bob", "volumes", "apply", "-y", "-n", "bobvol", "--type", "host-dir", "--infra", "local")
	var recs []struct {
		Name     string `json:"name"`
		HostPath string `json:"host_path"`
		UserName string `json:"user_name"`
	}
	r := tm.mustAs("admin", "volumes", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		t.Fatalf("admin volumes ls: %v\n%s", err, r)
	}
	hostPath := ""
	for _, v := range recs {
		if v.Name == "alicevol" {
			hostPath = v.HostPath
		}
	}
	if len(recs) != 2 || hostPath == "" {
		t.Fatalf("the admin should see both volumes with alicevol's host path: %+v", recs)
	}
	secret := filepath.Join(hostPath, "secret.txt")
	if err := os.WriteFile(secret, []byte("alice-data\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if names := tm.volumeNames("bob"); hasName(names, "alicevol") || !hasName(names, "bobvol") {
		t.Errorf("bob's volumes ls: %v, want bobvol and not alicevol", names)
	}
	if r := tm.as("bob", "volumes", "delete", "-y", "alicevol"); r.code == 0 || !strings.Contains(r.out(), "another user") {
		t.Errorf("bob deleted alice's volume by name: %s", r)
	}
	if r := tm.as("bob", "volumes", "apply", "-y", "-n", "alicevol", "--type", "host-dir", "--infra", "local"); r.code == 0 {
		t.Errorf("bob's apply of alice's volume name succeeded (as if it were his): %s", r)
	}
	task := writeFile(t, "steal.yaml", "volumes:\n  ~/x: alicevol\nrun: cat ~/x/secret.txt; echo bob-was-here > ~/x/bob.txt\n")
	t.Cleanup(func() { tm.as("bob", "down", "-y", "bobsteal") })
	if r := tm.as("bob", "launch", "-y", "-c", "bobsteal", task); r.code == 0 || strings.Contains(r.out(), "alice-data") {
		t.Errorf("bob's task mounted alice's volume: %s", r)
	}
	if _, err := os.Stat(filepath.Join(hostPath, "bob.txt")); err == nil {
		t.Errorf("bob's task wrote into alice's volume")
	}
	if r := tm.mustAs("bob", "volumes", "delete", "-y", "-a"); strings.Contains(r.out(), "alicevol") {
		t.Errorf("bob's delete -a named alice's volume: %s", r)
	}
	if names := tm.volumeNames("alice"); !hasName(names, "alicevol") {
		t.Fatalf("alice's volume is gone after bob's delete -a: %v", names)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "alice-data\n" {
		t.Fatalf("alice's data after bob's attempts: %q, %v", b, err)
	}
	if names := tm.volumeNames("admin"); hasName(names, "bobvol") {
		t.Errorf("bob's delete -a left his own volume: %v", names)
	}
	// The admin acts on anyone's.
	tm.mustAs("admin", "volumes", "delete", "-y", "alicevol")
	if names := tm.volumeNames("admin"); len(names) != 0 {
		t.Errorf("after the admin's delete: %v", names)
	}
}

// clusterNames are the clusters `sky status -u -o json` shows user.
func (tm *team) clusterNames(user string) []string {
	tm.t.Helper()
	var recs []struct {
		Name string `json:"name"`
	}
	r := tm.mustAs(user, "status", "-u", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		tm.t.Fatalf("%s: status -u -o json: %v\n%s", user, err, r)
	}
	var out []string
	for _, c := range recs {
		out = append(out, c.Name)
	}
	return out
}

// TestHostileAdminActsOnUsersClusters: `down -u` by bob leaves alice's
// cluster (the flag selects, it does not authorize), and `sky local down`,
// which would remove every user's local clusters, is the admin's; the admin sets
// autostop on, stops, starts and tears down a user's cluster by name, and
// `down -a -u` takes down every user's.
func TestHostileAdminActsOnUsersClusters(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	tm.mustAs("alice", "launch", "-y", "-c", "ca1", "--", "echo a1")
	tm.mustAs("alice", "launch", "-y", "-c", "ca2", "--", "echo a2")
	tm.mustAs("bob", "launch", "-y", "-c", "cb1", "--", "echo b1")

	if r := tm.as("bob", "local", "down"); r.code == 0 || !strings.Contains(r.out(), "only an admin") {
		t.Errorf("bob's local down: %s", r)
	}
	if names := tm.clusterNames("admin"); len(names) != 3 {
		t.Fatalf("after bob's local down: %v, want ca1, ca2 and cb1", names)
	}
	r := tm.as("bob", "down", "-u", "-y")
	if names := tm.clusterNames("admin"); !hasName(names, "ca1") || !hasName(names, "ca2") {
		t.Fatalf("bob's down -u took down alice's clusters: %v\n%s", names, r)
	}
	if !strings.Contains(r.out(), "another user") {
		t.Errorf("bob's down -u should say alice's clusters are not his: %s", r)
	}
	if names := tm.clusterNames("admin"); hasName(names, "cb1") {
		t.Errorf("bob's down -u left his own cluster: %v", names)
	}

	if r := tm.mustAs("admin", "autostop", "-y", "-i", "30", "ca1"); strings.Contains(r.out(), "another user") {
		t.Errorf("admin autostop of alice's cluster: %s", r)
	}
	statusOf := func(name string) string {
		t.Helper()
		var recs []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		}
		r := tm.mustAs("admin", "status", "-u", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			t.Fatalf("status -u -o json: %v\n%s", err, r)
		}
		for _, c := range recs {
			if c.Name == name {
				return c.Status
			}
		}
		return ""
	}
	if r := tm.mustAs("admin", "stop", "-y", "ca2"); strings.Contains(r.out(), "another user") || statusOf("ca2") != "STOPPED" {
		t.Errorf("admin stop of alice's cluster: %s; status %s", r, statusOf("ca2"))
	}
	if r := tm.mustAs("admin", "start", "-y", "ca2"); strings.Contains(r.out(), "another user") || statusOf("ca2") != "UP" {
		t.Errorf("admin start of alice's cluster: %s; status %s", r, statusOf("ca2"))
	}
	if r := tm.mustAs("admin", "down", "-y", "ca1"); strings.Contains(r.out(), "failed") || strings.Contains(r.out(), "another user") {
		t.Errorf("admin down of alice's cluster: %s", r)
	}
	if names := tm.clusterNames("admin"); hasName(names, "ca1") {
		t.Fatalf("admin's down ca1 left it: %v", names)
	}
	tm.mustAs("bob", "launch", "-y", "-c", "cb2", "--", "echo b2")
	if r := tm.mustAs("admin", "down", "-a", "-u", "-y"); strings.Contains(r.out(), "failed") {
		t.Errorf("admin down -a -u: %s", r)
	}
	if names := tm.clusterNames("admin"); len(names) != 0 {
		t.Fatalf("admin's down -a -u left: %v", names)
	}
}

// TestHostileCancelOthersRequestIsNotFound: bob's /api/cancel of alice's
// request answers 404, as /api/get does, and does not cancel it.
func TestHostileCancelOthersRequestIsNotFound(t *testing.T) {
	parallel(t)
	tm := newTeam(t)
	ctx := context.Background()
	alice, bob := tm.clientAs("alice"), tm.clientAs("bob")
	id, err := client.Submit(ctx, alice, apiop.Status, api.ClustersBody{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Get(ctx, id); err != nil {
		t.Fatal(err)
	}
	status := func(err error) int {
		var ae *client.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	_, getErr := bob.Get(ctx, id)
	_, cancelErr := bob.Cancel(ctx, []string{id}, false)
	if status(getErr) != http.StatusNotFound {
		t.Fatalf("bob's /api/get of alice's request: %v, want 404", getErr)
	}
	if status(cancelErr) != http.StatusNotFound || strings.Contains(cancelErr.Error(), "another user") {
		t.Errorf("bob's /api/cancel of alice's request: %v, want 404 like /api/get", cancelErr)
	}
	// The admin may cancel anyone's (here: already finished, so nothing to cancel).
	if _, err := tm.admin.Cancel(ctx, []string{id}, false); err != nil {
		t.Errorf("admin's cancel of alice's request: %v", err)
	}
}

const privateWorkspaceConfig = `workspaces:
  secret:
    private: true
    allowed_users:
      - alice
`

// TestHostilePrivateWorkspace: a private workspace is refused to bob
// (launching into it, and he sees neither it nor alice's cluster in it),
// and usable by alice, whom allowed_users names, and the admin.
func TestHostilePrivateWorkspace(t *testing.T) {
	parallel(t)
	tm := newTeamWithConfig(t, privateWorkspaceConfig)
	ctx := context.Background()
	if r := tm.as("bob", "launch", "-y", "-c", "bw", "-w", "secret", "--", "echo bob"); r.code == 0 || !strings.Contains(r.out(), "does not have access to workspace") {
		t.Errorf("bob launched into the private workspace: %s", r)
	}
	if r := tm.as("bob", "jobs", "launch", "-y", "-d", "-w", "secret", "--", "echo bob"); r.code == 0 || !strings.Contains(r.out(), "does not have access to workspace") {
		t.Errorf("bob submitted a managed job into the private workspace: %s", r)
	}
	tm.mustAs("alice", "launch", "-y", "-c", "aw", "-w", "secret", "--", "echo alice")
	tm.mustAs("alice", "jobs", "launch", "-y", "-d", "-n", "alicesecretjob", "-w", "secret", "--", "echo alice")
	if r := tm.mustAs("bob", "jobs", "queue", "-u", "-o", "json"); strings.Contains(r.stdout, "alicesecretjob") {
		t.Errorf("bob's jobs queue -u shows alice's job of the private workspace: %s", r)
	}
	if r := tm.mustAs("admin", "jobs", "queue", "-u", "-o", "json"); !strings.Contains(r.stdout, "alicesecretjob") {
		t.Errorf("the admin's jobs queue -u misses the private workspace's job: %s", r)
	}
	if names := tm.clusterNames("bob"); hasName(names, "aw") {
		t.Errorf("bob's status -u shows alice's cluster of the private workspace: %v", names)
	}
	if names := tm.clusterNames("admin"); !hasName(names, "aw") {
		t.Errorf("the admin's status -u misses the private workspace's cluster: %v", names)
	}
	workspaces := func(c *client.Client) map[string]any {
		ws, err := client.Call(ctx, c, apiop.Workspaces, op.NoBody{})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	if ws := workspaces(tm.clientAs("bob")); ws["secret"] != nil {
		t.Errorf("bob sees the private workspace: %v", ws)
	}
	if ws := workspaces(tm.clientAs("alice")); ws["secret"] == nil {
		t.Errorf("alice does not see the workspace she is allowed in: %v", ws)
	}
	tm.mustAs("alice", "down", "-y", "aw")
}

// TestHostileRBACDefaultRole: rbac.default_role is the role of a user
// created without one.
func TestHostileRBACDefaultRole(t *testing.T) {
	parallel(t)
	tm := newTeamWithConfig(t, "rbac:\n  default_role: admin\n")
	var users []struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	if err := tm.clientAs("bob").Do(context.Background(), "GET", "/users", nil, &users); err != nil {
		t.Fatalf("bob, an admin by rbac.default_role, cannot list users: %v", err)
	}
	for _, u := range users {
		if u.Name == "bob" && u.Role != "admin" {
			t.Errorf("bob's role: %q, want admin", u.Role)
		}
	}
}

// TestHostileRBACBlocklist: a path in rbac.roles.user.permissions.blocklist
// is refused (403) to a user and allowed to the admin; other paths stay
// open to the user.
func TestHostileRBACBlocklist(t *testing.T) {
	parallel(t)
	tm := newTeamWithConfig(t, `rbac:
  roles:
    user:
      permissions:
        blocklist:
          - path: /volumes/apply
            method: POST
          - path: /jobs/queue
            method: POST
`)
	if r := tm.as("bob", "volumes", "apply", "-y", "-n", "bv", "--type", "host-dir", "--infra", "local"); r.code == 0 || !strings.Contains(r.out(), "Forbidden") {
		t.Errorf("bob applied a volume though the user role's blocklist names /volumes/apply: %s", r)
	}
	// The queue's JSON is streamed from another path: the op's rule
	// holds for it too.
	for _, args := range [][]string{{"jobs", "queue"}, {"jobs", "queue", "-o", "json"}} {
		if r := tm.as("bob", args...); r.code == 0 || !strings.Contains(r.out(), "Forbidden") {
			t.Errorf("bob listed the managed jobs though the blocklist names /jobs/queue: %s", r)
		}
		tm.mustAs("admin", args...)
	}
	tm.mustAs("bob", "volumes", "ls")
	t.Cleanup(func() { tm.as("admin", "volumes", "delete", "-y", "-a") })
	tm.mustAs("admin", "volumes", "apply", "-y", "-n", "av", "--type", "host-dir", "--infra", "local")
}
