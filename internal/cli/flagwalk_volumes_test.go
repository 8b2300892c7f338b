package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// The flag probes of `sky volumes apply / ls / delete`, run in the flag
// walk's installation: each probe makes its own host-dir volumes on the
// local infrastructure and deletes them at its end. (Mounting them in a
// task is TestVolumesFollowTheCluster's.)

// volumeRecords is `sky volumes ls -o json`.
func (e *flagEnv) volumeRecords(t *testing.T) map[string]map[string]any {
	t.Helper()
	r := e.sky("volumes", "ls", "-o", "json")
	wantWorks(t, r)
	var recs []map[string]any
	if err := json.Unmarshal([]byte(r.out), &recs); err != nil {
		t.Fatalf("volumes ls -o json: %v: %s", err, r)
	}
	out := map[string]map[string]any{}
	for _, rec := range recs {
		out[rec["name"].(string)] = rec
	}
	return out
}

// applyVolume makes a local host-dir volume, deleted when the probe ends.
func (e *flagEnv) applyVolume(t *testing.T, name string, flags ...string) flagRun {
	t.Helper()
	t.Cleanup(func() { e.sky("volumes", "delete", "-y", "-p", name) })
	return e.sky(append([]string{"volumes", "apply", "-y", "-n", name, "--type", "host-dir", "--infra", "local"}, flags...)...)
}

