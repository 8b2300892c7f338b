package provision

import "fmt"

// The failover loop branches on these types with errors.As:
// CapacityError means "try another candidate"; AuthError and ConfigError
// mean "stop, the user must fix something"; NotSupportedError means "this
// infrastructure cannot do that at all". Each keeps the underlying cause
// for errors.Unwrap.

// CapacityError says the infrastructure has no room for the request here
// (no capacity, quota exceeded, stockout). Another region, zone or
// infrastructure may succeed.
type CapacityError struct {
	// Where names the place that was tried: "local", "aws/us-east-1a", ...
	Where string
	Msg   string
	Err   error
}

func (e *CapacityError) Error() string { return format("no capacity", e.Where, e.Msg, e.Err) }
func (e *CapacityError) Unwrap() error { return e.Err }

// AuthError says credentials are missing, invalid or lack a permission.
type AuthError struct {
	Where string
	Msg   string
	Err   error
}

func (e *AuthError) Error() string { return format("authentication failed", e.Where, e.Msg, e.Err) }
func (e *AuthError) Unwrap() error { return e.Err }

// ConfigError says the request or the local setup is wrong in a way that
// retrying elsewhere will not fix (bad spec, conflicting existing cluster).
type ConfigError struct {
	Where string
	Msg   string
	Err   error
}

func (e *ConfigError) Error() string { return format("invalid configuration", e.Where, e.Msg, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// NotSupportedError says the infrastructure cannot do the operation.
type NotSupportedError struct {
	Where     string
	Operation string
	Msg       string
}

func (e *NotSupportedError) Error() string {
	return format(e.Operation+" is not supported", e.Where, e.Msg, nil)
}

func format(kind, where, msg string, err error) string {
	s := kind
	if where != "" {
		s += " on " + where
	}
	if msg != "" {
		s += ": " + msg
	}
	if err != nil {
		s = fmt.Sprintf("%s: %v", s, err)
	}
	return s
}
