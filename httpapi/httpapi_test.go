package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/httpapi"
)

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   t.Name(),
		Level:  hclog.Debug,
		Output: writerFunc(func(p []byte) (int, error) { t.Log(strings.TrimRight(string(p), "\n")); return len(p), nil }),
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestHealth(t *testing.T) {
	srv := httptest.NewServer(httpapi.New(httpapi.Config{NodeID: 7, Logger: testLogger(t)}))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + httpapi.HealthPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"ok","node":7}`, string(body))
	var h httpapi.Health
	require.NoError(t, json.Unmarshal(body, &h))
	assert.Equal(t, httpapi.Health{Status: "ok", Node: 7}, h)
}

func TestHealthDegraded(t *testing.T) {
	var problems []string
	h := httpapi.New(httpapi.Config{NodeID: 2, Logger: testLogger(t), Problems: func() []string { return problems }})
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.HealthPath, nil))
		return rec
	}

	rec := get()
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok","node":2}`, rec.Body.String())

	problems = []string{"refusing connections: 5 on the rpc listener"}
	rec = get()
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"status":"degraded","node":2,"problems":["refusing connections: 5 on the rpc listener"]}`, rec.Body.String())

	problems = nil
	assert.Equal(t, http.StatusOK, get().Code, "healthy again once the problems are gone")
}

func TestRoutesAnswerOnlyTheirMethodsAndPaths(t *testing.T) {
	h := httpapi.New(httpapi.Config{NodeID: 1, Logger: testLogger(t)})
	tests := []struct {
		method, path string
		want         int
		allow        string // Allow header expected on a 405
	}{
		{http.MethodGet, "/api/health", http.StatusOK, ""},
		{http.MethodHead, "/api/health", http.StatusOK, ""},
		{http.MethodPost, "/api/health", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPut, "/api/health", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodDelete, "/api/health", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/", http.StatusNotFound, ""},
		{http.MethodGet, "/api", http.StatusNotFound, ""},
		{http.MethodGet, "/api/health/x", http.StatusNotFound, ""},
		{http.MethodGet, "/api/nope", http.StatusNotFound, ""},
		{http.MethodPost, "/nope", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			assert.Equal(t, tt.want, rec.Code)
			if tt.allow != "" {
				assert.Equal(t, tt.allow, rec.Header().Get("Allow"))
			}
		})
	}
}

func TestNilLoggerIsAllowed(t *testing.T) {
	rec := httptest.NewRecorder()
	httpapi.New(httpapi.Config{NodeID: 3}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.HealthPath, nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok","node":3}`, rec.Body.String())
}
