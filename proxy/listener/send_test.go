package listener

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestSend: the sidecar's own client sends as http.Client.Do did: a
// redirect is the answer, never followed, and credentials in the upstream
// URL still go out as basic authentication.
func TestSend(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		_, _ = w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer up.Close()
	for _, tc := range []struct {
		url, auth string
		status    int
	}{
		{up.URL + "/moved", "", http.StatusTemporaryRedirect},
		{up.URL + "/x", "", http.StatusOK},
		{"http://u:p@" + up.Listener.Addr().String() + "/x", "Basic dTpw", http.StatusOK},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, send := Send(nil, u, Limits{}, StreamLimits{})
		req, _ := http.NewRequest(http.MethodPost, tc.url, nil)
		resp, err := send(req)
		if err != nil {
			t.Fatal(err)
		}
		var b [64]byte
		n, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.status == http.StatusOK && string(b[:n]) != tc.auth) {
			t.Errorf("%s: %d %q, want %d %q", tc.url, resp.StatusCode, b[:n], tc.status, tc.auth)
		}
	}
}
