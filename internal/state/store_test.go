package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// dialects runs fn once per database: SQLite always, PostgreSQL from the
// server TestMain started.
func dialects(t *testing.T, fn func(t *testing.T, open func() *Store)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		fn(t, func() *Store { return mustOpen(t, "", path) })
	})
	t.Run("postgres", func(t *testing.T) {
		uri := newPGDatabase(t)
		fn(t, func() *Store { return mustOpen(t, uri, "") })
	})
}

func mustOpen(t *testing.T, uri, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), uri, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrations(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		// Several processes may open a fresh database at once; each must
		// end up with the same, complete schema and no duplicate steps.
		var wg sync.WaitGroup
		stores := make([]*Store, 4)
		for i := range stores {
			wg.Add(1)
			go func() { defer wg.Done(); stores[i] = open() }()
		}
		wg.Wait()
		got, err := stores[0].AppliedVersions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for _, m := range migrations {
			want = append(want, m.version)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("applied versions = %v, want %v", got, want)
		}
		if SchemaVersion() != want[len(want)-1] {
			t.Fatalf("SchemaVersion() = %d", SchemaVersion())
		}
	})
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "mysql://x", ""); err == nil {
		t.Fatal("mysql URI accepted")
	}
	_, err := Open(ctx, "postgresql://u:secretpw@127.0.0.1:1/db?connect_timeout=2", "")
	if err == nil {
		t.Fatal("connecting to a closed port succeeded")
	}
	if msg := err.Error(); !contains(msg, EnvDBURI) || contains(msg, "secretpw") {
		t.Fatalf("error should name %s and hide the password: %v", EnvDBURI, err)
	}
	t.Setenv(EnvDBURI, "postgresql://from-env")
	if got := ResolveURI("postgresql://from-config"); got != "postgresql://from-env" {
		t.Fatalf("env must win over config, got %q", got)
	}
	t.Setenv(EnvDBURI, "")
	if got := ResolveURI(" postgresql://from-config "); got != "postgresql://from-config" {
		t.Fatalf("ResolveURI = %q", got)
	}
}

func TestSQLiteFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	mustOpen(t, "", path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("state.db mode = %v, want 0600", st.Mode().Perm())
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRequests(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		base := 1000.0
		reqs := []*api.Request{
			{RequestID: "aaaa1111", Name: "sky.launch", UserID: "u1", UserName: "alice", ClusterName: "c1", ScheduleType: "long", CreatedAt: base + 1},
			{RequestID: "aaaa2222", Name: "sky.status", UserID: "u1", UserName: "alice", CreatedAt: base + 2},
			{RequestID: "bbbb3333", Name: "sky.exec", UserID: "u2", UserName: "bob", ClusterName: "c1", CreatedAt: base + 3},
		}
		for _, r := range reqs {
			if err := s.CreateRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateRequest(ctx, &api.Request{RequestID: "aaaa1111", Name: "x"}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate id: err = %v, want ErrExists", err)
		}

		for _, tc := range []struct {
			q       string
			want    string
			wantErr error
		}{
			{"aaaa1111", "aaaa1111", nil},
			{"bbbb", "bbbb3333", nil},
			{"aaaa2", "aaaa2222", nil},
			{"aaaa", "", ErrAmbiguous},
			{"cccc", "", ErrNotFound},
			{"", "", ErrNotFound},
			{"%", "", ErrNotFound}, // not a wildcard
		} {
			r, err := s.GetRequest(ctx, tc.q)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("GetRequest(%q) err = %v, want %v", tc.q, err, tc.wantErr)
				}
				continue
			}
			if err != nil || r.RequestID != tc.want {
				t.Errorf("GetRequest(%q) = %v, %v; want %s", tc.q, r, err, tc.want)
			}
		}
		r, _ := s.GetRequest(ctx, "aaaa1111")
		if r.Status != api.RequestPending || r.UserName != "alice" || r.ClusterName != "c1" || r.ScheduleType != "long" || r.FinishedAt != nil || r.PID != nil {
			t.Fatalf("round trip lost fields: %+v", r)
		}

		ok, err := s.SetRequestStatus(ctx, "aaaa1111", []api.RequestStatus{api.RequestPending}, api.RequestRunning, RequestUpdate{PID: ptr(42)})
		if !ok || err != nil {
			t.Fatalf("PENDING->RUNNING: %v %v", ok, err)
		}
		ok, _ = s.SetRequestStatus(ctx, "aaaa1111", []api.RequestStatus{api.RequestPending}, api.RequestRunning, RequestUpdate{})
		if ok {
			t.Fatal("CAS from PENDING succeeded on a RUNNING request")
		}
		rv, errJSON := `{"job_id": 1}`, ""
		ok, _ = s.SetRequestStatus(ctx, "aaaa1111", []api.RequestStatus{api.RequestRunning}, api.RequestSucceeded, RequestUpdate{ReturnValue: &rv, Error: &errJSON})
		if !ok {
			t.Fatal("RUNNING->SUCCEEDED did not move")
		}
		r, _ = s.GetRequest(ctx, "aaaa1111")
		if r.Status != api.RequestSucceeded || r.ReturnValue != rv || r.PID == nil || *r.PID != 42 || r.StartedAt == nil || r.FinishedAt == nil {
			t.Fatalf("after success: %+v", r)
		}

		names := func(rs []*api.Request) string {
			var out []string
			for _, r := range rs {
				out = append(out, r.RequestID)
			}
			return fmt.Sprint(out)
		}
		for _, tc := range []struct {
			name string
			f    RequestFilter
			want string
		}{
			{"active only by default", RequestFilter{}, "[bbbb3333 aaaa2222]"},
			{"all statuses newest first", RequestFilter{AllStatuses: true}, "[bbbb3333 aaaa2222 aaaa1111]"},
			{"by user", RequestFilter{AllStatuses: true, UserID: "u1"}, "[aaaa2222 aaaa1111]"},
			{"by cluster", RequestFilter{AllStatuses: true, ClusterName: "c1"}, "[bbbb3333 aaaa1111]"},
			{"by status", RequestFilter{Statuses: []api.RequestStatus{api.RequestSucceeded}}, "[aaaa1111]"},
			{"limit", RequestFilter{AllStatuses: true, Limit: 1}, "[bbbb3333]"},
			{"prefixes", RequestFilter{AllStatuses: true, IDPrefixes: []string{"bb", "aaaa1"}}, "[bbbb3333 aaaa1111]"},
			{"by name", RequestFilter{AllStatuses: true, Name: "sky.status"}, "[aaaa2222]"},
		} {
			rs, err := s.ListRequests(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(rs); got != tc.want {
				t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
			}
		}

		// Exactly one of many concurrent writers wins a transition.
		s.SetRequestStatus(ctx, "aaaa2222", []api.RequestStatus{api.RequestPending}, api.RequestRunning, RequestUpdate{})
		var wins sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := 0; i < 8; i++ {
			wins.Add(1)
			go func(i int) {
				defer wins.Done()
				to := api.RequestSucceeded
				if i%2 == 0 {
					to = api.RequestCancelled
				}
				ok, err := s.SetRequestStatus(ctx, "aaaa2222", ActiveRequestStatuses, to, RequestUpdate{})
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}(i)
		}
		wins.Wait()
		if won != 1 {
			t.Fatalf("%d concurrent transitions won, want exactly 1", won)
		}

		// Another server sharing the database runs its own requests: a
		// restart of this one leaves them alone.
		other := &api.Request{RequestID: "cccc4444", Name: "sky.launch", Status: api.RequestRunning, ServerID: "host-b:46580"}
		if err := s.CreateRequest(ctx, other); err != nil {
			t.Fatal(err)
		}
		ids, err := s.FailActiveRequests(ctx, "host-a:46580", `{"type":"ServerRestarted"}`)
		if err != nil || fmt.Sprint(ids) != "[bbbb3333]" {
			t.Fatalf("FailActiveRequests = %v, %v", ids, err)
		}
		if r, _ := s.GetRequest(ctx, "cccc4444"); r.Status != api.RequestRunning || r.ServerID != "host-b:46580" {
			t.Fatalf("another server's request after this one restarted: %+v", r)
		}
		r, _ = s.GetRequest(ctx, "bbbb3333")
		if r.Status != api.RequestFailed || r.Error != `{"type":"ServerRestarted"}` {
			t.Fatalf("abandoned request: %+v", r)
		}

		deleted, err := s.DeleteFinishedRequestsBefore(ctx, nowSeconds()+10)
		if err != nil || len(deleted) != 3 {
			t.Fatalf("retention deleted %v, %v", deleted, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestUsersAndTokens(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		if err := s.CreateUser(ctx, &User{ID: "u1", Name: "alice", PasswordHash: "h1", Role: RoleAdmin}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateUser(ctx, &User{ID: "u2", Name: "alice"}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate name: %v", err)
		}
		if err := s.CreateUser(ctx, &User{ID: "u2", Name: "bob"}); err != nil {
			t.Fatal(err)
		}
		u, err := s.GetUserByName(ctx, "bob")
		if err != nil || u.ID != "u2" || u.Role != RoleUser {
			t.Fatalf("bob = %+v, %v", u, err)
		}
		u.Role, u.PasswordHash = RoleAdmin, "h2"
		if err := s.UpdateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		if u, _ = s.GetUser(ctx, "u2"); u.Role != RoleAdmin || u.PasswordHash != "h2" {
			t.Fatalf("update lost: %+v", u)
		}
		if _, err := s.GetUser(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing user: %v", err)
		}
		all, _ := s.ListUsers(ctx)
		if len(all) != 2 || all[0].Name != "alice" {
			t.Fatalf("ListUsers = %v", all)
		}

		tok := &Token{ID: "t1", Name: "ci", Hash: "abc", UserID: "sa-1", CreatorUserID: "u1"}
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateToken(ctx, &Token{ID: "t2", Name: "dup", Hash: "abc", UserID: "sa-2"}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate hash: %v", err)
		}
		got, err := s.GetTokenByHash(ctx, "abc")
		if err != nil || got.ID != "t1" || got.LastUsedAt != nil {
			t.Fatalf("token = %+v, %v", got, err)
		}
		if err := s.TouchToken(ctx, "t1"); err != nil {
			t.Fatal(err)
		}
		if got, _ = s.GetTokenByHash(ctx, "abc"); got.LastUsedAt == nil {
			t.Fatal("TouchToken did not record use")
		}
		if ts, _ := s.ListTokens(ctx, "u1"); len(ts) != 1 {
			t.Fatalf("ListTokens(u1) = %v", ts)
		}
		if ts, _ := s.ListTokens(ctx, "u2"); len(ts) != 0 {
			t.Fatalf("ListTokens(u2) = %v", ts)
		}
		if err := s.CreateUser(ctx, &User{ID: "sa-1", Name: "ci"}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, "sa-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetTokenByHash(ctx, "abc"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("token of a deleted user survives: %v", err)
		}
	})
}

func TestClusters(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		c := &Cluster{Name: "dev", ClusterHash: "h1", UserHash: "u1", UserName: "alice", Status: ClusterInit,
			Handle: json.RawMessage(`{"ip":"10.0.0.1"}`), Resources: json.RawMessage(`{"cpus":"4"}`), NumNodes: 2, LaunchedAt: 100, Autostop: -1}
		if err := s.CreateCluster(ctx, c, "launch"); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateCluster(ctx, &Cluster{Name: "dev", Status: ClusterInit}, "again"); !errors.Is(err, ErrExists) {
			t.Fatalf("second create of dev: %v, want ErrExists", err)
		}
		if err := s.CreateCluster(ctx, &Cluster{Name: "other", UserHash: "u2", Status: ClusterStopped}, ""); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetCluster(ctx, "dev")
		if err != nil || got.NumNodes != 2 || string(got.Handle) != `{"ip":"10.0.0.1"}` || got.Workspace != "default" || got.ClusterEverUp || got.Version != 1 {
			t.Fatalf("dev = %+v, %v", got, err)
		}

		// A mutation decides over the current row: moves only from the
		// statuses it accepts, and ErrNoChange writes nothing.
		move := func(from []ClusterStatus, to ClusterStatus) Mutation {
			return func(c *Cluster) (string, error) {
				for _, f := range from {
					if c.Status == f {
						c.Status = to
						return "to " + string(to), nil
					}
				}
				return "", ErrNoChange
			}
		}
		for _, tc := range []struct {
			from []ClusterStatus
			to   ClusterStatus
			want ClusterStatus
		}{
			{[]ClusterStatus{ClusterStopped}, ClusterUp, ClusterInit},
			{[]ClusterStatus{ClusterInit}, ClusterUp, ClusterUp},
			{[]ClusterStatus{ClusterInit}, ClusterStopped, ClusterUp},
			{[]ClusterStatus{ClusterUp, ClusterInit}, ClusterStopped, ClusterStopped},
		} {
			c, err := s.UpdateCluster(ctx, "dev", move(tc.from, tc.to))
			if err != nil || c.Status != tc.want {
				t.Errorf("UpdateCluster(%v -> %s) = %v, %v; want %s", tc.from, tc.to, c, err, tc.want)
			}
		}
		got, _ = s.GetCluster(ctx, "dev")
		if got.Status != ClusterStopped || !got.ClusterEverUp || got.Version != 3 {
			t.Fatalf("after transitions: status %s ever_up %v version %d", got.Status, got.ClusterEverUp, got.Version)
		}
		if _, err := s.UpdateCluster(ctx, "dev", func(c *Cluster) (string, error) {
			c.Autostop, c.ToDown = 10, true
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
		if got, _ = s.GetCluster(ctx, "dev"); got.Autostop != 10 || !got.ToDown || got.Status != ClusterStopped {
			t.Fatalf("update did not apply: %+v", got)
		}
		if _, err := s.UpdateCluster(ctx, "nope", move(nil, ClusterUp)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update of a missing cluster: %v", err)
		}
		evs, _ := s.ListClusterEvents(ctx, "dev", 0)
		var moves []string
		for _, e := range evs {
			moves = append(moves, e.FromStatus+">"+e.ToStatus)
		}
		if fmt.Sprint(moves) != "[>INIT INIT>UP UP>STOPPED]" {
			t.Fatalf("events = %v, want each transition once", moves)
		}
		for _, tc := range []struct {
			f    ClusterFilter
			want int
		}{
			{ClusterFilter{}, 2},
			{ClusterFilter{UserHash: "u2"}, 1},
			{ClusterFilter{Names: []string{"dev", "nope"}}, 1},
			{ClusterFilter{Statuses: []ClusterStatus{ClusterUp}}, 0},
			{ClusterFilter{Statuses: []ClusterStatus{ClusterStopped}}, 2},
		} {
			cs, err := s.ListClusters(ctx, tc.f)
			if err != nil || len(cs) != tc.want {
				t.Errorf("ListClusters(%+v) = %d, %v; want %d", tc.f, len(cs), err, tc.want)
			}
		}

		for i, reason := range []string{"launched", "up", "stopped"} {
			if err := s.AddClusterEvent(ctx, &ClusterEvent{ClusterName: "dev", Reason: reason, TransitionedAt: float64(time.Now().Unix() + 10 + int64(i))}); err != nil {
				t.Fatal(err)
			}
		}
		evs, _ = s.ListClusterEvents(ctx, "dev", 2)
		if len(evs) != 2 || evs[0].Reason != "up" || evs[1].Reason != "stopped" {
			t.Fatalf("last two events = %+v", evs)
		}

		if _, err := s.RemoveCluster(ctx, "dev", "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetCluster(ctx, "dev"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted cluster: %v", err)
		}
		if evs, _ := s.ListClusterEvents(ctx, "dev", 0); len(evs) != 7 {
			t.Fatalf("events must outlive the cluster, got %d", len(evs))
		}
	})
}

// TestClusterUpdatesRace: writers on two handles of one database (two
// server processes) lose no update, and each status transition is recorded
// exactly once.
func TestClusterUpdatesRace(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		a, b := open(), open()
		if err := a.CreateCluster(ctx, &Cluster{Name: "hot", ClusterHash: "hh", Status: ClusterUp, Autostop: 0}, "up"); err != nil {
			t.Fatal(err)
		}
		if err := a.AddHistory(ctx, &History{ClusterHash: "hh", Name: "hot", LaunchedAt: 1, UsageIntervals: []Interval{{Start: 1}}}); err != nil {
			t.Fatal(err)
		}
		const writers, rounds = 8, 25
		var wg sync.WaitGroup
		var mu sync.Mutex
		flips := 0
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := a
				if w%2 == 1 {
					s = b
				}
				for i := range rounds {
					moved := false
					_, err := s.UpdateCluster(ctx, "hot", func(c *Cluster) (string, error) {
						moved = false
						c.Autostop++
						// Odd writers stop an UP cluster, even ones start a
						// STOPPED one: a decision over the row they see.
						switch {
						case w%2 == 1 && c.Status == ClusterUp:
							c.Status, moved = ClusterStopped, true
						case w%2 == 0 && c.Status == ClusterStopped:
							c.Status, moved = ClusterUp, true
						}
						return "", nil
					})
					if err != nil {
						t.Errorf("writer %d round %d: %v", w, i, err)
						return
					}
					if moved {
						mu.Lock()
						flips++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		got, err := a.GetCluster(ctx, "hot")
		if err != nil || got.Autostop != writers*rounds || got.Version != 1+writers*rounds {
			t.Fatalf("after %d updates: %+v, %v (lost updates)", writers*rounds, got, err)
		}
		evs, _ := a.ListClusterEvents(ctx, "hot", 0)
		if len(evs)-1 != flips {
			t.Fatalf("%d status flips but %d transition events", flips, len(evs)-1)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].FromStatus != evs[i-1].ToStatus || evs[i].FromStatus == evs[i].ToStatus {
				t.Fatalf("event %d %s>%s does not follow %s>%s", i, evs[i].FromStatus, evs[i].ToStatus, evs[i-1].FromStatus, evs[i-1].ToStatus)
			}
		}
		// Usage intervals follow the flips: one open per UP period.
		hs, _ := a.ListHistory(ctx, 0)
		ups := 1 + flips/2
		if len(hs) != 1 || len(hs[0].UsageIntervals) != ups {
			t.Fatalf("usage intervals = %v, want %d (one per UP period)", hs[0].UsageIntervals, ups)
		}
	})
}

func TestDocumentsRace(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		a, b := open(), open()
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := []*Store{a, b}[w%2]
				for range 20 {
					err := s.UpdateDocument(ctx, "counter", func(cur []byte) ([]byte, bool, error) {
						n := 0
						if cur != nil {
							fmt.Sscan(string(cur), &n)
						}
						return []byte(fmt.Sprint(n + 1)), true, nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		var got []byte
		_ = a.UpdateDocument(ctx, "counter", func(cur []byte) ([]byte, bool, error) { got = cur; return nil, false, nil })
		if string(got) != "120" {
			t.Fatalf("counter = %q after 120 increments", got)
		}
	})
}

func TestHistoryAndSettings(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		end := int64(1000 + 3600)
		h := &History{ClusterHash: "h1", Name: "dev", NumNodes: 2, PricePerHour: 1.5, LaunchedAt: 1000,
			UsageIntervals: []Interval{{Start: 1000, End: &end}}, Resources: json.RawMessage(`{"cpus":"4"}`)}
		if err := s.AddHistory(ctx, h); err != nil {
			t.Fatal(err)
		}
		now := time.Now().Unix()
		if err := s.AddHistory(ctx, &History{ClusterHash: "h2", Name: "old", LaunchedAt: 5, UsageIntervals: []Interval{{Start: 5, End: ptr(int64(6))}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddHistory(ctx, &History{ClusterHash: "h3", Name: "live", LaunchedAt: now - 60, UsageIntervals: []Interval{{Start: now - 60}}}); err != nil {
			t.Fatal(err)
		}
		hs, err := s.ListHistory(ctx, 0)
		if err != nil || len(hs) != 3 || hs[0].Name != "live" {
			t.Fatalf("ListHistory(0) = %v, %v", hs, err)
		}
		hs, _ = s.ListHistory(ctx, 500)
		if len(hs) != 2 {
			t.Fatalf("ListHistory(500) = %d rows, want 2 (old one filtered)", len(hs))
		}
		dev := hs[1]
		if dev.Duration(time.Now()) != 3600 || dev.TotalCost(time.Now()) != 3.0 || string(dev.Resources) != `{"cpus":"4"}` {
			t.Fatalf("dev history: duration %d cost %v", dev.Duration(time.Now()), dev.TotalCost(time.Now()))
		}
		if d := hs[0].Duration(time.Unix(now, 0)); d != 60 {
			t.Fatalf("open interval duration = %d, want 60", d)
		}
		b, _ := json.Marshal(hs[0].UsageIntervals)
		if string(b) != fmt.Sprintf("[[%d,null]]", now-60) {
			t.Fatalf("usage_intervals JSON = %s", b)
		}

		if _, err := s.GetSetting(ctx, "enabled_clouds"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unset setting: %v", err)
		}
		for _, v := range []string{`["aws"]`, `["aws","kubernetes"]`} {
			if err := s.SetSetting(ctx, "enabled_clouds", v); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.GetSetting(ctx, "enabled_clouds"); got != v {
				t.Fatalf("setting = %q, want %q", got, v)
			}
		}
		if err := s.DeleteSetting(ctx, "enabled_clouds"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSetting(ctx, "enabled_clouds"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted setting: %v", err)
		}
	})
}
