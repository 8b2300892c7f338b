package k8stest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

const (
	// buildLockPath serialises builders: CI's background build, and test
	// processes under SKYGO_REQUIRE_K8S=1, take it with flock(2).
	buildLockPath = "/var/lock/skygo-k8s-build.lock"
	// buildState is the build's TESTINFRA_STATE: build-k8s.sh keeps its
	// throw-away source module under it, which must outlive the per-run
	// state directories so that a rebuild is incremental.
	buildState = "/var/lib/testinfra"
	buildLog   = "/var/tmp/skygo-k8s-build.log"
)

var (
	controlPlaneBins = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"}
	nodeBins         = []string{"kubelet", "kubectl"}
)

// lockWait bounds a wait for a machine-wide lock (the build, the real
// node), within the test binary's own deadline.
var lockWait = 30 * time.Minute

// binDir is where the shared binaries are.
func binDir() string {
	if d := os.Getenv("SKYGO_K8S_BIN"); d != "" {
		return d
	}
	return DefaultBinDir
}

// missingBins is what dir lacks of names. The stamp is written last, so a
// build still running (or killed) counts as missing.
func missingBins(dir string, names []string) []string {
	var miss []string
	for _, n := range append([]string{".stamp"}, names...) {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.Size() == 0 {
			miss = append(miss, n)
		}
	}
	return miss
}

// ensureBins makes sure dir holds names: when they are missing it returns
// a skip message, or, when required, builds them under the build lock.
func ensureBins(t testing.TB, dir string, names []string, required bool) (skip string, err error) {
	miss := missingBins(dir, names)
	if len(miss) == 0 {
		return "", nil
	}
	if !required {
		return fmt.Sprintf("k8stest: the Kubernetes binaries are not built (%s lacks %s): run `K8S_WITH_KUBELET=1 K8S_BIN=%s testinfra/build-k8s.sh` as root (about 10 min cold, see testinfra/README.md), or set SKYGO_REQUIRE_K8S=1 to build them here and fail instead of skipping",
			dir, strings.Join(miss, ", "), dir), nil
	}
	f, err := acquire(t, buildLockPath, "the build of the Kubernetes binaries (log "+buildLog+" when a test or CI builds them)")
	if err != nil {
		return "", err
	}
	defer release(f)
	// the holder we waited for may have built them
	if miss = missingBins(dir, names); len(miss) == 0 {
		return "", nil
	}
	t.Logf("k8stest: building the Kubernetes binaries into %s (%s missing; ~10 min cold, log %s)", dir, strings.Join(miss, ", "), buildLog)
	t0 := time.Now()
	if err := build(dir); err != nil {
		return "", err
	}
	if miss = missingBins(dir, names); len(miss) != 0 {
		return "", fmt.Errorf("k8stest: build-k8s.sh succeeded but %s still lacks %s (log %s)", dir, strings.Join(miss, ", "), buildLog)
	}
	t.Logf("k8stest: Kubernetes binaries built in %.0fs", time.Since(t0).Seconds())
	return "", nil
}

func build(dir string) error {
	logf, err := os.Create(buildLog)
	if err != nil {
		return err
	}
	defer logf.Close()
	c := exec.Command("bash", sshhosts.Script("build-k8s.sh"))
	c.Env = append(scriptEnv(buildState), "K8S_BIN="+dir, "K8S_WITH_KUBELET=1", "PATH="+goPath())
	c.Stdout, c.Stderr = logf, logf
	if err := c.Run(); err != nil {
		return fmt.Errorf("k8stest: testinfra/build-k8s.sh failed (%v); the end of %s:\n%s", err, buildLog, tail(buildLog, 30))
	}
	return nil
}

// goPath is PATH with a Go toolchain on it, which build-k8s.sh needs.
func goPath() string {
	p := os.Getenv("PATH")
	if _, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin:" + p
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitUntil is how long a lock may be waited for: lockWait, but no later
// than shortly before the test binary's deadline, so that a wait ends in a
// message rather than go test's panic.
func waitUntil(t testing.TB) time.Time {
	end := time.Now().Add(lockWait)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok && dl.Add(-time.Minute).Before(end) {
			end = dl.Add(-time.Minute)
		}
	}
	return end
}

// acquire takes the machine-wide flock at path, waiting while another live
// process holds it and saying so every 30 s. The kernel drops a flock when
// its process dies, so a killed run frees the lock by itself. The holder's
// pid is written into the file for the next waiter's message.
func acquire(t testing.TB, path, what string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := waitUntil(t)
	t0 := time.Now()
	var said time.Time
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("k8stest: locking %s: %v", path, err)
		}
		holder := strings.TrimSpace(readFile(path))
		if holder == "" {
			holder = "unknown (one that does not write it, as flock(1) does not)"
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("k8stest: gave up after %v waiting for %s: %s is held by pid %s", time.Since(t0).Round(time.Second), what, path, holder)
		}
		if time.Since(said) > 30*time.Second {
			t.Logf("k8stest: waiting for %s: %s is held by pid %s (another process)", what, path, holder)
			said = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	if waited := time.Since(t0); waited > time.Second {
		t.Logf("k8stest: got %s after waiting %.0fs", path, waited.Seconds())
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// release empties the lock file (its pid is no longer the holder) and
// closes it, which drops the flock.
func release(f *os.File) {
	f.Truncate(0)
	f.Close()
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
