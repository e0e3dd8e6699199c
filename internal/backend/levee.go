package backend

import (
	"errors"
	"net/http"
)

// protect puts app behind levee. Placeholder until leveehttp lands.
func (s *Server) protect(app http.Handler) (http.Handler, error) {
	return nil, errors.New("backend: leveehttp not available yet")
}
