package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// volumeRow is the volume's line of `sky volumes ls` ("" when absent).
func (e *skyEnv) volumeRow(name string) string {
	e.t.Helper()
	r := e.must("volumes", "ls")
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return line
		}
	}
	return ""
}

// TestVolumesFollowTheCluster: a host-dir volume on the local infra keeps
// what a task wrote into it across `sky down` and a relaunch; ls shows it
// IN_USE by the cluster while attached and READY after; delete refuses
// while it is in use and works after the down; a multi-node cluster on
// this machine shares it; a missing volume, or an ephemeral one (a
// Kubernetes PVC) with no Kubernetes enabled, fails the launch before
// anything is provisioned.
func TestVolumesFollowTheCluster(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	r := e.must("volumes", "apply", "-y", "-n", "data", "--type", "host-dir", "--infra", "local")
	if !strings.Contains(r.out(), "Created volume data") {
		t.Fatalf("apply: %s", r)
	}
	if row := e.volumeRow("data"); !strings.Contains(row, "READY") || !strings.Contains(row, "local") {
		t.Fatalf("after apply: %q", row)
	}
	var recs []map[string]any
	e.mustJSON(&recs, "volumes", "ls", "-o", "json")
	if len(recs) != 1 {
		t.Fatalf("volumes ls -o json: %v", recs)
	}
	hostPath, _ := recs[0]["config"].(map[string]any)["host_path"].(string)
	if !strings.HasPrefix(hostPath, filepath.Join(e.home, ".sky", "volumes")+"/") {
		t.Fatalf("host_path %q is not under the server user's ~/.sky/volumes", hostPath)
	}

	writer := writeFile(t, "write.yaml", "volumes:\n  ~/data: data\nrun: |\n  echo kept-across-down > ~/data/f.txt\n  ls -l ~/data >/dev/null\n")
	e.must("launch", "-y", "-c", "vol1", writer)
	if b, err := os.ReadFile(filepath.Join(hostPath, "f.txt")); err != nil || strings.TrimSpace(string(b)) != "kept-across-down" {
		t.Fatalf("the task's file in the volume directory: %q, %v", b, err)
	}
	row := e.volumeRow("data")
	if !strings.Contains(row, "IN_USE") || !strings.Contains(row, "vol1") {
		t.Errorf("while vol1 mounts it: %q, want IN_USE by vol1", row)
	}
	if r := e.exec(cmdTimeout, nil, "volumes", "delete", "-y", "data"); r.code == 0 || !strings.Contains(r.out(), "Volume data is used by cluster(s) vol1.") {
		t.Errorf("delete of a volume in use: %s", r)
	}

	e.must("down", "-y", "vol1")
	if row := e.volumeRow("data"); !strings.Contains(row, "READY") || strings.Contains(row, "IN_USE") || strings.Contains(row, "vol1") {
		t.Errorf("after down: %q, want READY and no user", row)
	}
	if _, err := os.Stat(filepath.Join(hostPath, "f.txt")); err != nil {
		t.Fatalf("down took the volume's data: %v", err)
	}

	// A relaunch under the same name, and a two-node cluster: both see
	// the data (every local node is on this machine).
	reader := writeFile(t, "read.yaml", "num_nodes: 2\nvolumes:\n  ~/mnt/data: data\nrun: cat ~/mnt/data/f.txt\n")
	r = e.must("launch", "-y", "-c", "vol1", reader)
	if strings.Count(r.stdout, "kept-across-down") < 2 {
		t.Errorf("relaunch did not read the data back on both nodes:\n%s", r.stdout)
	}
	e.must("down", "-y", "vol1")

	// Refused before provisioning: a volume that does not exist, an
	// ephemeral one with no Kubernetes, and a place the volume is not.
	missing := writeFile(t, "missing.yaml", "volumes:\n  ~/x: nosuch\nrun: echo no\n")
	if r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "vol2", missing); r.code == 0 || !strings.Contains(r.out(), "Volume nosuch not found.") {
		t.Errorf("launch with a missing volume: %s", r)
	}
	if r := e.exec(cmdTimeout, nil, "launch", "--dryrun", "-y", "-c", "vol2", missing); r.code == 0 || !strings.Contains(r.out(), "Volume nosuch not found.") {
		t.Errorf("dry run with a missing volume: %s", r)
	}
	eph := writeFile(t, "eph.yaml", "volumes:\n  ~/x:\n    size: 10Gi\nrun: echo no\n")
	if r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "vol2", eph); r.code == 0 || !strings.Contains(r.out(), "kubernetes: not enabled") {
		t.Errorf("launch with an ephemeral volume (a Kubernetes PVC) and no kubeconfig: %s", r)
	}
	if r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "vol2", "--infra", "ssh/pool", writer); r.code == 0 || !strings.Contains(r.out(), "volume data lives on local") {
		t.Errorf("launch elsewhere than the volume: %s", r)
	}
	if _, ok := e.status(false)["vol2"]; ok {
		t.Errorf("a refused launch left cluster vol2")
	}

	// A cluster that holds it and is gone without a down (the record
	// says vol3, no cluster does) does not stop the delete.
	e.must("launch", "-y", "-c", "vol3", writer)
	e.must("down", "-y", "vol3")
	r = e.must("volumes", "delete", "-y", "data")
	if !strings.Contains(r.out(), "Volume data deleted.") {
		t.Errorf("delete after down: %s", r)
	}
	if _, err := os.Stat(hostPath); !os.IsNotExist(err) {
		t.Errorf("delete left the volume directory %s (%v)", hostPath, err)
	}
	if r := e.must("volumes", "ls"); !strings.Contains(r.stdout, "No existing volumes.") {
		t.Errorf("ls after delete: %s", r)
	}
}

