package e2e

import (
	"sync"
	"testing"
)

// e2eSlots bounds the tests that run at once (TestMain sizes it): a test
// takes a slot only once it may run, so one waiting for its harness does
// not keep another test from running.
var e2eSlots chan struct{}

// maxHarnessWaiters is more than the tests that can wait for a harness at
// one time (the tests of all harnesses together).
const maxHarnessWaiters = 64

// parallel runs the test beside the other parallel tests, within the
// e2eSlots bound. A test whose subtests call parallel calls t.Parallel
// itself instead: it would hold its slot while its subtests wait for one.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	e2eSlots <- struct{}{}
	t.Cleanup(func() { <-e2eSlots })
}

// harness is something of the machine that serves one test at a time (a
// set of sshd hosts whose pool a test owns whole, the Slurm cluster whose
// queue a test reads whole, the Kubernetes node, the EC2 emulation's
// hosts): its tests run beside the other tests, one after another.
type harness struct{ mu sync.Mutex }

var (
	sshHarness   harness // e2eSet's sshd hosts
	slurmHarness harness // slurmtest
	k8sHarness   harness // k8stest
	ec2Harness   harness // ec2hosts
)

// parallel runs the test beside the other tests once no other test of the
// harness runs.
func (h *harness) parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	h.mu.Lock()
	e2eSlots <- struct{}{}
	t.Cleanup(func() {
		<-e2eSlots
		h.mu.Unlock()
	})
}
