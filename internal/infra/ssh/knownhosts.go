package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skygo/skygo/internal/paths"
)

// KnownHosts checks host keys the way `StrictHostKeyChecking=accept-new`
// does: a host never seen before is trusted and its key recorded; a host
// whose key differs from the recorded one is refused.
//
// New keys are appended to File, SkyGo's own ~/.sky/known_hosts, never to
// the user's ~/.ssh/known_hosts (we do not write into the user's ssh
// state). The user's file is listed in Extra and consulted read-only, so a
// key the user already trusts is honoured and a change against it is
// refused too. The system ssh used for rsync and the generated `ssh
// <cluster>` entries point UserKnownHostsFile at both files.
type KnownHosts struct {
	File  string
	Extra []string
	mu    sync.Mutex
}

// DefaultKnownHosts is ~/.sky/skygo/known_hosts, with ~/.ssh/known_hosts
// read too.
func DefaultKnownHosts(home string) *KnownHosts {
	return &KnownHosts{
		File:  paths.KnownHosts(home),
		Extra: []string{filepath.Join(home, ".ssh", "known_hosts")},
	}
}

// Files is every known_hosts file consulted, SkyGo's own first.
func (k *KnownHosts) Files() []string {
	return append([]string{k.File}, k.Extra...)
}

// HostKeyChangedError is a refusal: the host presented a key other than
// the recorded one. This is what a man-in-the-middle looks like, and also
// what a reinstalled machine looks like; only the user can tell.
type HostKeyChangedError struct {
	Host  string // address as dialled, host:port
	Known []knownhosts.KnownKey
}

func (e *HostKeyChangedError) Error() string {
	where := ""
	if len(e.Known) > 0 {
		where = fmt.Sprintf(" (recorded at %s:%d)", e.Known[0].Filename, e.Known[0].Line)
	}
	h, _, _ := net.SplitHostPort(e.Host)
	return fmt.Sprintf("host key of %s has changed%s; if the host was reinstalled, remove the old key with `ssh-keygen -R %s -f <that file>`, otherwise someone may be intercepting the connection", e.Host, where, h)
}

// existing returns the files that exist (knownhosts.New fails on a
// missing file).
func (k *KnownHosts) existing() []string {
	var out []string
	for _, f := range k.Files() {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

func (k *KnownHosts) lookup(address string, key gossh.PublicKey) error {
	files := k.existing()
	if len(files) == 0 {
		return &knownhosts.KeyError{}
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return fmt.Errorf("reading known_hosts: %w", err)
	}
	return cb(address, fakeAddr(address), key)
}

// probeKey is a throw-away key used to ask the database which keys it
// knows for a host: it never matches, so the KeyError lists them all.
var probeKey = sync.OnceValue(func() gossh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(nil)
	k, _ := gossh.NewPublicKey(pub)
	return k
})

// Algorithms returns the host key algorithms to offer for address: those
// of the keys recorded for it, so a host with a recorded RSA key is not
// refused merely for offering ed25519 first. nil means "any" (new host).
func (k *KnownHosts) Algorithms(address string) []string {
	var ke *knownhosts.KeyError
	if err := k.lookup(address, probeKey()); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, w := range ke.Want {
		t := w.Key.Type()
		names := []string{t}
		if t == gossh.KeyAlgoRSA {
			names = []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algos = append(algos, n)
			}
		}
	}
	return algos
}

// Callback is the HostKeyCallback for gossh.ClientConfig.
func (k *KnownHosts) Callback() gossh.HostKeyCallback {
	return func(address string, remote net.Addr, key gossh.PublicKey) error {
		err := k.lookup(address, key)
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ke) && len(ke.Want) > 0:
			return &HostKeyChangedError{Host: address, Known: ke.Want}
		case errors.As(err, &ke):
			return k.accept(address, key)
		default:
			return err
		}
	}
}

// accept records the key of a host seen for the first time. The file is
// locked and re-read, so two processes meeting the host at once agree.
func (k *KnownHosts) accept(address string, key gossh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(k.File), 0o700); err != nil {
		return fmt.Errorf("recording host key of %s: %w", address, err)
	}
	f, err := os.OpenFile(k.File, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("recording host key of %s: %w", address, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("recording host key of %s: %w", address, err)
	}
	// Someone may have recorded it (or another key) meanwhile.
	err = k.lookup(address, key)
	var ke *knownhosts.KeyError
	if err == nil {
		return nil
	}
	if errors.As(err, &ke) && len(ke.Want) > 0 {
		return &HostKeyChangedError{Host: address, Known: ke.Want}
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(address)}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("recording host key of %s in %s: %w", address, k.File, err)
	}
	return nil
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }
