package ssh

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skygo/skygo/internal/testutil/sshhosts"
)

// Integration tests run against real sshd hosts in network namespaces
// (internal/testutil/sshhosts; SKYGO_SKIP_SSH=1 skips them), with a name
// prefix and subnet of their own so other packages' hosts are not
// disturbed.
const (
	testHostName = "sgssh"
	numTestHosts = 3
)

var testSet = &sshhosts.Set{Name: testHostName, Prefix: "10.200.57", N: numTestHosts}

type testHosts struct{ *sshhosts.Hosts }

func TestMain(m *testing.M) {
	code := m.Run()
	testSet.Stop()
	os.Exit(code)
}

// sshHosts starts the hosts (once) and returns them.
func sshHosts(t testing.TB) *testHosts {
	t.Helper()
	return &testHosts{testSet.Get(t)}
}

// endpoint is host i (0-based) as root with the test key.
func (h *testHosts) endpoint(i int) Endpoint {
	return Endpoint{Name: h.IPs[i], Addr: h.IPs[i], Port: 22, User: h.User, IdentityFiles: []string{h.Key}}
}

// newTestDialer has a private known_hosts (accept-new from scratch).
func newTestDialer(t testing.TB) *Dialer {
	t.Helper()
	dir := t.TempDir()
	d := NewDialer(&KnownHosts{File: filepath.Join(dir, "known_hosts")})
	t.Cleanup(func() { d.Close() })
	return d
}
