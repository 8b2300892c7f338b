package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Roles a user can have.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// User is an account of the API server. PasswordHash is a bcrypt hash
// (empty for users that log in another way, e.g. service accounts); it
// never leaves the server.
type User struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	PasswordHash string  `json:"-"`
	Role         string  `json:"role"`
	CreatedAt    float64 `json:"created_at"`
}

// CreateUser inserts a user; ErrExists when the id or name is taken.
func (s *Store) CreateUser(ctx context.Context, u *User) error {
	if u.ID == "" || u.Name == "" {
		return errors.New("create user: id and name are required")
	}
	if u.Role == "" {
		u.Role = RoleUser
	}
	if u.CreatedAt == 0 {
		u.CreatedAt = nowSeconds()
	}
	_, err := s.exec(ctx, "create user", `INSERT INTO users (id, name, password_hash, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.Name, u.PasswordHash, u.Role, u.CreatedAt)
	if isUniqueViolation(err) {
		return fmt.Errorf("user %s: %w", u.Name, ErrExists)
	}
	return err
}

// UpdateUser rewrites a user's password hash and role.
func (s *Store) UpdateUser(ctx context.Context, u *User) error {
	res, err := s.exec(ctx, "update user", `UPDATE users SET password_hash = ?, role = ? WHERE id = ?`, u.PasswordHash, u.Role, u.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %s: %w", u.ID, ErrNotFound)
	}
	return nil
}

// GetUser finds a user by id.
func (s *Store) GetUser(ctx context.Context, id string) (*User, error) {
	return s.getUser(ctx, "id", id)
}

// GetUserByName finds a user by name.
func (s *Store) GetUserByName(ctx context.Context, name string) (*User, error) {
	return s.getUser(ctx, "name", name)
}

func (s *Store) getUser(ctx context.Context, col, v string) (*User, error) {
	var u User
	err := s.queryRow(ctx, "get user", `SELECT id, name, password_hash, role, created_at FROM users WHERE `+col+` = ?`, v).
		Scan(&u.ID, &u.Name, &u.PasswordHash, &u.Role, &u.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %s: %w", v, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get user %s: %w", v, err)
	}
	return &u, nil
}

// ListUsers returns every user, by name.
func (s *Store) ListUsers(ctx context.Context) ([]*User, error) {
	rows, err := s.query(ctx, "list users", `SELECT id, name, password_hash, role, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*User
	for rows.Next() {
		var u User
		if err := rows.Scan(&u.ID, &u.Name, &u.PasswordHash, &u.Role, &u.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, &u)
	}
	return out, rows.Err()
}

// DeleteUser removes a user and their service-account tokens.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	if _, err := s.exec(ctx, "delete user tokens", `DELETE FROM service_account_tokens WHERE user_id = ?`, id); err != nil {
		return err
	}
	res, err := s.exec(ctx, "delete user", `DELETE FROM users WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %s: %w", id, ErrNotFound)
	}
	return nil
}

// Token is a service-account token record. Only the SHA-256 of the token
// is stored; the token itself is shown once, when created.
type Token struct {
	ID            string   `json:"token_id"`
	Name          string   `json:"token_name"`
	Hash          string   `json:"-"`
	UserID        string   `json:"service_account_user_id"`
	CreatorUserID string   `json:"creator_user_id"`
	CreatedAt     float64  `json:"created_at"`
	LastUsedAt    *float64 `json:"last_used_at"`
	ExpiresAt     *float64 `json:"expires_at"`
}

const tokenCols = `token_id, token_name, token_hash, user_id, creator_user_id, created_at, last_used_at, expires_at`

func scanToken(sc interface{ Scan(...any) error }) (*Token, error) {
	var t Token
	var last, exp sql.NullFloat64
	if err := sc.Scan(&t.ID, &t.Name, &t.Hash, &t.UserID, &t.CreatorUserID, &t.CreatedAt, &last, &exp); err != nil {
		return nil, err
	}
	if last.Valid {
		t.LastUsedAt = &last.Float64
	}
	if exp.Valid {
		t.ExpiresAt = &exp.Float64
	}
	return &t, nil
}

// CreateToken stores a token record.
func (s *Store) CreateToken(ctx context.Context, t *Token) error {
	if t.ID == "" || t.Hash == "" || t.UserID == "" {
		return errors.New("create token: id, hash and user are required")
	}
	if t.CreatedAt == 0 {
		t.CreatedAt = nowSeconds()
	}
	_, err := s.exec(ctx, "create token", `INSERT INTO service_account_tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.Hash, t.UserID, t.CreatorUserID, t.CreatedAt, nullFloat(t.LastUsedAt), nullFloat(t.ExpiresAt))
	if isUniqueViolation(err) {
		return fmt.Errorf("token %s: %w", t.Name, ErrExists)
	}
	return err
}

// GetTokenByHash finds the token whose SHA-256 is hash.
func (s *Store) GetTokenByHash(ctx context.Context, hash string) (*Token, error) {
	t, err := scanToken(s.queryRow(ctx, "get token", `SELECT `+tokenCols+` FROM service_account_tokens WHERE token_hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// ListTokens lists tokens, all of them when creatorID is "".
func (s *Store) ListTokens(ctx context.Context, creatorID string) ([]*Token, error) {
	q := `SELECT ` + tokenCols + ` FROM service_account_tokens`
	var args []any
	if creatorID != "" {
		q += ` WHERE creator_user_id = ?`
		args = append(args, creatorID)
	}
	rows, err := s.query(ctx, "list tokens", q+` ORDER BY created_at`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TouchToken records that a token was just used.
func (s *Store) TouchToken(ctx context.Context, id string) error {
	_, err := s.exec(ctx, "touch token", `UPDATE service_account_tokens SET last_used_at = ? WHERE token_id = ?`, nowSeconds(), id)
	return err
}

// DeleteToken removes a token.
func (s *Store) DeleteToken(ctx context.Context, id string) error {
	res, err := s.exec(ctx, "delete token", `DELETE FROM service_account_tokens WHERE token_id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	return nil
}
