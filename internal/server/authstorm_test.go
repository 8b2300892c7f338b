package server

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

// A burst of calls with the same password runs one bcrypt check, not one
// per call: on a 2-CPU server 200 clients of one user used to run over a
// hundred at once, each slowing the others, and every user's calls waited
// a minute (issue 26, item 8). A wrong password is checked once per burst
// too, and never cached.
func TestAuthBurstChecksOnce(t *testing.T) {
	s := newTestServer(t, Options{BasicAuth: true, InitialBasicAuth: "alice:alicepw"})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	burst := func(user, pass string) (codes map[int]int) {
		codes = map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", hs.URL+"/api/status", nil)
				req.SetBasicAuth(user, pass)
				req.Header.Set(api.HeaderAPIVersion, "1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return codes
	}
	if codes := burst("alice", "alicepw"); codes[http.StatusOK] != 20 {
		t.Fatalf("right password: answers %v, want 20 × 200", codes)
	}
	if n := s.auth.checks.Load(); n != 1 {
		t.Errorf("20 concurrent calls with one password ran %d checks, want 1", n)
	}
	if codes := burst("alice", "wrong"); codes[http.StatusUnauthorized] != 20 {
		t.Fatalf("wrong password: answers %v, want 20 × 401", codes)
	}
	// A failure is not cached: the next wrong call is checked again.
	before := s.auth.checks.Load()
	if _, err := s.checkBasic(t.Context(), base64Encode("alice:wrong")); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if s.auth.checks.Load() == before {
		t.Error("a wrong password was answered from the cache")
	}
}

func base64Encode(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
