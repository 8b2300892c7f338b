package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

// TokenPrefix starts every service-account token.
const TokenPrefix = api.TokenPrefix

// UserHash is the id of a user known only by name: the first 8 hex digits
// of SHA-256 of the name, stable across machines and restarts.
func UserHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:4])
}

// LocalUser is the OS user running this process.
func LocalUser() api.User {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return api.User{ID: UserHash(name), Name: name, Role: state.RoleAdmin}
}

// HashToken is how tokens are stored: SHA-256, hex. Tokens are 256 random
// bits, so a fast hash is enough (unlike passwords).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authError is a 401 with SkyPilot's wording.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// authCache remembers recent successful credential checks. bcrypt takes
// tens of milliseconds by design; without the cache every call of a
// basic-auth client (and every health probe) would pay it and 200
// concurrent clients would queue behind the CPU. Entries expire quickly so
// a changed password or deleted token stops working within authCacheTTL.
//
// A cache alone still let a storm through: when an entry was missing or
// had just expired, every call of that user arriving before the first
// check finished ran a bcrypt of its own. With 200 clients of one user on
// 2 CPUs that was over a hundred comparisons at once (measured: 98% of the
// server's CPU in bcrypt), each slowing the others, so the calls kept
// missing the cache and `sky status` took a minute. So one check runs per
// credential at a time (the others wait for its answer), and at most
// hashSlots comparisons run at once, whatever the number of credentials.
type authCache struct {
	mu      sync.Mutex
	m       map[string]authEntry
	flights map[string]*authFlight
	// gen counts flushes: a check that began before a flush (a password
	// changed, a user deleted) must not put its answer back in the cache.
	gen     uint64
	hashing chan struct{}
	// checks counts the credential checks run (cache misses that did
	// the work), exported as skygo_api_credential_checks_total.
	checks atomic.Int64
}

type authEntry struct {
	user    api.User
	expires time.Time
}

// authFlight is a credential check under way, which callers presenting
// the same credentials wait for.
type authFlight struct {
	done chan struct{}
	user api.User
	err  error
}

const authCacheTTL = 30 * time.Second

func (c *authCache) putLocked(key string, u api.User) {
	if len(c.m) > 10000 || c.m == nil { // bound memory; a full reset is fine for a cache
		c.m = map[string]authEntry{}
	}
	c.m[key] = authEntry{user: u, expires: time.Now().Add(authCacheTTL)}
}

func (c *authCache) flush() {
	c.mu.Lock()
	c.m = map[string]authEntry{}
	c.gen++
	c.mu.Unlock()
}

// lookup answers from the cache, or runs check for key once for every
// caller that asks while it runs, and caches a success. check must not
// depend on any one caller's context: its answer is everyone's. A caller
// whose ctx ends stops waiting.
func (c *authCache) lookup(ctx context.Context, key string, check func() (api.User, error)) (api.User, error) {
	c.mu.Lock()
	if e, ok := c.m[key]; ok && time.Now().Before(e.expires) {
		c.mu.Unlock()
		return e.user, nil
	}
	if f, ok := c.flights[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.user, f.err
		case <-ctx.Done():
			return api.User{}, ctx.Err()
		}
	}
	if c.flights == nil {
		c.flights = map[string]*authFlight{}
	}
	f := &authFlight{done: make(chan struct{})}
	c.flights[key] = f
	gen := c.gen
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.flights, key)
		if f.err == nil && gen == c.gen {
			c.putLocked(key, f.user)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	c.checks.Add(1)
	f.user, f.err = check()
	return f.user, f.err
}

// hashSlots bounds the bcrypt comparisons running at once: one per CPU
// keeps logins going while leaving the server's other work a share of
// the machine even when many different credentials arrive together.
func hashSlots() int { return max(runtime.NumCPU(), 1) }

// compareHash is bcrypt.CompareHashAndPassword within the hashing bound.
func (c *authCache) compareHash(hash []byte, pass string) error {
	c.mu.Lock()
	if c.hashing == nil {
		c.hashing = make(chan struct{}, hashSlots())
	}
	slots := c.hashing
	c.mu.Unlock()
	slots <- struct{}{}
	defer func() { <-slots }()
	return bcrypt.CompareHashAndPassword(hash, []byte(pass))
}

// authEnabled reports whether callers must prove who they are. In SkyGo an
// auth mode, once on, applies to loopback callers too (SkyPilot lets
// loopback skip basic auth): a server that has users must not hand out
// admin rights to anything that can reach 127.0.0.1, and it keeps auth
// testable on one machine.
func (s *Server) authEnabled() bool { return s.opts.BasicAuth || s.opts.ServiceAccounts }

// authenticate works out who is calling, or returns an *authError.
func (s *Server) authenticate(r *http.Request) (api.User, error) {
	h := r.Header.Get("Authorization")
	if !s.authEnabled() {
		// No auth: the identity is what the client says (SkyPilot's model).
		if name := r.Header.Get(api.HeaderUserName); name != "" {
			id := r.Header.Get(api.HeaderUserID)
			if id == "" {
				id = UserHash(name)
			}
			return api.User{ID: id, Name: name, Role: state.RoleAdmin}, nil
		}
		return s.localUser, nil
	}
	scheme, cred, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") || r.Header.Get("X-Skypilot-Auth-Mode") == "token":
		if !s.opts.ServiceAccounts {
			return api.User{}, &authError{"Service account authentication disabled"}
		}
		return s.checkToken(r.Context(), strings.TrimSpace(cred))
	case strings.EqualFold(scheme, "Basic"):
		if !s.opts.BasicAuth {
			return api.User{}, &authError{"Basic authentication disabled; use a service account token"}
		}
		return s.checkBasic(r.Context(), strings.TrimSpace(cred))
	default:
		return api.User{}, &authError{"Authentication required"}
	}
}

