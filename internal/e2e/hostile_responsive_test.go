package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// credentialChecks reads skygo_api_credential_checks_total from the
// server's /metrics, as the admin.
func (tm *team) credentialChecks(t *testing.T) float64 {
	t.Helper()
	req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/metrics", tm.port), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "adminpw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics as admin: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "skygo_api_credential_checks_total "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("skygo_api_credential_checks_total %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("the server's /metrics has no skygo_api_credential_checks_total: it cannot say how many password checks it ran")
	return 0
}

// TestHostilePasswordStorm: bob opens 100 calls at once with his password
// (a script, or 100 terminals). Each call that missed the credential
// cache ran its own bcrypt, so the burst cost the server about a hundred
// CPU-heavy checks at once and every user's calls queued behind them
// (issue 26, item 8: `sky status` took a minute). A burst with one
// password must cost one check, or a few if the cache's 30 s run out
// meanwhile; never one per call.
func TestHostilePasswordStorm(t *testing.T) {
	// Sequential: a storm of concurrent clients by design; alone, neither it nor a neighbour's bounded waits absorb the other's load.
	tm := newTeam(t)
	before := tm.credentialChecks(t)
	bob := tm.clientAs("bob")
	const calls = 100
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Go(func() {
			var out []map[string]any
			if err := bob.Do(context.Background(), "GET", "/api/status", nil, &out); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("bob's call: %v", err)
	}
	ran := tm.credentialChecks(t) - before
	if ran > 3 {
		t.Errorf("%d concurrent calls with one password ran %.0f credential checks, want 1 (a few if the cache expired meanwhile)", calls, ran)
	}
	// alice is not kept waiting by bob's burst either: her call succeeds.
	tm.mustAs("alice", "status")
}
