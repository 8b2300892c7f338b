package api

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Where a local API server listens and the headers both sides send
// (SkyPilot's names).
const (
	DefaultPort = 46580
	// EnvPort moves the local server (and where clients look for it).
	EnvPort = "SKYPILOT_API_SERVER_LOCAL_PORT"
	// Version headers, sent both ways.
	HeaderAPIVersion = "X-SkyPilot-API-Version"
	HeaderVersion    = "X-SkyPilot-Version"
	// HeaderRequestID carries the id of a submitted request.
	HeaderRequestID = "X-Skypilot-Request-ID"
	// HeaderStreamRequestID names the request a stream belongs to.
	HeaderStreamRequestID = "X-SkyPilot-Stream-Request-ID"
	// HeaderUserName and HeaderUserID say who the client is. A server
	// trusts them only without authentication, when it only listens on
	// loopback.
	HeaderUserName = "X-SkyPilot-User-Name"
	HeaderUserID   = "X-SkyPilot-User-ID"
	// HeaderStreamError is the trailer of a streamed op's answer (POST
	// <op path>/stream) that ended early: what went wrong. A body that
	// ends without it, and without a broken connection, is complete.
	HeaderStreamError = "X-SkyGo-Stream-Error"
)

// EnvCatalogDir names a local catalog directory (<dir>/<cloud>/vms.csv)
// used instead of the downloaded or built-in one.
const EnvCatalogDir = "SKYPILOT_CATALOG_DIR"

// requestEnv are the client environment variables a request carries to the
// server, which applies them to that request only (SkyPilot's env_vars), so
// they take effect without restarting a server started with other values.
// Only settings: never a token or secret, as the body is recorded.
var requestEnv = []string{EnvCatalogDir}

// ClientEnv is the requestEnv variables set in this process.
func ClientEnv() map[string]string {
	var out map[string]string
	for _, k := range requestEnv {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// TokenPrefix starts every service-account token.
const TokenPrefix = "sky_"

// CheckExposure refuses to serve on a non-loopback address without
// authentication: anyone who could reach the server would get admin
// rights. host "" is the default address (127.0.0.1, 0.0.0.0 with deploy).
func CheckExposure(host string, deploy, auth bool) error {
	if host == "" {
		host = "127.0.0.1"
		if deploy {
			host = "0.0.0.0"
		}
	}
	if !IsLoopback(host) && !auth {
		return fmt.Errorf("refusing to serve on %s without authentication: anyone who can reach it would get admin rights; "+
			"pass --enable-basic-auth (or ENABLE_BASIC_AUTH=true with SKYPILOT_INITIAL_BASIC_AUTH=user:password) or set ENABLE_SERVICE_ACCOUNTS=true", host)
	}
	return nil
}

// IsLoopback says whether host (a name or an IP, no port) is this
// machine's loopback: "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AuthFromEnv says which auth modes the environment turns on
// (ENABLE_BASIC_AUTH=true, ENABLE_SERVICE_ACCOUNTS=true).
func AuthFromEnv() (basic, serviceAccounts bool) {
	return strings.EqualFold(os.Getenv("ENABLE_BASIC_AUTH"), "true"), strings.EqualFold(os.Getenv("ENABLE_SERVICE_ACCOUNTS"), "true")
}

// PortFromEnv is the port named by SKYPILOT_API_SERVER_LOCAL_PORT, or
// DefaultPort.
func PortFromEnv() (int, error) {
	v := strings.TrimSpace(os.Getenv(EnvPort))
	if v == "" {
		return DefaultPort, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port number (1-65535)", EnvPort, v)
	}
	return p, nil
}

// RequestStatus is where an API request is in its life. The order matters:
// PENDING -> RUNNING -> one of the three final states.
type RequestStatus string

// Request statuses, as SkyPilot names them.
const (
	RequestPending   RequestStatus = "PENDING"
	RequestRunning   RequestStatus = "RUNNING"
	RequestSucceeded RequestStatus = "SUCCEEDED"
	RequestFailed    RequestStatus = "FAILED"
	RequestCancelled RequestStatus = "CANCELLED"
)

// Final reports whether no further transition is possible.
func (s RequestStatus) Final() bool {
	return s == RequestSucceeded || s == RequestFailed || s == RequestCancelled
}

// Request is one API request record: a row of the requests table, and
// what /api/get and /api/status answer. The JSON names are the ones
// SkyPilot's /api/get, /api/status and `sky api status -o json` use.
type Request struct {
	RequestID   string        `json:"request_id"`
	Name        string        `json:"name"`
	Entrypoint  string        `json:"entrypoint"`
	RequestBody string        `json:"request_body"`
	Status      RequestStatus `json:"status"`
	CreatedAt   float64       `json:"created_at"`
	// StartedAt is SkyGo's own; `sky api status -o json` leaves it out.
	StartedAt        *float64 `json:"started_at,omitempty"`
	FinishedAt       *float64 `json:"finished_at"`
	UserID           string   `json:"user_id"`
	UserName         string   `json:"user_name"`
	ReturnValue      string   `json:"return_value"`
	Error            string   `json:"error"`
	PID              *int     `json:"pid"`
	ScheduleType     string   `json:"schedule_type"`
	ClusterName      string   `json:"cluster_name"`
	StatusMsg        string   `json:"status_msg"`
	ShouldRetry      bool     `json:"should_retry"`
	FileMountsBlobID string   `json:"file_mounts_blob_id"`
	// ServerID names the API server that runs the request (host:port),
	// so a restarted server fails only what it left behind, not what
	// another live server sharing the database still runs. Not on the
	// wire.
	ServerID string `json:"-"`
}

// User is who a request runs as: the authenticated user, or on a server
// without authentication the machine's own user. ID is SkyPilot's user
// hash.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// RoleAdmin is User.Role of an admin (every user of a server without
// authentication is one).
const RoleAdmin = "admin"

// Health is the answer of GET /api/health (fields per spec/api.md; unset
// ones omitted).
type Health struct {
	Status                 string `json:"status"`
	APIVersion             string `json:"api_version,omitempty"`
	Version                string `json:"version,omitempty"`
	VersionOnDisk          string `json:"version_on_disk,omitempty"`
	Commit                 string `json:"commit,omitempty"`
	BasicAuthEnabled       *bool  `json:"basic_auth_enabled,omitempty"`
	ServiceAccountsEnabled *bool  `json:"service_account_token_enabled,omitempty"`
	User                   *User  `json:"user,omitempty"`
}

// DebugSleepBody is the body of /debug/sleep (`sky api debug-sleep`).
type DebugSleepBody struct {
	Seconds float64 `json:"seconds"`
}

// DebugSleepResult is what /debug/sleep returns.
type DebugSleepResult struct {
	Slept float64 `json:"slept_seconds"`
}
