package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return errf(http.StatusBadRequest, "request body: %v", err)
	}
	return nil
}

func (s *Server) requireAdmin(u api.User) error {
	if !s.isAdmin(u) {
		return errf(http.StatusForbidden, "Forbidden")
	}
	return nil
}

func (s *Server) handleListUsers(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	if err := s.requireAdmin(u); err != nil {
		return nil, err
	}
	us, err := s.store.ListUsers(r.Context())
	if err != nil {
		return nil, err
	}
	if us == nil {
		us = []*state.User{}
	}
	return us, nil
}

func (s *Server) handleCreateUser(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	if err := s.requireAdmin(u); err != nil {
		return nil, err
	}
	var b createUserBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if b.Username == "" || b.Password == "" {
		return nil, errf(http.StatusBadRequest, "username and password are required")
	}
	if b.Role == "" {
		role, err := s.defaultRole()
		if err != nil {
			return nil, err
		}
		b.Role = role
	}
	if b.Role != state.RoleUser && b.Role != state.RoleAdmin {
		return nil, errf(http.StatusBadRequest, "role %q: want %s or %s", b.Role, state.RoleUser, state.RoleAdmin)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(b.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "password: %v", err)
	}
	nu := &state.User{ID: UserHash(b.Username), Name: b.Username, PasswordHash: string(hash), Role: b.Role}
	if err := s.store.CreateUser(r.Context(), nu); err != nil {
		if errors.Is(err, state.ErrExists) {
			return nil, errf(http.StatusConflict, "user %s already exists", b.Username)
		}
		return nil, err
	}
	return nu, nil
}

func (s *Server) handleDeleteUser(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	if err := s.requireAdmin(u); err != nil {
		return nil, err
	}
	var b deleteUserBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if err := s.store.DeleteUser(r.Context(), b.UserID); err != nil {
		return nil, err
	}
	s.auth.flush()
	return map[string]string{"user_id": b.UserID}, nil
}

// tokenResponse is shown once, at creation: the only time the token
// itself leaves the server.
type tokenResponse struct {
	Secret string `json:"token"`
	*state.Token
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	if err := s.requireAdmin(u); err != nil {
		return nil, err
	}
	if !s.opts.ServiceAccounts {
		return nil, errf(http.StatusBadRequest, "service accounts are disabled on this server; start it with ENABLE_SERVICE_ACCOUNTS=true")
	}
	var b createTokenBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	tok, rec, err := s.createToken(r.Context(), u, b.TokenName, b.Role, b.ExpiresInDays)
	if err != nil {
		if errors.Is(err, state.ErrExists) {
			return nil, errf(http.StatusConflict, "%v", err)
		}
		return nil, errf(http.StatusBadRequest, "%v", err)
	}
	s.log.Info("service-account token created", "token_id", rec.ID, "name", rec.Name, "by", u.Name)
	return tokenResponse{Secret: tok, Token: rec}, nil
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	creator := u.ID
	if s.isAdmin(u) {
		creator = ""
	}
	ts, err := s.store.ListTokens(r.Context(), creator)
	if err != nil {
		return nil, err
	}
	if ts == nil {
		ts = []*state.Token{}
	}
	return ts, nil
}

func (s *Server) handleDeleteToken(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	if err := s.requireAdmin(u); err != nil {
		return nil, err
	}
	var b deleteTokenBody
	if err := decodeBody(r, &b); err != nil {
		return nil, err
	}
	if err := s.store.DeleteToken(r.Context(), b.TokenID); err != nil {
		return nil, err
	}
	s.auth.flush() // revoke now, not after the cache TTL
	return map[string]string{"token_id": b.TokenID}, nil
}

// createUserBody is the body of POST /users/create; role defaults to user.
type createUserBody struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Role     string `json:"role,omitempty"`
}

// deleteUserBody is the body of POST /users/delete.
type deleteUserBody struct {
	UserID string `json:"user_id"`
}

// createTokenBody is the body of POST /users/service-account-tokens.
type createTokenBody struct {
	TokenName     string `json:"token_name"`
	ExpiresInDays int    `json:"expires_in_days,omitempty"`
	Role          string `json:"role,omitempty"`
}

// deleteTokenBody is the body of POST /users/service-account-tokens/delete.
type deleteTokenBody struct {
	TokenID string `json:"token_id"`
}
