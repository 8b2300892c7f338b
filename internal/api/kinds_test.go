package api

// The tests see every infrastructure kind, as the programs do (they link
// internal/infrakind/all).
import _ "github.com/skygo/skygo/internal/infrakind/all"
