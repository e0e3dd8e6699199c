package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Admin is a client of a levee service's admin endpoint
// (leveehttp.NewAdmin, mounted under admin.path, default /levee/admin):
// the drill API that forces a degradation level or a shed level until an
// expiry, reads what is in force, and ends it. Safe for concurrent use.
type Admin struct {
	// URL is the endpoint's prefix, e.g. http://127.0.0.1:8080/levee/admin.
	URL string
	// Token is sent as "Authorization: Bearer TOKEN" (admin.token).
	Token string
	// Client is the HTTP client; default one with a 5 s timeout.
	Client *http.Client
}

// DrillState is what the endpoint has in force (GET …/drill).
type DrillState struct {
	// DegradeMax is the highest degradation level of the service; 0 when
	// it has no degradation controller.
	DegradeMax int `json:"degrade_max"`
	// ShedSupported says whether the service can force a shed level.
	ShedSupported bool         `json:"shed_supported"`
	Degrade       *ForcedLevel `json:"degrade"`
	Shed          *ForcedLevel `json:"shed"`
}

// ForcedLevel is a level forced for a drill and the time it has left.
type ForcedLevel struct {
	Level      float64 `json:"level"`
	RemainingS float64 `json:"remaining_s"`
}

// AdminError is an answer of the admin endpoint other than 200.
type AdminError struct {
	Status int
	Msg    string // the endpoint's error message
	URL    string
}

func (e *AdminError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = " (the token is wrong or missing)"
	case http.StatusNotFound:
		hint = " (is admin.enabled true, and the URL the endpoint's prefix?)"
	case http.StatusNotImplemented:
		hint = " (the service cannot force that level)"
	}
	return fmt.Sprintf("load: admin endpoint %s answered %d: %s%s", e.URL, e.Status, e.Msg, hint)
}

// State returns the drill in force.
func (a *Admin) State(ctx context.Context) (DrillState, error) {
	return a.do(ctx, http.MethodGet, nil)
}

// Force forces a degradation level (degrade non-nil) and/or a shed level
// (shed non-nil) for d, after which the service ends the drill by
// itself, and returns the state in force.
func (a *Admin) Force(ctx context.Context, degrade *int, shed *float64, d time.Duration) (DrillState, error) {
	body := map[string]any{"duration": d.String()}
	if degrade != nil {
		body["degrade_level"] = *degrade
	}
	if shed != nil {
		body["shed_level"] = *shed
	}
	return a.do(ctx, http.MethodPost, body)
}

// End ends any drill in force.
func (a *Admin) End(ctx context.Context) error {
	_, err := a.do(ctx, http.MethodDelete, nil)
	return err
}

func (a *Admin) do(ctx context.Context, method string, body any) (DrillState, error) {
	var st DrillState
	url := strings.TrimSuffix(a.URL, "/") + "/drill"
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return st, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return st, fmt.Errorf("load: admin endpoint: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return st, fmt.Errorf("load: admin endpoint: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		return st, &AdminError{Status: resp.StatusCode, Msg: e.Error, URL: url}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("load: admin endpoint %s: not a drill document: %w", url, err)
	}
	return st, nil
}
