package k8stest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	nodeScript   = "start-k8s-node.sh"
	nodeLockPath = "/var/lock/skygo-k8s-node.lock"
	// imageCache keeps the node's image tars across runs: the base image
	// takes 35-76 s of debootstrap, which every run's fresh state dir
	// would otherwise repeat. It is where start-k8s-node.sh keeps them
	// with the default state, so a machine builds them once.
	imageCache = "/var/lib/testinfra/k8s-node/images"
)

// imageFiles are start-k8s-node.sh's cached images, base.pkgs (the base
// image's package list, which it rebuilds on a change) after base.tar.
var imageFiles = []string{"pause.tar", "base.tar", "base.pkgs"}

func startNode(t testing.TB, c *Cluster, required bool) (string, error) {
	r := run
	if skip, err := ensureBins(t, r.bin, nodeBins, required); skip != "" || err != nil {
		return skip, err
	}
	f, err := acquire(t, nodeLockPath, fmt.Sprintf("the machine's real Kubernetes test node (one per machine: bridge %s, %s)", nodeBridge, NodeSubnet))
	if err != nil {
		return "", err
	}
	r.node = f
	cleanStale(t, true)
	if err := r.otherNode(); err != nil {
		return "", err
	}
	images := filepath.Join(r.dir, "k8s-node", "images")
	if err := seedImages(images); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(images, "base.tar")); err != nil {
		t.Logf("k8stest: building the node's base image %s with debootstrap (35-76 s, once per machine: cached in %s)", NodeImage, imageCache)
	}
	t0 := time.Now()
	err = r.runScript(nodeScript)
	// even after a failed start, images it built are worth keeping
	if serr := saveImages(images); serr != nil {
		t.Logf("k8stest: caching the node images: %v", serr)
	}
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("k8stest: the real node after %s: %v", nodeScript, err)
	}
	gpus := n.Status.Allocatable[GPUResource]
	if !nodeReady(n) || gpus.Value() != NodeGPUs {
		return "", fmt.Errorf("k8stest: node %s after %s: Ready %v, allocatable %s %s (want %d)", NodeName, nodeScript, nodeReady(n), GPUResource, gpus.String(), NodeGPUs)
	}
	c.NodeName, c.NodeIP, c.NodeImage = NodeName, NodeIP, NodeImage
	c.NodeSelector = map[string]string{nodeLabel: "true"}
	t.Logf("k8stest: real node %s Ready in %.1fs (kubelet %s:%d)", NodeName, time.Since(t0).Seconds(), NodeIP, r.ports.kubelet)
	return "", nil
}

// otherNode fails when a real node this package did not start (a
// start-k8s-node.sh run by hand, say) is up: it would share the bridge and
// subnet, and its IP leases are not ours.
func (r *runState) otherNode() error {
	var dirs []string
	for _, g := range []string{"/sys/fs/cgroup/pids/testinfra-k8s-node-*", "/sys/fs/cgroup/testinfra-k8s-node-*"} {
		d, _ := filepath.Glob(g)
		dirs = append(dirs, d...)
	}
	for _, d := range dirs {
		if filepath.Base(d) == r.cgroupName() {
			continue
		}
		var live []string
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == "cgroup.procs" {
				live = append(live, strings.Fields(readFile(path))...)
			}
			return nil
		})
		if len(live) > 0 {
			state := strings.TrimPrefix(filepath.Base(d), "testinfra-k8s-node-")
			return fmt.Errorf("k8stest: another real Kubernetes node runs on this machine (cgroup %s, pids %s), started by testinfra/start-k8s-node.sh with a TESTINFRA_STATE named %q; only one fits the machine: stop it with TESTINFRA_STATE=<that dir> testinfra/stop-k8s-node.sh",
				d, strings.Join(live, " "), state)
		}
	}
	return nil
}

// seedImages puts the cached image tars into a run's images dir, as hard
// links where the file systems allow (the script replaces a tar by
// renaming, so the cache is never written through the link).
func seedImages(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range imageFiles {
		src := filepath.Join(imageCache, f)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := os.Link(src, filepath.Join(dst, f)); err != nil {
			if err := copyFile(src, filepath.Join(dst, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// saveImages copies into the cache what the run built: a tar the cache
// lacks, or the base image rebuilt for another package list.
func saveImages(src string) error {
	if err := os.MkdirAll(imageCache, 0o755); err != nil {
		return err
	}
	rebuilt := readFile(filepath.Join(src, "base.pkgs")) != readFile(filepath.Join(imageCache, "base.pkgs"))
	for _, f := range imageFiles {
		from, to := filepath.Join(src, f), filepath.Join(imageCache, f)
		if _, err := os.Stat(from); err != nil {
			continue
		}
		if _, err := os.Stat(to); err == nil && (f == "pause.tar" || !rebuilt) {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes to a temporary name and renames, so that a reader never
// sees half a tar.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := fmt.Sprintf("%s.tmp%d", to, os.Getpid())
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, to)
}
