package http

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of this API; a test checks it
// against the routes the server registers.
//
//go:embed openapi.json
var openAPI []byte

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}