func (s *Server) checkToken(ctx context.Context, token string) (api.User, error) {
	bad := &authError{"Invalid or expired service account token"}
	if !strings.HasPrefix(token, TokenPrefix) {
		return api.User{}, bad
	}
	hash := HashToken(token)
	return s.auth.lookup(ctx, "t:"+hash, func() (api.User, error) {
		ctx := context.WithoutCancel(ctx)
		t, err := s.store.GetTokenByHash(ctx, hash)
		if err != nil {
			if !errors.Is(err, state.ErrNotFound) {
				s.log.Error("token lookup", "err", err)
			}
			return api.User{}, bad
		}
		if t.ExpiresAt != nil && float64(time.Now().Unix()) > *t.ExpiresAt {
			return api.User{}, bad
		}
		su, err := s.store.GetUser(ctx, t.UserID)
		if err != nil {
			return api.User{}, bad
		}
		// Recording use is a write; the cache keeps it to once per TTL.
		_ = s.store.TouchToken(ctx, t.ID)
		return api.User{ID: su.ID, Name: su.Name, Role: su.Role}, nil
	})
}

func (s *Server) checkBasic(ctx context.Context, cred string) (api.User, error) {
	bad := &authError{"Invalid credentials"}
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return api.User{}, bad
	}
	name, pass, ok := strings.Cut(string(raw), ":")
	if !ok || name == "" {
		return api.User{}, bad
	}
	key := "b:" + HashToken(string(raw))
	return s.auth.lookup(ctx, key, func() (api.User, error) {
		su, err := s.store.GetUserByName(context.WithoutCancel(ctx), name)
		if err != nil || su.PasswordHash == "" {
			// Spend the same time as a real check so timing does not reveal
			// which user names exist.
			_ = s.auth.compareHash(s.dummyHash(), pass)
			return api.User{}, bad
		}
		if s.auth.compareHash([]byte(su.PasswordHash), pass) != nil {
			return api.User{}, bad
		}
		return api.User{ID: su.ID, Name: su.Name, Role: su.Role}, nil
	})
}

// ensureInitialAdmin creates the admin named by SKYPILOT_INITIAL_BASIC_AUTH
// ("user:password") if no user of that name exists yet.
func (s *Server) ensureInitialAdmin(ctx context.Context) error {
	spec := s.opts.InitialBasicAuth
	if spec == "" {
		return nil
	}
	name, pass, ok := strings.Cut(spec, ":")
	if !ok || name == "" || pass == "" {
		return errors.New("SKYPILOT_INITIAL_BASIC_AUTH must be USER:PASSWORD")
	}
	if _, err := s.store.GetUserByName(ctx, name); err == nil {
		return nil
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	err = s.store.CreateUser(ctx, &state.User{ID: UserHash(name), Name: name, PasswordHash: string(hash), Role: state.RoleAdmin})
	if err != nil && !errors.Is(err, state.ErrExists) {
		return fmt.Errorf("create initial admin %s: %w", name, err)
	}
	s.log.Info("created initial admin user", "user", name)
	return nil
}

// ensureAdminToken bootstraps a token-only server: with service accounts on
// and basic auth off, nobody could ever create the first token. So the
// first start writes an admin token to api_server/admin_token (0600) on the
// server's own disk; only someone with access to that file can use it.
func (s *Server) ensureAdminToken(ctx context.Context) error {
	if !s.opts.ServiceAccounts || s.opts.BasicAuth {
		return nil
	}
	ts, err := s.store.ListTokens(ctx, "")
	if err != nil {
		return err
	}
	if len(ts) > 0 {
		return nil
	}
	tok, _, err := s.createToken(ctx, api.User{ID: "server", Name: "server"}, "admin", state.RoleAdmin, 0)
	if err != nil {
		return err
	}
	path := s.paths.AdminToken
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	s.log.Info("created the first admin service-account token", "path", path)
	return nil
}

// createToken makes a service account (user "sa-...") and its token, and
// returns the token (shown once) and its record.
func (s *Server) createToken(ctx context.Context, creator api.User, name, role string, expiresDays int) (string, *state.Token, error) {
	if name == "" {
		return "", nil, errors.New("token_name is required")
	}
	if role == "" {
		var err error
		if role, err = s.defaultRole(); err != nil {
			return "", nil, err
		}
	}
	if role != state.RoleUser && role != state.RoleAdmin {
		return "", nil, fmt.Errorf("role %q: want %s or %s", role, state.RoleUser, state.RoleAdmin)
	}
	saID := "sa-" + randomHex(6)
	if err := s.store.CreateUser(ctx, &state.User{ID: saID, Name: name + "-" + saID, Role: role}); err != nil {
		return "", nil, err
	}
	tok := newToken()
	rec := &state.Token{ID: "tok-" + randomHex(6), Name: name, Hash: HashToken(tok), UserID: saID, CreatorUserID: creator.ID}
	if expiresDays > 0 {
		exp := float64(time.Now().Add(time.Duration(expiresDays) * 24 * time.Hour).Unix())
		rec.ExpiresAt = &exp
	}
	if err := s.store.CreateToken(ctx, rec); err != nil {
		return "", nil, err
	}
	return tok, rec, nil
}