// TestVolumesPurgeInUse: --purge deletes a volume a cluster still
// mounts (SkyPilot's escape hatch); the cluster's down then finds the
// record gone and still succeeds.
func TestVolumesPurgeInUse(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("volumes", "apply", "-y", "-n", "scratch", "--type", "host-dir")
	task := writeFile(t, "t.yaml", "volumes:\n  ~/s: scratch\nrun: touch ~/s/x\n")
	e.must("launch", "-y", "-c", "vp", task)
	r := e.must("volumes", "delete", "-y", "--purge", "scratch")
	if !strings.Contains(r.out(), "Volume scratch deleted.") {
		t.Errorf("delete --purge of a volume in use: %s", r)
	}
	e.must("down", "-y", "vp")
}

// TestSSHVolumeFollowsItsHost: a host-dir volume on an SSH node pool
// lives on the host of the first cluster that mounts it; after `sky
// down`, a relaunch lands its head on that host again (not on the pool's
// first free host) and reads the data back; a multi-node task cannot
// mount it; deleting it removes the directory from that host.
func TestSSHVolumeFollowsItsHost(t *testing.T) {
	// One at a time with the other tests of the sshd hosts (e2eSet): a pool on them is one test's.
	sshHarness.parallel(t)
	h := sshPoolHosts(t)
	e := newEnv(t)
	h.writePool(t, e)
	// The hosts go back as they came: the harness runs its tests in any
	// order, and TestSSHNodePool expects `sky ssh up` to copy the binary
	// to each.
	t.Cleanup(func() {
		e.exec(cmdTimeout, nil, "down", "-a", "-y")
		if r := e.exec(cmdTimeout, nil, "ssh", "down"); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
	})
	e.must("volumes", "apply", "-y", "-n", "pooldata", "--type", "host-dir", "--infra", "ssh/"+e2ePool)
	// host 0 is taken, so the volume's first cluster gets host 1.
	e.launchOK(t, "-c", "blocker", "--infra", "ssh/"+e2ePool, "--", "echo blocking")
	writer := writeFile(t, "w.yaml", "resources:\n  infra: ssh/"+e2ePool+"\nvolumes:\n  ~/pd: pooldata\nrun: echo on-$(hostname) > ~/pd/f.txt\n")
	e.launchOK(t, "-c", "pw", writer)
	var recs []map[string]any
	e.mustJSON(&recs, "volumes", "ls", "-o", "json")
	if len(recs) != 1 || recs[0]["zone"] != h.IPs[1] || recs[0]["status"] != "IN_USE" {
		t.Fatalf("after the first mount: %v, want zone %s, IN_USE", recs, h.IPs[1])
	}
	e.must("down", "-y", "pw")
	e.must("down", "-y", "blocker")

	// Every host is free now; the volume's host is still the one chosen.
	reader := writeFile(t, "r.yaml", "volumes:\n  ~/pd: pooldata\nrun: cat ~/pd/f.txt\n")
	r := e.launchOK(t, "-c", "pr", reader)
	if !strings.Contains(r.stdout, "on-"+h.Names[1]) {
		t.Errorf("relaunch did not read host 1's data back:\n%s", r.out())
	}
	if out := h.onHost(t, 1, "readlink ~/pd"); !strings.Contains(out, ".sky/volumes/") {
		t.Errorf("~/pd on host 1: %q", out)
	}
	two := writeFile(t, "two.yaml", "num_nodes: 2\nvolumes:\n  ~/pd: pooldata\nrun: echo no\n")
	if r := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "p2", two); r.code == 0 || !strings.Contains(r.out(), "cannot mount it on every node") {
		t.Errorf("a 2-node task with a pool volume: %s", r)
	}
	e.must("down", "-y", "pr")
	if out := h.onHost(t, 1, "ls -a ~ | grep -c '^pd$' || true"); strings.TrimSpace(out) != "0" {
		t.Errorf("down left the mount link ~/pd on host 1")
	}
	e.must("volumes", "delete", "-y", "pooldata")
	if out := h.onHost(t, 1, "ls ~/.sky/volumes | wc -l"); strings.TrimSpace(out) != "0" {
		t.Errorf("delete left the data on host 1: %q", out)
	}
}
