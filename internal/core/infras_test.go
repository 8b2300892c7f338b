package core

// The operations name no infrastructure; the server program links the
// build's list of them (internal/servermain). The tests here run the
// operations as the server does, so they link the same list.
import _ "github.com/skygo/skygo/internal/infra/all"