func volumeFlagCases() []flagCase {
	var cs []flagCase
	add := func(key string, p func(*testing.T, *flagEnv)) { cs = append(cs, flagCase{key, p}) }
	k := func(cmd, f string) string { return "volumes " + cmd + " --" + f }

	// sky volumes apply
	add(k("apply", "name"), func(t *testing.T, e *flagEnv) {
		// -n wins over the YAML's name.
		y := filepath.Join(e.dir, "fwv-volume.yaml")
		if err := os.WriteFile(y, []byte("name: fwv-yaml\ntype: host-dir\ninfra: local\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.sky("volumes", "delete", "-y", "-p", "fwv-named", "fwv-yaml") })
		wantWorks(t, e.sky("volumes", "apply", "-y", "-n", "fwv-named", y), "Created volume fwv-named")
		recs := e.volumeRecords(t)
		if recs["fwv-named"] == nil || recs["fwv-yaml"] != nil {
			t.Fatalf("after apply -n fwv-named over a YAML naming fwv-yaml: %v", recs)
		}
		wantWorks(t, e.sky("volumes", "apply", "-y", "-n", "fwv-named", y), "Volume fwv-named already exists.")
	})
	add(k("apply", "type"), func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("volumes", "apply", "-y", "-n", "fwv-pvc", "--type", "k8s-pvc", "--size", "1Gi"), "fwv-pvc", "no kubeconfig found")
		wantRefused(t, e.sky("volumes", "apply", "-y", "-n", "fwv-bad", "--type", "nfs"), "type", "host-dir")
	})
	add(k("apply", "infra"), func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("volumes", "apply", "-y", "-n", "fwv-aws", "--type", "host-dir", "--infra", "aws"), "host-dir", "infra")
		wantRefused(t, e.sky("volumes", "apply", "-y", "-n", "fwv-ssh", "--type", "host-dir", "--infra", "ssh/nopool"), "nopool")
	})
	add(k("apply", "size"), func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.applyVolume(t, "fwv-size", "--size", "10Gi"), "host-dir", "size")
		wantRefused(t, e.applyVolume(t, "fwv-size", "--size", "many"), "size")
	})
	add(k("apply", "use-existing"), func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.applyVolume(t, "fwv-existing", "--use-existing"), "no existing volume directory")
		dir := filepath.Join(e.home, ".sky", "volumes", "fwv-existing")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wantWorks(t, e.applyVolume(t, "fwv-existing", "--use-existing"), "Created volume fwv-existing")
		if got := e.volumeRecords(t)["fwv-existing"]["name_on_cloud"]; got != "fwv-existing" {
			t.Errorf("name_on_cloud of a use_existing volume = %v", got)
		}
		// Deleting it forgets it and leaves the directory, never SkyGo's.
		wantWorks(t, e.sky("volumes", "delete", "-y", "fwv-existing"))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the existing directory went with the volume: %v", err)
		}
	})
	add(k("apply", "no-use-existing"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-new", "--no-use-existing"), "Created volume fwv-new")
		noc, _ := e.volumeRecords(t)["fwv-new"]["name_on_cloud"].(string)
		if !strings.HasPrefix(noc, "fwv-new-") {
			t.Fatalf("name_on_cloud %q", noc)
		}
		if _, err := os.Stat(filepath.Join(e.home, ".sky", "volumes", noc)); err != nil {
			t.Errorf("the volume's directory: %v", err)
		}
	})
	add(k("apply", "yes"), func(t *testing.T, e *flagEnv) {
		r := e.skyIn("n\n", "volumes", "apply", "-n", "fwv-yes", "--type", "host-dir")
		if r.code == 0 || e.volumeRecords(t)["fwv-yes"] != nil {
			t.Fatalf("answered no, yet: %s", r)
		}
		wantWorks(t, e.applyVolume(t, "fwv-yes"), "Created volume fwv-yes")
	})
	add(k("apply", "config"), configRefused("volumes", "apply", "-y", "-n", "fwv-cfg", "--type", "host-dir"))
	add(k("apply", "async"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-async", "--async"), "sky.volumes.apply")
		if !testutil.WaitFor(30*time.Second, 100*time.Millisecond, func() bool { return e.volumeRecords(t)["fwv-async"] != nil }) {
			t.Fatal("the async apply made no volume within 30s")
		}
	})
	add(k("apply", "no-async"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-sync", "--no-async"), "Created volume fwv-sync")
	})

	// sky volumes ls
	add(k("ls", "verbose"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-ls"))
		r := e.sky("volumes", "ls")
		wantWorks(t, r, "Host directory volumes:", "fwv-ls", "READY", "HOST_PATH")
		if strings.Contains(r.out, "NAME_ON_CLOUD") {
			t.Errorf("NAME_ON_CLOUD without -v: %s", r)
		}
		wantWorks(t, e.sky("volumes", "ls", "-v"), "NAME_ON_CLOUD", "MESSAGE")
	})
	add(k("ls", "refresh"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-gone"))
		noc, _ := e.volumeRecords(t)["fwv-gone"]["name_on_cloud"].(string)
		if err := os.RemoveAll(filepath.Join(e.home, ".sky", "volumes", noc)); err != nil || noc == "" {
			t.Fatal(err, noc)
		}
		if st := e.volumeRecords(t)["fwv-gone"]["status"]; st != "READY" {
			t.Errorf("cached status = %v, want READY until refreshed", st)
		}
		wantWorks(t, e.sky("volumes", "ls", "-r", "fwv-gone"), "NOT_READY", "directory gone")
	})
	add(k("ls", "output"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-json"))
		rec := e.volumeRecords(t)["fwv-json"]
		for _, key := range []string{"type", "launched_at", "cloud", "region", "zone", "size", "config", "name_on_cloud", "user_hash",
			"user_name", "workspace", "last_attached_at", "last_use", "status", "usedby_pods", "usedby_clusters", "is_ephemeral"} {
			if _, ok := rec[key]; !ok {
				t.Errorf("record lacks %s: %v", key, rec)
			}
		}
		wantRefused(t, e.sky("volumes", "ls", "-o", "yaml"), "yaml")
	})
	add(k("ls", "config"), configRefused("volumes", "ls"))

	// sky volumes delete
	add(k("delete", "yes"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-del"))
		if r := e.skyIn("n\n", "volumes", "delete", "fwv-del"); r.code == 0 || e.volumeRecords(t)["fwv-del"] == nil {
			t.Fatalf("answered no, yet: %s", r)
		}
		wantWorks(t, e.sky("volumes", "delete", "-y", "fwv-del"), "Volume fwv-del deleted.")
		wantRefused(t, e.sky("volumes", "delete", "-y", "fwv-del"), "Volume fwv-del not found.")
	})
	add(k("delete", "all"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-all1"))
		wantWorks(t, e.applyVolume(t, "fwv-all2"))
		wantRefused(t, e.sky("volumes", "delete", "-a", "-y", "fwv-all1"), "not both")
		wantWorks(t, e.sky("volumes", "delete", "-a", "-y"), "fwv-all1", "fwv-all2")
		if recs := e.volumeRecords(t); len(recs) != 0 {
			t.Errorf("after delete -a: %v", recs)
		}
	})
	add(k("delete", "purge"), func(t *testing.T, e *flagEnv) {
		// What --purge forgives (a volume in use) is the binary test's;
		// here it deletes an unused volume as usual.
		wantWorks(t, e.applyVolume(t, "fwv-purge"))
		wantWorks(t, e.sky("volumes", "delete", "-y", "-p", "fwv-purge"), "Volume fwv-purge deleted.")
	})
	add(k("delete", "config"), configRefused("volumes", "delete", "-y", "fwv-none"))
	add(k("delete", "async"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-dasync"))
		wantWorks(t, e.sky("volumes", "delete", "-y", "--async", "fwv-dasync"), "sky.volumes.delete")
		deadline := time.Now().Add(30 * time.Second)
		for e.volumeRecords(t)["fwv-dasync"] != nil {
			if time.Now().After(deadline) {
				t.Fatal("the async delete left the volume for 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	add(k("delete", "no-async"), func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.applyVolume(t, "fwv-dsync"))
		wantWorks(t, e.sky("volumes", "delete", "-y", "--no-async", "fwv-dsync"), "Volume fwv-dsync deleted.")
	})
	return cs
}
